// Trend analysis of per-step amax series (docs/early-warning.md), incremental: a monitor feeds
// each tensor's amax as the run trains (observe) and asks for the warnings at any interval
// (warnings / Watcher::poll). Memory is bounded per tensor (a few fixed windows), never by the
// number of steps. Signals:
//  - growth:  least-squares slope of log2 amax over the last 16, 32, ... `window` points, in log2
//             per 1000 steps, flagged when it is at least `growth_per_k` and `growth_z` standard
//             errors above the baseline (0, or within a growth episode the slope already reported:
//             new growth on a tensor warned before is reported again as a new episode);
//  - spike:   amax >= spike_k x median of the previous spike_window amaxes;
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
#include "fp8kit/warn/grad_norm.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {

struct TrendConfig {
    int window = 128;               // points kept: the longest growth window and the forecast's (even, 8 .. 4096)
    int growth_min_window = 16;     // the shortest growth window; windows double up to `window` (>= 8)
    double growth_per_k = 4;        // growth: slope above the baseline >= this many log2 per 1000 steps
    double growth_z = 5;            // ... and >= this many standard errors of the slope
    int growth_gap = 32;            // an episode ends after this many points without growth >= growth_per_k
    std::size_t episodes_kept = 8;  // growth episodes listed per tensor (all are counted)
    double growth_top = 25;         // growth is top-level (no following recipe, after warm-up) from this slope
    int spike_window = 32;          // spike: median over this many previous amaxes (4 .. 4096)
    double spike_k = 8;             // spike: amax >= spike_k x that median
    std::size_t spikes_kept = 16;   // spikes listed per tensor (all are counted)
    int eval_every = 4;             // growth and forecast are evaluated every this many points
    // Early training: events in a tensor's first `warmup` steps (from its first step) are
    // transients, reported in the info section rather than as top-level warnings.
    std::int64_t warmup = 100;
    // Forecast under the recipe (kind delayed or windowed; per-tensor granularity for the role).
    std::optional<RecipeSpec> recipe;   // none: no overflow/forecast signals
    std::optional<Format> format;       // the cast format; none: the recipe's format per role
    double forecast_horizon = 1000;     // steps ahead
    double forecast_probability = 0.5;  // warn when P(overflow within the horizon) >= this
    // Fixed (inference) scale: calibrated on the first `fixed_calibration` points (0: off) with
    // `fixed_recipe`'s rule (a current-scaling recipe); levels in log2 of the headroom.
    int fixed_calibration = 0;
    std::optional<RecipeSpec> fixed_recipe;
    std::vector<double> fixed_levels{-2, -1, 0};
};
// Throws std::invalid_argument naming the field when a setting is out of range.
void check(const TrendConfig& c);

// The growth signal's detection delay in steps for growth of rate_per_k (log2 per 1000 steps)
// starting on a series of white noise sigma (log2 amax per point, one point per step): the
// smallest window W of the ladder (growth_min_window, doubling, up to window) whose slope standard
// error se_W = 1000 sigma sqrt(12 / (W (W^2 - 1))) satisfies rate - growth_per_k >= 2 se_W and
// rate >= (t_quantile(growth_z, W - 2) + 2) se_W (a fit over W points inside the growth then passes with
// probability >= 97.7%), plus eval_every. -1 when no window of the ladder does (a longer
// `window` is needed). docs/early-warning.md derives it.
int growth_detection_delay(const TrendConfig& c, double sigma, double rate_per_k);
// Student's t quantile with `dof` degrees of freedom at the tail probability of the normal
// quantile z (Cornish-Fisher, two terms): the growth test's "growth_z standard errors" for a fit
// over W points is t_quantile(growth_z, W - 2) of them.
double t_quantile(double z, double dof);
// Robust noise of a series in log2 per point: 1.4826 x the MAD of the second differences of
// log2 amax, / sqrt(6) (white noise of sigma gives sigma; a straight trend gives 0). Zero and
// non-finite amaxes are left out. NaN with fewer than 8 points.
double noise_log2(const std::vector<float>& amax);

struct Spike {
    std::int64_t step;
    float amax;
    float median;           // of the previous spike_window amaxes
    bool overflow = false;  // the recipe's cast overflowed at this step
};

// A least-squares fit of log2 amax over the last `window` points (steps as x).
struct GrowthFit {
    int window = 0;
    std::int64_t from_step = -1, to_step = -1;
    double slope_per_k = 0, se_per_k = 0;  // log2 per 1000 steps, and its standard error
    double from_l2 = 0, to_l2 = 0;         // log2 amax at the window's ends (data, not fit)
};

// One growth episode: opened when a window's slope is past 0 (or, within an open episode, when a
// window's slope is past the lowest it showed since it filled after the last report: new
// growth), and closed after growth_gap points in which no window up to its local one (the one
// that opened it, at least the ladder's second) shows growth.
struct GrowthEpisode {
    std::int64_t first_step = -1;  // the step the growth was first flagged
    double baseline_per_k = 0;     // the slope it is measured against (0: no growth before)
    GrowthFit first, steepest;
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
    // Spikes at or after the tensor's warm-up (cfg.warmup steps after its first step).
    std::uint64_t spikes_after_warmup() const { return spikes_late_; }
    std::int64_t first_step() const { return first_step_; }
    std::int64_t warmup_end() const { return first_step_ + cfg_->warmup; }
    // More than half of the points come more than one step after the previous one (a dump's
    // steps, a monitor with every > 1): what a delayed scale did between them is not seen.
    bool sparse() const { return n_ > 1 && 2 * gapped_ > n_ - 1; }
    const std::vector<GrowthEpisode>& growth_episodes() const { return episodes_; }
    std::uint64_t growth_episode_count() const { return episode_count_; }
    // Every overflowing step under the recipe, as runs [first, last] of consecutive points.
    const std::vector<std::pair<std::int64_t, std::int64_t>>& overflow_runs() const { return overflow_runs_; }
    static constexpr std::size_t kSample = 64;
    static constexpr std::size_t kOverflowRuns = 4096;  // overflow runs listed per tensor (all steps counted)
    static constexpr int kMaxExtraMargin = 64;          // extra margins tried per overflowing step

private:
    void evaluate(std::int64_t step);
    GrowthFit fit(std::size_t w) const;
    void sample(std::int64_t step, double l2);
    void forecast(std::int64_t step, float amax);
    // The smallest d in 1..kMaxExtraMargin with no overflow at this step under the recipe's margin
    // + d; -1 when no margin removes it (an Inf amax, a scale no margin changes). See the .cpp.
    int extra_margin(float amax, float scale) const;

    std::string tensor_;
    Role role_;
    const TrendConfig* cfg_;
    std::uint64_t n_ = 0;          // points observed
    std::uint64_t valid_ = 0;      // finite nonzero points
    std::uint64_t nonfinite_ = 0;  // Inf or NaN amaxes
    std::int64_t nonfinite_first_ = -1;
    std::int64_t last_step_ = 0;
    std::int64_t first_step_ = 0;
    std::uint64_t gapped_ = 0;  // points more than one step after the previous one
    // Ring of the last `window` finite nonzero points (step, log2 amax) and amaxes for spikes.
    std::vector<std::int64_t> ring_step_;
    std::vector<double> ring_l2_;
    std::size_t ring_n_ = 0, ring_head_ = 0;
    std::vector<double> g_sorted_;  // per-step growth between consecutive ring points, ascending
    std::vector<float> spike_ring_;
    std::vector<float> spike_sorted_;  // the same window, ascending
    std::size_t spike_n_ = 0, spike_head_ = 0;
    std::vector<Spike> spikes_;
    std::uint64_t spike_count_ = 0, spikes_late_ = 0;
    Spike worst_spike_{-1, 0, 0};
    // Growth episodes (the first episodes_kept), the open one's state.
    double recent_slope_ = 0;
    std::vector<GrowthEpisode> episodes_;
    std::uint64_t episode_count_ = 0;
    bool in_episode_ = false;
    std::uint64_t last_pass_n_ = 0;  // the point at which the local windows last showed growth
    std::uint64_t report_n_ = 0;     // the point of the last report
    std::size_t local_ = 1;          // the open episode's local window (index in the ladder)
    std::vector<double> baseline_;   // per window: lowest slope since its ramp after the report
    std::ptrdiff_t open_ = -1;       // index of the open episode in episodes_ (-1: none kept open)
    // Decimated whole-run sample: every stride-th point, stride doubling when full.
    std::vector<std::int64_t> smp_step_;
    std::vector<double> smp_l2_;
    std::uint64_t smp_stride_ = 1;
    // Scale following (recipe): one of the two, by kind.
    std::unique_ptr<DelayedScaling> delayed_;
    std::unique_ptr<MsampScaling> windowed_;
    Format format_ = Format::e4m3;
    Rounding rounding_ = Rounding::nearest_even;  // the role's rounding (RecipeSpec::policy_for): replay::overflows
    std::uint64_t overflow_count_ = 0, overflow_late_ = 0;
    std::int64_t overflow_first_ = -1, overflow_worst_step_ = -1;
    double overflow_worst_ = 0;  // headroom amax*scale/max
    // The margin to add so that no overflow of the tensor remains, after warm-up and over all its
    // steps: the largest over its overflowing steps of extra_margin(); -1 when some step has none.
    int overflow_margin_late_ = 0, overflow_margin_all_ = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> overflow_runs_;
    std::uint64_t overflow_last_n_ = 0;  // the point of the last overflow (runs join consecutive points)
    bool overflow_now_ = false;          // this point's cast overflowed
    bool overflow_truncated_ = false;    // more runs than kOverflowRuns: the rest counted only
    float prev_amax_ = 0;
    double next_l2_headroom_ = NAN;                           // log2 headroom of the next step if amax stays the same
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
    // The run's gradient norm at `step` (the run-level verdict, warn/grad_norm.hpp): its flag is
    // one more top-level warning, "grad-norm-growth".
    void observe_grad_norm(std::int64_t step, double norm) { grad_norm_.observe(step, norm); }
    const GradNormVerdict& grad_norm() const { return grad_norm_; }

private:
    std::unique_ptr<TrendConfig> cfg_;  // stable address: trends point at it
    std::string file_;
    GradNormVerdict grad_norm_;
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
