// The warnings a tensor's trend state supports, with their evidence, published case and advice
// (docs/early-warning.md lists them).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "fp8kit/warn/sources.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {
namespace {

Warning make(const std::string& signal, const std::string& file, const std::string& tensor) {
    Warning w;
    w.signal = signal;
    w.file = file;
    w.tensor = tensor;
    w.numbers = nlohmann::json::object();
    return w;
}

// "doubles every N steps", the growth in sensible units (a slope of 132 log2 per 1000 steps is
// not written as x2^132 per 1000 steps).
std::string doubling(double slope_per_k) {
    if (!(slope_per_k > 0)) return "not growing";
    return fmt::format("doubles every {:.3g} steps", 1000 / slope_per_k);
}

}  // namespace

std::vector<Warning> TensorTrend::warnings(const std::string& file) const {
    std::vector<Warning> out;
    const bool follows = delayed_ || windowed_;  // a recipe whose scale follows the amax is watched
    const std::int64_t warm = warmup_end();
    // Spikes: the worst one ranks the tensor; all kept ones are listed.
    if (spike_count_) {
        Warning w = make("spike", file, tensor_);
        const double ratio = static_cast<double>(worst_spike_.amax) / worst_spike_.median;
        w.step = spikes_.front().step;
        w.step_end = worst_spike_.step;
        w.severity = 1 + std::log2(ratio / cfg_->spike_k);
        std::string steps;
        nlohmann::json list = nlohmann::json::array();
        std::uint64_t overflowed = 0;
        for (const Spike& s : spikes_) {
            steps += fmt::format("{}{} ({:.3g}x{})", steps.empty() ? "" : ", ", s.step,
                                 static_cast<double>(s.amax) / s.median, s.overflow ? ", overflowed" : "");
            list.push_back({{"step", s.step}, {"amax", s.amax}, {"median", s.median}, {"overflow", s.overflow}});
            overflowed += s.overflow;
        }
        w.evidence = fmt::format(
            "{} step(s) with amax >= {:g} x the median of the previous {} amaxes: {}{}; worst at step {}: "
            "amax {:.6g} = {:.3g} x median {:.6g}; {} after warm-up (step >= {})",
            spike_count_, cfg_->spike_k, cfg_->spike_window, steps, spike_count_ > spikes_.size() ? ", ..." : "",
            worst_spike_.step, static_cast<double>(worst_spike_.amax), ratio, static_cast<double>(worst_spike_.median),
            spikes_late_, warm);
        w.numbers = {{"count", spike_count_}, {"spikes", list},
                     {"k", cfg_->spike_k},    {"window", cfg_->spike_window},
                     {"worst_ratio", ratio},  {"after_warmup", spikes_late_},
                     {"warmup_end", warm}};
        w.resembles = kCaseOutliers;
        w.advice = fmt::format(
            "a delayed scale is set before the spike arrives: keep {} binade(s) more margin for this tensor "
            "(--margin), or scale it from its current amax (current scaling); check the batch at step {}",
            static_cast<int>(std::ceil(std::log2(ratio))), worst_spike_.step);
        if (spikes_late_ == 0) {
            w.level = "info";
            w.note = fmt::format("early-training transient: every spike before step {} (warm-up)", warm);
        } else if (follows) {
            w.level = "info";
            w.note = "the watched recipe's scale covered it: a spike that overflows is reported as an overflow";
        }
        out.push_back(std::move(w));
    }
    // Growth: one warning per episode (new growth on a tensor warned before is a new episode).
    for (std::size_t k = 0; k < episodes_.size(); ++k) {
        const GrowthEpisode& e = episodes_[k];
        const GrowthFit& g = e.steepest;
        Warning w = make("growth", file, tensor_);
        w.step = e.first_step;
        w.step_end = g.to_step;
        w.severity = 1 + std::log2(std::max(g.slope_per_k - e.baseline_per_k, cfg_->growth_per_k) / cfg_->growth_per_k);
        const GrowthFit& f = e.first;
        w.evidence = fmt::format(
            "amax grows {:.3g} log2 per 1000 steps ({}; +- {:.2g}, least squares over the {} points of steps "
            "{}..{}){}; "
            "over that window {:.6g} -> {:.6g} (x{:.3g}); first seen at step {} ({:.3g} log2/1000 over steps {}..{}); "
            "threshold {:g} log2/1000 and {:g} standard errors; episode {} of {}; whole-run slope {:.3g} log2/1000",
            g.slope_per_k, doubling(g.slope_per_k), g.se_per_k, g.window, g.from_step, g.to_step,
            e.baseline_per_k != 0 ? fmt::format(", up from {:.3g} before (new growth)", e.baseline_per_k)
                                  : std::string(),
            std::exp2(g.from_l2), std::exp2(g.to_l2), std::exp2(g.to_l2 - g.from_l2), e.first_step, f.slope_per_k,
            f.from_step, f.to_step, cfg_->growth_per_k, cfg_->growth_z, k + 1, episode_count_, run_slope_per_k());
        w.numbers = {
            {"slope_log2_per_1000", g.slope_per_k},
            {"se_log2_per_1000", g.se_per_k},
            {"window", g.window},
            {"from_step", g.from_step},
            {"to_step", g.to_step},
            {"from_amax", std::exp2(g.from_l2)},
            {"to_amax", std::exp2(g.to_l2)},
            {"first_step", e.first_step},
            {"first",
             {{"window", f.window},
              {"to_step", f.to_step},
              {"slope_log2_per_1000", f.slope_per_k},
              {"se_log2_per_1000", f.se_per_k}}},
            {"baseline_log2_per_1000", e.baseline_per_k},
            {"threshold", cfg_->growth_per_k},
            {"z", cfg_->growth_z},
            {"doubling_steps", g.slope_per_k > 0 ? nlohmann::json(1000 / g.slope_per_k) : nlohmann::json(nullptr)},
            {"episode", k + 1},
            {"episodes", episode_count_}};
        w.resembles = kCaseOutliers;
        w.advice =
            "a delayed scale absorbs slow growth, but growth per step faster than history + margin overflows: "
            "watch its overflow forecast; for SwiGLU layers consider Smooth-SwiGLU per-channel scaling "
            "(arXiv 2409.12517), else keep the layer in BF16 or use current scaling";
        if (e.first_step < warm) {
            w.level = "info";
            w.note = fmt::format("early-training transient: amaxes settle during warm-up (before step {})", warm);
        } else if (follows) {
            w.level = "info";
            w.note =
                "the watched recipe's scale follows slow growth: the overflow and overflow-forecast signals say when "
                "it does not";
        } else if (g.slope_per_k < cfg_->growth_top) {
            w.level = "info";
            w.note = fmt::format("slower than {:g} log2 per 1000 steps", cfg_->growth_top);
        }
        out.push_back(std::move(w));
    }
    if (nonfinite_) {
        Warning w = make("nonfinite", file, tensor_);
        w.step = nonfinite_first_;
        w.severity = 9;
        w.evidence =
            fmt::format("{} step(s) with an Inf or NaN amax, the first at step {}", nonfinite_, nonfinite_first_);
        w.numbers = {{"count", nonfinite_}, {"first_step", nonfinite_first_}};
        w.resembles = kCaseDivergence;
        w.advice =
            "the data itself held Inf/NaN: no scale helps; find the first step's cause (loss scale, LR, an overflowing "
            "cast upstream)";
        out.push_back(std::move(w));
    }
    if (overflow_count_) {
        Warning w = make("overflow", file, tensor_);
        w.step = overflow_first_;
        w.step_end = overflow_runs_.empty() ? overflow_first_ : overflow_runs_.back().second;
        w.severity = 8 + std::log2(static_cast<double>(overflow_count_));
        nlohmann::json runs = nlohmann::json::array();
        for (const auto& [a, b] : overflow_runs_) runs.push_back({a, b});
        w.evidence = fmt::format(
            "{} step(s) overflow {} under recipe {}: steps {}{}; worst headroom {:.4g} at step {}; {} after warm-up "
            "(step >= {})",
            overflow_count_, name(format_), cfg_->recipe->name, step_runs(overflow_runs_),
            overflow_truncated_ ? fmt::format(" (the first {} runs listed)", kOverflowRuns) : std::string(),
            overflow_worst_, overflow_worst_step_, overflow_late_, warm);
        w.numbers = {{"count", overflow_count_},
                     {"first_step", overflow_first_},
                     {"worst_headroom", overflow_worst_},
                     {"worst_step", overflow_worst_step_},
                     {"steps", runs},
                     {"steps_truncated", overflow_truncated_},
                     {"after_warmup", overflow_late_},
                     {"warmup_end", warm},
                     {"format", std::string(name(format_))},
                     {"recipe", cfg_->recipe->name},
                     {"margin", cfg_->recipe->margin},
                     {"extra_margin_after_warmup", margin_json(overflow_margin_late_)},
                     {"extra_margin_all", margin_json(overflow_margin_all_)}};
        w.resembles = kCaseOutliers;
        w.advice = fmt::format("{}; or shorten the amax history so the scale follows; or current scaling",
                               margin_advice(cfg_->recipe->margin, overflow_margin_late_, overflow_margin_all_));
        if (overflow_late_ == 0) {
            w.level = "info";
            w.note = fmt::format(
                "early-training transient: every overflow before step {}, while amaxes climb past the history's "
                "maximum (warm-up)",
                warm);
        } else if (sparse()) {
            w.level = "info";
            w.note =
                "the series skips steps (a dump's steps, a monitor's every > 1): the recipe's history between its "
                "points is "
                "not seen, so its overflows are a model of the recipe, not a replay; watch a per-step trace";
        }
        out.push_back(std::move(w));
    }
    if (forecast_first_.step >= 0) {
        const Forecast& f =
            forecast_last_.probability >= forecast_first_.probability ? forecast_last_ : forecast_first_;
        Warning w = make("overflow-forecast", file, tensor_);
        w.step = forecast_first_.step;
        w.step_end = f.step;
        w.severity = 1 + f.probability;
        const double need = f.median_growth + 4 * f.sigma + f.l2_headroom;  // binades short of a 4-sigma step
        w.evidence = fmt::format(
            "under {} ({}), the next cast leaves {:.3g} binades of headroom while amax moves {:.3g} +- {:.3g} binades "
            "per step "
            "(median, 1.4826 MAD): P(overflow within {:g} steps) = {:.3g} at step {} (first >= {:g} at step {})",
            cfg_->recipe->name, name(format_), -f.l2_headroom, f.median_growth, f.sigma, cfg_->forecast_horizon,
            f.probability, f.step, cfg_->forecast_probability, forecast_first_.step);
        w.numbers = {{"probability", f.probability},
                     {"per_step", f.per_step},
                     {"log2_headroom", f.l2_headroom},
                     {"median_growth", f.median_growth},
                     {"sigma", f.sigma},
                     {"horizon", cfg_->forecast_horizon},
                     {"step", f.step},
                     {"first_step", forecast_first_.step}};
        w.resembles = kCaseOutliers;
        w.advice = fmt::format(
            "margin +{} (covers 4 sigma of per-step growth), a shorter history, or current scaling for this tensor",
            std::max(1, static_cast<int>(std::ceil(need))));
        if (overflow_late_ > 0) {
            w.level = "info";
            w.note = "folded into this tensor's overflow warning";
        } else if (forecast_last_.step < warm || forecast_last_.probability < cfg_->forecast_probability) {
            w.level = "info";
            w.note = fmt::format("no longer forecast after warm-up (step {}): P = {:.3g} at step {}", warm,
                                 forecast_last_.probability, forecast_last_.step);
        }
        out.push_back(std::move(w));
    }
    if (cfg_->fixed_calibration > 0 && fixed_scale_ > 0) {
        const double h = std::log2(static_cast<double>(last_amax_) * fixed_scale_ / fp8_max(format_));
        const double slope = run_slope_per_k() / 1000;
        nlohmann::json lv = nlohmann::json::array();
        std::string txt;
        bool warn_it = false;
        for (std::size_t i = 0; i < cfg_->fixed_levels.size(); ++i) {
            const double level = cfg_->fixed_levels[i];
            nlohmann::json e = {{"log2_headroom", level}, {"reached_step", fixed_reached_[i]}};
            double eta = NAN;
            if (fixed_reached_[i] < 0 && slope > 0) eta = (level - h) / slope;
            if (!std::isnan(eta)) e["forecast_steps"] = eta;
            lv.push_back(e);
            if (fixed_reached_[i] >= 0)
                txt += fmt::format("; 2^{:g} of max reached at step {}", level, fixed_reached_[i]);
            else if (!std::isnan(eta))
                txt += fmt::format("; 2^{:g} of max in ~{:.0f} steps", level, eta);
            if (level >= 0 && (fixed_reached_[i] >= 0 || (!std::isnan(eta) && eta <= cfg_->forecast_horizon)))
                warn_it = true;
        }
        if (warn_it) {
            Warning w = make("fixed-scale", file, tensor_);
            w.step = last_step_;
            w.severity = 2 + h;
            w.evidence = fmt::format(
                "fixed scale {:.6g} (calibrated on the first {} points, amax {:.6g}): headroom now 2^{:.3g}, "
                "run slope {:.3g} log2/1000 steps{}",
                static_cast<double>(fixed_scale_), cfg_->fixed_calibration, static_cast<double>(fixed_calib_amax_), h,
                slope * 1000, txt);
            w.numbers = {{"scale", fixed_scale_},
                         {"calibration_amax", fixed_calib_amax_},
                         {"log2_headroom", h},
                         {"slope_log2_per_1000", slope * 1000},
                         {"levels", lv}};
            w.resembles = kCaseOutliers;
            w.advice =
                "recalibrate the fixed scale on later data or leave headroom (calibrate with a margin of the forecast "
                "overshoot)";
            out.push_back(std::move(w));
        }
    }
    return out;
}

}  // namespace fp8kit::warn
