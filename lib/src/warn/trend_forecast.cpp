// Overflow under the recipe's scale, observed and forecast (docs/early-warning.md, "overflow").
#include <algorithm>
#include <cmath>

#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {
namespace {

// The margin that removes every overflow so far, given one more step's need d (-1: none does).
void add_margin(int& acc, int d) { acc = (acc < 0 || d < 0) ? -1 : std::max(acc, d); }

}  // namespace

int TensorTrend::extra_margin(float amax, float scale) const {
    // Under a margin larger by d the recipe casts with exactly scale x 2^-d, as long as the scale
    // came from the margin and stays a normal float: TE's delayed scale is
    // fl32((fmax x 2^-margin) / history max) (numerics::te_delayed_scale; the division of a
    // numerator scaled by a power of two is exact), MS-AMP's is 2^(floor(log2(fmax / amax)) -
    // margin) (numerics::msamp_scale). The amax history does not depend on the margin. The scale
    // does not come from the margin before a finite nonzero amax was recorded (TE's initial 1),
    // after an Inf or NaN amax (TE keeps the previous scale while the history holds it; MS-AMP
    // restarts in-time scaling), or on MS-AMP's in-time steps (margin 0, the step's own amax).
    if (!std::isfinite(amax) || nonfinite_ > 0 || !(last_headroom_amax_ > 0)) return -1;
    if (windowed_ && windowed_->in_time()) return -1;
    for (int d = 1; d <= kMaxExtraMargin; ++d) {
        const float s = std::ldexp(scale, -d);
        if (!std::isnormal(s)) return -1;
        if (!replay::overflows(amax, s, format_, rounding_)) return d;
    }
    return -1;
}

void TensorTrend::forecast(std::int64_t step, float amax) {
    if (!std::isfinite(amax)) {
        ++nonfinite_;
        if (nonfinite_first_ < 0) nonfinite_first_ = step;
    }
    overflow_now_ = false;
    if (!delayed_ && !windowed_) return;
    // 1. The scale this step casts with and whether the cast overflows (replay's rule).
    const float scale = delayed_ ? delayed_->scale_for_step() : windowed_->scale_for_step(amax);
    const float fmax = fp8_max(format_);
    // fl32(amax * scale) <= max cannot round past max: replay's test only runs above it.
    if (std::isfinite(amax) && !(amax * scale <= fmax) && replay::overflows(amax, scale, format_, rounding_)) {
        ++overflow_count_;
        overflow_now_ = true;
        if (overflow_first_ < 0) overflow_first_ = step;
        if (step >= warmup_end()) ++overflow_late_;
        // Every overflowing step is kept, as runs of consecutive points (at most kOverflowRuns
        // runs: beyond them the steps are counted, not listed, and the report says so).
        if (!overflow_runs_.empty() && overflow_last_n_ + 1 == n_ && !overflow_truncated_)
            overflow_runs_.back().second = step;
        else if (overflow_runs_.size() < kOverflowRuns)
            overflow_runs_.push_back({step, step});
        else
            overflow_truncated_ = true;
        overflow_last_n_ = n_;
        const double head = static_cast<double>(amax) * scale / fmax;
        if (head > overflow_worst_) {
            overflow_worst_ = head;
            overflow_worst_step_ = step;
        }
        const int d = extra_margin(amax, scale);
        add_margin(overflow_margin_all_, d);
        if (step >= warmup_end()) add_margin(overflow_margin_late_, d);
    }
    // 2. The recipe takes the step in; the next step's scale if its amax were this one.
    if (delayed_)
        delayed_->record(amax);
    else
        windowed_->record(amax);
    const float next = delayed_ ? delayed_->scale_for_step() : windowed_->scale();
    if (std::isfinite(amax) && amax > 0) {
        last_headroom_amax_ = amax;
        last_headroom_scale_ = next;
    }
    // 3. Every eval_every points with a full window: the per-step growth's median m and robust
    //    sigma (1.4826 MAD) over the window give p = P(g > -headroom) under a normal model, and
    //    P(overflow within the horizon) = 1 - (1 - p)^horizon.
    //    (The growths are those between the window's points before this step's amax joins it.)
    const std::size_t w = ring_l2_.size();
    if (ring_n_ < w || n_ % static_cast<std::uint64_t>(cfg_->eval_every) || last_headroom_amax_ == 0) return;
    // The log2 is taken only here, at the evaluation points. Headroom is measured to the largest
    // value that does not round past max (replay::overflows' limit, e.g. just under 464 for E4M3),
    // not to max itself: a tensor sitting at its history's maximum (a slowly growing weight under
    // margin 0) overflows only when it grows past that rounding slack in one step.
    next_l2_headroom_ = std::log2(static_cast<double>(last_headroom_amax_) * last_headroom_scale_ /
                                  static_cast<double>(replay::overflow_threshold(format_)));
    // g_sorted_ holds the window's w - 1 per-step growths in order: the median is read and the
    // MAD is the k-th smallest distance from it, walked outward from the median (O(w)).
    const std::vector<double>& g = g_sorted_;
    const std::size_t k = (w - 1) / 2;
    const double m = g[k];
    std::ptrdiff_t lo = static_cast<std::ptrdiff_t>(k), hi = lo + 1;
    double mad = 0;
    for (std::size_t c = 0; c <= k; ++c) {
        const double dl = lo >= 0 ? m - g[static_cast<std::size_t>(lo)] : INFINITY;
        const double dr = hi < static_cast<std::ptrdiff_t>(g.size()) ? g[static_cast<std::size_t>(hi)] - m : INFINITY;
        if (dl <= dr) {
            mad = dl;
            --lo;
        } else {
            mad = dr;
            ++hi;
        }
    }
    const double sigma = 1.4826 * mad;
    const double left = -next_l2_headroom_;  // binades between the next cast's top and max
    double p;
    if (sigma > 0)
        p = 0.5 * std::erfc((left - m) / (sigma * std::sqrt(2.0)));
    else
        p = m > left ? 1.0 : 0.0;
    const double prob = p >= 1 ? 1.0 : -std::expm1(cfg_->forecast_horizon * std::log1p(-p));
    forecast_last_ = {step, prob, next_l2_headroom_, m, sigma, p};
    if (forecast_first_.step < 0 && prob >= cfg_->forecast_probability) forecast_first_ = forecast_last_;
}

}  // namespace fp8kit::warn
