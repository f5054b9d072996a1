// Overflow under the recipe's scale, observed and forecast (docs/early-warning.md, "overflow").
#include <algorithm>
#include <cmath>

#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {

void TensorTrend::forecast(std::int64_t step, float amax) {
    if (!std::isfinite(amax)) {
        ++nonfinite_;
        if (nonfinite_first_ < 0) nonfinite_first_ = step;
    }
    if (!delayed_ && !windowed_) return;
    // 1. The scale this step casts with and whether the cast overflows (replay's rule).
    const float scale = delayed_ ? delayed_->scale_for_step() : windowed_->scale_for_step(amax);
    const float fmax = fp8_max(format_);
    if (std::isfinite(amax) && replay::overflows(amax, scale, format_)) {
        ++overflow_count_;
        if (overflow_first_ < 0) overflow_first_ = step;
        overflow_worst_ = std::max(overflow_worst_, static_cast<double>(amax) * scale / fmax);
    }
    // 2. The recipe takes the step in; the next step's scale if its amax were this one.
    if (delayed_) delayed_->record(amax);
    else windowed_->record(amax);
    const float next = delayed_ ? delayed_->scale_for_step() : windowed_->scale();
    if (std::isfinite(amax) && amax > 0)
        next_l2_headroom_ = std::log2(static_cast<double>(amax) * next / fmax);
    // 3. Every eval_every points with a full window: the per-step growth's median m and robust
    //    sigma (1.4826 MAD) over the window give p = P(g > -headroom) under a normal model, and
    //    P(overflow within the horizon) = 1 - (1 - p)^horizon.
    const std::size_t w = ring_l2_.size();
    if (ring_n_ < w || n_ % static_cast<std::uint64_t>(cfg_->eval_every) || std::isnan(next_l2_headroom_)) return;
    thread_local std::vector<double> g;
    g.resize(w - 1);
    for (std::size_t i = 0; i + 1 < w; ++i) {
        const std::size_t a = (ring_head_ + i) % w, b = (ring_head_ + i + 1) % w;
        g[i] = (ring_l2_[b] - ring_l2_[a]) / static_cast<double>(ring_step_[b] - ring_step_[a]);
    }
    std::nth_element(g.begin(), g.begin() + (w - 1) / 2, g.end());
    const double m = g[(w - 1) / 2];
    for (double& v : g) v = std::fabs(v - m);
    std::nth_element(g.begin(), g.begin() + (w - 1) / 2, g.end());
    const double sigma = 1.4826 * g[(w - 1) / 2];
    const double left = -next_l2_headroom_;  // binades between the next cast's top and max
    double p;
    if (sigma > 0) p = 0.5 * std::erfc((left - m) / (sigma * std::sqrt(2.0)));
    else p = m > left ? 1.0 : 0.0;
    const double prob = p >= 1 ? 1.0 : -std::expm1(cfg_->forecast_horizon * std::log1p(-p));
    forecast_last_ = {step, prob, next_l2_headroom_, m, sigma, p};
    if (forecast_first_.step < 0 && prob >= cfg_->forecast_probability) forecast_first_ = forecast_last_;
}

}  // namespace fp8kit::warn
