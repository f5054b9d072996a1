// The warnings a tensor's trend state supports, with their evidence, published case and advice
// (docs/early-warning.md lists them).
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

}  // namespace

std::vector<Warning> TensorTrend::warnings(const std::string& file) const {
    std::vector<Warning> out;
    // Spikes: the worst one ranks the tensor; all kept ones are listed.
    if (spike_count_) {
        Warning w = make("spike", file, tensor_);
        const double ratio = static_cast<double>(worst_spike_.amax) / worst_spike_.median;
        w.step = spikes_.front().step;
        w.step_end = worst_spike_.step;
        w.severity = 1 + std::log2(ratio / cfg_->spike_k);
        std::string steps;
        nlohmann::json list = nlohmann::json::array();
        for (const Spike& s : spikes_) {
            steps += fmt::format("{}{} ({:.3g}x)", steps.empty() ? "" : ", ", s.step, static_cast<double>(s.amax) / s.median);
            list.push_back({{"step", s.step}, {"amax", s.amax}, {"median", s.median}});
        }
        w.evidence = fmt::format("{} step(s) with amax > {:g} x the median of the previous {} amaxes: {}{}; worst at step {}: "
                                 "amax {:.6g} = {:.3g} x median {:.6g}",
                                 spike_count_, cfg_->spike_k, cfg_->spike_window, steps,
                                 spike_count_ > spikes_.size() ? ", ..." : "", worst_spike_.step,
                                 static_cast<double>(worst_spike_.amax), ratio, static_cast<double>(worst_spike_.median));
        w.numbers = {{"count", spike_count_}, {"spikes", list}, {"k", cfg_->spike_k}, {"window", cfg_->spike_window},
                     {"worst_ratio", ratio}};
        w.resembles = kCaseOutliers;
        w.advice = fmt::format("a delayed scale is set before the spike arrives: keep {} binade(s) more margin for this tensor "
                               "(--margin), or scale it from its current amax (current scaling); check the batch at step {}",
                               static_cast<int>(std::ceil(std::log2(ratio))), worst_spike_.step);
        out.push_back(std::move(w));
    }
    if (growth_first_.first_step >= 0) {
        const Growth& g = growth_max_;
        Warning w = make("growth", file, tensor_);
        w.step = growth_first_.first_step;
        w.step_end = g.to_step;
        w.severity = 1 + std::log2(g.slope_per_k / cfg_->growth_per_k);
        w.evidence = fmt::format(
            "amax grows {:.3g} log2 per 1000 steps (x{:.3g} per 1000 steps) over steps {}..{} ({:.0f}% of pair slopes up): "
            "{:.6g} -> {:.6g}; first seen at step {} (threshold {:g}); whole-run slope {:.3g} log2/1000 steps",
            g.slope_per_k, std::exp2(g.slope_per_k), g.from_step, g.to_step, 100 * g.agree, std::exp2(g.from_l2),
            std::exp2(g.to_l2), growth_first_.first_step, cfg_->growth_per_k, run_slope_per_k());
        w.numbers = {{"slope_log2_per_1000", g.slope_per_k}, {"agree", g.agree}, {"from_step", g.from_step},
                     {"to_step", g.to_step}, {"from_amax", std::exp2(g.from_l2)}, {"to_amax", std::exp2(g.to_l2)},
                     {"first_step", growth_first_.first_step}, {"threshold", cfg_->growth_per_k}};
        w.resembles = kCaseOutliers;
        w.advice = "a delayed scale absorbs slow growth, but growth per step faster than history + margin overflows: "
                   "watch its overflow forecast; for SwiGLU layers consider Smooth-SwiGLU per-channel scaling "
                   "(arXiv 2409.12517), else keep the layer in BF16 or use current scaling";
        out.push_back(std::move(w));
    }
    if (nonfinite_) {
        Warning w = make("nonfinite", file, tensor_);
        w.step = nonfinite_first_;
        w.severity = 9;
        w.evidence = fmt::format("{} step(s) with an Inf or NaN amax, the first at step {}", nonfinite_, nonfinite_first_);
        w.numbers = {{"count", nonfinite_}, {"first_step", nonfinite_first_}};
        w.resembles = kCaseDivergence;
        w.advice = "the data itself held Inf/NaN: no scale helps; find the first step's cause (loss scale, LR, an overflowing cast upstream)";
        out.push_back(std::move(w));
    }
    if (overflow_count_) {
        Warning w = make("overflow", file, tensor_);
        w.step = overflow_first_;
        w.severity = 8 + std::log2(static_cast<double>(overflow_count_));
        w.evidence = fmt::format("{} step(s) overflow {} under recipe {} (first at step {}, worst headroom {:.4g})",
                                 overflow_count_, name(format_), cfg_->recipe->name, overflow_first_, overflow_worst_);
        w.numbers = {{"count", overflow_count_}, {"first_step", overflow_first_}, {"worst_headroom", overflow_worst_},
                     {"format", std::string(name(format_))}, {"recipe", cfg_->recipe->name}};
        w.resembles = kCaseOutliers;
        w.advice = fmt::format("raise the margin by {} or shorten the amax history so the scale follows; or current scaling",
                               std::max(1, static_cast<int>(std::ceil(std::log2(overflow_worst_)))));
        out.push_back(std::move(w));
    }
    if (forecast_first_.step >= 0) {
        const Forecast& f = forecast_last_.probability >= forecast_first_.probability ? forecast_last_ : forecast_first_;
        Warning w = make("overflow-forecast", file, tensor_);
        w.step = forecast_first_.step;
        w.step_end = f.step;
        w.severity = 1 + f.probability;
        const double need = f.median_growth + 4 * f.sigma + f.l2_headroom;  // binades short of a 4-sigma step
        w.evidence = fmt::format(
            "under {} ({}), the next cast leaves {:.3g} binades of headroom while amax moves {:.3g} +- {:.3g} binades per step "
            "(median, 1.4826 MAD): P(overflow within {:g} steps) = {:.3g} at step {} (first >= {:g} at step {})",
            cfg_->recipe->name, name(format_), -f.l2_headroom, f.median_growth, f.sigma, cfg_->forecast_horizon,
            f.probability, f.step, cfg_->forecast_probability, forecast_first_.step);
        w.numbers = {{"probability", f.probability}, {"per_step", f.per_step}, {"log2_headroom", f.l2_headroom},
                     {"median_growth", f.median_growth}, {"sigma", f.sigma}, {"horizon", cfg_->forecast_horizon},
                     {"step", f.step}, {"first_step", forecast_first_.step}};
        w.resembles = kCaseOutliers;
        w.advice = fmt::format("margin +{} (covers 4 sigma of per-step growth), a shorter history, or current scaling for this tensor",
                               std::max(1, static_cast<int>(std::ceil(need))));
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
            if (fixed_reached_[i] >= 0) txt += fmt::format("; 2^{:g} of max reached at step {}", level, fixed_reached_[i]);
            else if (!std::isnan(eta)) txt += fmt::format("; 2^{:g} of max in ~{:.0f} steps", level, eta);
            if (level >= 0 && (fixed_reached_[i] >= 0 || (!std::isnan(eta) && eta <= cfg_->forecast_horizon))) warn_it = true;
        }
        if (warn_it) {
            Warning w = make("fixed-scale", file, tensor_);
            w.step = last_step_;
            w.severity = 2 + h;
            w.evidence = fmt::format("fixed scale {:.6g} (calibrated on the first {} points, amax {:.6g}): headroom now 2^{:.3g}, "
                                     "run slope {:.3g} log2/1000 steps{}",
                                     static_cast<double>(fixed_scale_), cfg_->fixed_calibration,
                                     static_cast<double>(fixed_calib_amax_), h, slope * 1000, txt);
            w.numbers = {{"scale", fixed_scale_}, {"calibration_amax", fixed_calib_amax_}, {"log2_headroom", h},
                         {"slope_log2_per_1000", slope * 1000}, {"levels", lv}};
            w.resembles = kCaseOutliers;
            w.advice = "recalibrate the fixed scale on later data or leave headroom (calibrate with a margin of the forecast overshoot)";
            out.push_back(std::move(w));
        }
    }
    return out;
}

}  // namespace fp8kit::warn
