// Trend analysis of per-step amax series (docs/early-warning.md), incremental: a monitor feeds
// each tensor's amax as the run trains (observe) and asks for the warnings at any interval
// (warnings / Watcher::poll). Memory is bounded per tensor (a few fixed windows), never by the
// number of steps. Signals:
//  - growth:  robust slope of log2 amax over the last `window` points (median of the window/2
//             lagged pair slopes; a Theil-Sen variant over disjoint pairs), in log2 per 1000 steps;
//  - spike:   amax > spike_k x median of the previous spike_window amaxes;
//  - overflow (observed) and overflow-forecast under the recipe's delayed/windowed scale
//             (recipes.hpp's DelayedScaling / MsampScaling give the scale; replay::overflows
//             decides an overflow): the chance that the next per-step growth exceeds the
//             headroom the history's scale leaves, from the median and MAD of per-step growth;
//  - fixed-scale: for inference's fixed scale (calibrated on the first steps with a current-
//             scaling recipe's rule), the step at which amax reaches each level of the range.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "fp8kit/io/trace.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {

struct TrendConfig {
    int window = 64;                 // growth: points in the slope window (even, 8 .. 4096)
    double growth_per_k = 25;        // growth warning: slope >= this many log2 per 1000 steps
    double growth_agree = 0.9;       // ... and at least this fraction of the pair slopes > 0
    int spike_window = 32;           // spike: median over this many previous amaxes (4 .. 4096)
    double spike_k = 16;             // spike: amax > spike_k x that median
    std::size_t spikes_kept = 16;    // spikes listed per tensor (all are counted)
    int eval_every = 16;             // growth and forecast are evaluated every this many points
    // Forecast under the recipe (kind delayed or windowed; per-tensor granularity for the role).
    std::optional<RecipeSpec> recipe;  // none: no overflow/forecast signals
    std::optional<Format> format;      // the cast format; none: the recipe's format per role
    double forecast_horizon = 1000;    // steps ahead
    double forecast_probability = 0.5; // warn when P(overflow within the horizon) >= this
    // Fixed (inference) scale: calibrated on the first `fixed_calibration` points (0: off) with
    // `fixed_recipe`'s rule (a current-scaling recipe); levels in log2 of the headroom.
    int fixed_calibration = 0;
    std::optional<RecipeSpec> fixed_recipe;
    std::vector<double> fixed_levels{-2, -1, 0};
};
// Throws std::invalid_argument naming the field when a setting is out of range.
void check(const TrendConfig& c);

struct Spike {
    std::int64_t step;
    float amax;
    float median;  // of the previous spike_window amaxes
};

// One tensor's state.
class TensorTrend {
public:
    TensorTrend(std::string tensor, Role role, const TrendConfig* cfg);
    // This step's amax; steps strictly increasing (std::invalid_argument otherwise).
    void observe(std::int64_t step, float amax);
    // The warnings the data so far supports (at most one per signal; spikes: one listing them).
    std::vector<Warning> warnings(const std::string& file) const;
    // Whole-run robust slope (Theil-Sen over all pairs of a decimated sample of at most
    // kSample points spread over the run), log2 per 1000 steps; NaN with < 2 points.
    double run_slope_per_k() const;
    double recent_slope_per_k() const { return recent_slope_ * 1000; }
    const std::string& tensor() const { return tensor_; }
    std::uint64_t points() const { return n_; }
    std::int64_t last_step() const { return last_step_; }
    std::uint64_t spike_count() const { return spike_count_; }
    const std::vector<Spike>& spikes() const { return spikes_; }
    static constexpr std::size_t kSample = 64;

private:
    void evaluate(std::int64_t step);
    void sample(std::int64_t step, double l2);
    void forecast(std::int64_t step, float amax);

    std::string tensor_;
    Role role_;
    const TrendConfig* cfg_;
    std::uint64_t n_ = 0;          // points observed
    std::uint64_t valid_ = 0;      // finite nonzero points
    std::uint64_t nonfinite_ = 0;  // Inf or NaN amaxes
    std::int64_t nonfinite_first_ = -1;
    std::int64_t last_step_ = 0;
    // Ring of the last `window` finite nonzero points (step, log2 amax) and amaxes for spikes.
    std::vector<std::int64_t> ring_step_;
    std::vector<double> ring_l2_;
    std::size_t ring_n_ = 0, ring_head_ = 0;
    std::vector<double> g_sorted_;  // per-step growth between consecutive ring points, ascending
    std::vector<float> spike_ring_;
    std::vector<float> spike_sorted_;  // the same window, ascending
    std::size_t spike_n_ = 0, spike_head_ = 0;
    std::vector<Spike> spikes_;
    std::uint64_t spike_count_ = 0;
    Spike worst_spike_{-1, 0, 0};
    // Growth: the first window that met the criteria and the steepest one.
    double recent_slope_ = 0, recent_agree_ = 0;
    struct Growth {
        std::int64_t first_step = -1, from_step = -1, to_step = -1;
        double slope_per_k = 0, agree = 0, from_l2 = 0, to_l2 = 0;
    } growth_first_, growth_max_;
    // Decimated whole-run sample: every stride-th point, stride doubling when full.
    std::vector<std::int64_t> smp_step_;
    std::vector<double> smp_l2_;
    std::uint64_t smp_stride_ = 1;
    // Scale following (recipe): one of the two, by kind.
    std::unique_ptr<DelayedScaling> delayed_;
    std::unique_ptr<MsampScaling> windowed_;
    Format format_ = Format::e4m3;
    Rounding rounding_ = Rounding::nearest_even;  // the role's rounding (RecipeSpec::policy_for): replay::overflows
    std::uint64_t overflow_count_ = 0;
    std::int64_t overflow_first_ = -1;
    double overflow_worst_ = 0;  // headroom amax*scale/max
    float prev_amax_ = 0;
    double next_l2_headroom_ = NAN;  // log2 headroom of the next step if amax stays the same
    float last_headroom_amax_ = 0, last_headroom_scale_ = 0;  // the last finite nonzero amax, next scale
    struct Forecast {
        std::int64_t step = -1;
        double probability = 0, l2_headroom = 0, median_growth = 0, sigma = 0, per_step = 0;
    } forecast_first_, forecast_last_;
    // Fixed scale.
    float fixed_calib_amax_ = 0;
    float fixed_scale_ = 0;  // 0 until calibrated
    float last_amax_ = 0;
    std::int64_t fixed_reached_[8] = {-1, -1, -1, -1, -1, -1, -1, -1};
};

// Many tensors, by name. Not thread-safe for concurrent observe; observe_series of different
// tensors may run in parallel (watch_traces does).
class Watcher {
public:
    explicit Watcher(TrendConfig cfg, std::string file = "");
    std::size_t id(std::string_view tensor, std::optional<Role> role = std::nullopt);  // adds it when new
    void observe(std::size_t id, std::int64_t step, float amax) { trends_[id].observe(step, amax); }
    void observe(std::string_view tensor, std::int64_t step, float amax) { observe(id(tensor), step, amax); }
    // One step of a monitor: the amax of each named tensor at `step`.
    void observe_step(std::int64_t step, const std::vector<std::string>& tensors, const std::vector<float>& amax);
    // All warnings now, ranked.
    std::vector<Warning> warnings() const;
    // The warnings whose (tensor, signal) was not returned by an earlier poll: what a monitor
    // raises at each interval.
    std::vector<Warning> poll();
    const std::vector<TensorTrend>& trends() const { return trends_; }
    std::vector<TensorTrend>& trends() { return trends_; }
    const TrendConfig& config() const { return *cfg_; }
    const std::string& file() const { return file_; }

private:
    std::unique_ptr<TrendConfig> cfg_;  // stable address: trends point at it
    std::string file_;
    std::vector<TensorTrend> trends_;
    std::unordered_map<std::string, std::size_t> index_;
    std::unordered_map<std::string, std::int64_t> polled_;  // tensor + '\0' + signal -> step
};

// A whole trace: every series fed in step order (series in parallel over the thread pool's
// threads; each series' result depends only on itself).
void watch_trace(Watcher& w, const trace::Trace& t);

// A CSV trace or dlfw-inspect log fed to a fresh watcher `w` row by row as it is read (series
// matching `patterns`, all when empty): memory bounded by the tensors, not the steps, and the same
// state as watch_trace on the whole file. Returns false, with `w` partly fed, when a tensor's
// steps do not increase in file order or no tensor matches: the caller then reads the file whole
// (trace::load_trace + watch_trace), which sorts the steps or gives the error message. Bad input
// throws trace::TraceError naming the file and line.
bool watch_stream(Watcher& w, const std::string& path, const std::vector<std::string>& patterns);

}  // namespace fp8kit::warn
