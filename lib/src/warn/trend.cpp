// TensorTrend: the per-tensor incremental trend state (docs/early-warning.md defines each signal).
#include <algorithm>
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {
namespace {

// Median of v (reordered); the mean of the two middle values for an even count.
double median_of(double* v, std::size_t n) {
    const std::size_t h = n / 2;
    std::nth_element(v, v + h, v + n);
    const double hi = v[h];
    if (n % 2) return hi;
    return 0.5 * (*std::max_element(v, v + h) + hi);
}

}  // namespace

void check(const TrendConfig& c) {
    auto bad = [](const char* f, const std::string& why) {
        throw std::invalid_argument(fmt::format("{}: {}", f, why));
    };
    if (c.window < 8 || c.window > 4096 || c.window % 2) bad("window", "must be even, 8 .. 4096");
    if (c.spike_window < 4 || c.spike_window > 4096) bad("spike window", "must be 4 .. 4096");
    if (!(c.spike_k > 1) || !std::isfinite(c.spike_k)) bad("spike k", "must be a finite number > 1");
    if (!(c.growth_per_k > 0) || !std::isfinite(c.growth_per_k)) bad("growth", "must be a finite number > 0");
    if (!(c.growth_agree > 0 && c.growth_agree <= 1)) bad("growth agreement", "must be in (0, 1]");
    if (c.eval_every < 1) bad("eval every", "must be >= 1");
    if (!(c.forecast_horizon >= 1) || !std::isfinite(c.forecast_horizon)) bad("horizon", "must be >= 1 step");
    if (!(c.forecast_probability > 0 && c.forecast_probability <= 1)) bad("forecast probability", "must be in (0, 1]");
    if (c.fixed_calibration < 0) bad("fixed calibration", "must be >= 0");
    if (c.fixed_levels.size() > 8) bad("fixed levels", "at most 8");
    if (c.recipe && c.recipe->kind == RecipeKind::current)
        bad("recipe", fmt::format("'{}' scales from each step's own amax: nothing to forecast (choose a delayed or windowed recipe)", c.recipe->name));
    if (c.fixed_calibration > 0 && !c.fixed_recipe) bad("fixed recipe", "needed with a calibration length");
}

TensorTrend::TensorTrend(std::string tensor, Role role, const TrendConfig* cfg)
    : tensor_(std::move(tensor)), role_(role), cfg_(cfg) {
    ring_step_.assign(static_cast<std::size_t>(cfg->window), 0);
    ring_l2_.assign(static_cast<std::size_t>(cfg->window), 0.0);
    spike_ring_.assign(static_cast<std::size_t>(cfg->spike_window), 0.0f);
    spike_sorted_.reserve(spike_ring_.size());
    if (cfg->recipe) {
        const RecipeSpec& r = *cfg->recipe;
        format_ = replay::role_format(r, recipe_slot(role_), cfg->format);
        rounding_ = r.policy_for(role_).rounding;
        const float fmax = fp8_max(format_);
        if (r.kind == RecipeKind::delayed) delayed_ = std::make_unique<DelayedScaling>(fmax, r.history_len, r.algo, r.margin);
        if (r.kind == RecipeKind::windowed)
            windowed_ = std::make_unique<MsampScaling>(fmax, r.role(recipe_slot(role_)).window, r.margin);
    }
}

void TensorTrend::observe(std::int64_t step, float amax) {
    if (n_ > 0 && step <= last_step_)
        throw std::invalid_argument(fmt::format("tensor '{}': step {} after step {} (steps must increase)", tensor_, step, last_step_));
    ++n_;
    last_step_ = step;
    forecast(step, amax);
    if (!(std::isfinite(amax) && amax > 0)) return;  // zero: no information; Inf/NaN: counted by forecast
    last_amax_ = amax;
    // 1. Spike: against the median of the previous spike_window amaxes, kept sorted as the
    //    window slides (binary search, one short move per point), so the median is read, not searched.
    const std::size_t sw = spike_ring_.size();
    if (spike_n_ == sw) {
        const std::size_t h = sw / 2;
        const float med = sw % 2 ? spike_sorted_[h] : 0.5f * (spike_sorted_[h - 1] + spike_sorted_[h]);
        if (static_cast<double>(amax) > cfg_->spike_k * static_cast<double>(med)) {
            ++spike_count_;
            const Spike s{step, amax, med};
            if (spikes_.size() < cfg_->spikes_kept) spikes_.push_back(s);
            if (worst_spike_.step < 0 || static_cast<double>(amax) / med > static_cast<double>(worst_spike_.amax) / worst_spike_.median)
                worst_spike_ = s;
        }
        const float out = spike_ring_[spike_head_];  // leaves the window
        spike_sorted_.erase(std::lower_bound(spike_sorted_.begin(), spike_sorted_.end(), out));
    }
    spike_sorted_.insert(std::upper_bound(spike_sorted_.begin(), spike_sorted_.end(), amax), amax);
    spike_ring_[spike_head_] = amax;
    spike_head_ = (spike_head_ + 1) % sw;
    spike_n_ = std::min(spike_n_ + 1, sw);
    // 2. Growth window and the whole-run sample.
    const double l2 = std::log2(static_cast<double>(amax));
    const std::size_t w = ring_l2_.size();
    // The per-step growths between consecutive window points, kept sorted for the forecast: the
    // growth out of the oldest point leaves with it, the one into the new point joins.
    auto growth = [&](std::size_t a, std::size_t b) {
        return (ring_l2_[b] - ring_l2_[a]) / static_cast<double>(ring_step_[b] - ring_step_[a]);
    };
    if (ring_n_ == w) {
        const double out = growth(ring_head_, (ring_head_ + 1) % w);
        g_sorted_.erase(std::lower_bound(g_sorted_.begin(), g_sorted_.end(), out));
    }
    if (ring_n_ > 0) {
        const std::size_t prev = (ring_head_ + w - 1) % w;
        const double in = (l2 - ring_l2_[prev]) / static_cast<double>(step - ring_step_[prev]);
        g_sorted_.insert(std::upper_bound(g_sorted_.begin(), g_sorted_.end(), in), in);
    }
    ring_step_[ring_head_] = step;
    ring_l2_[ring_head_] = l2;
    ring_head_ = (ring_head_ + 1) % w;
    ring_n_ = std::min(ring_n_ + 1, w);
    sample(step, l2);
    // 3. Fixed scale: calibrate on the first points, then the step each level is reached.
    if (cfg_->fixed_calibration > 0) {
        const auto calib = static_cast<std::uint64_t>(cfg_->fixed_calibration);
        if (fixed_scale_ == 0) {
            fixed_calib_amax_ = std::max(fixed_calib_amax_, amax);
            if (n_ >= calib) {
                RecipeSpec r = *cfg_->fixed_recipe;
                const Role slot = recipe_slot(role_);
                RoleSpec& rs = slot == Role::activation ? r.input : slot == Role::weight ? r.weight : r.grad;
                rs.format = replay::role_format(*cfg_->fixed_recipe, slot, cfg_->format);
                fixed_scale_ = recipe_scale(r, slot, fixed_calib_amax_).scale;
                format_ = rs.format;
            }
        } else {
            const double h = std::log2(static_cast<double>(amax) * fixed_scale_ / fp8_max(format_));
            for (std::size_t i = 0; i < cfg_->fixed_levels.size(); ++i)
                if (fixed_reached_[i] < 0 && h >= cfg_->fixed_levels[i]) fixed_reached_[i] = step;
        }
    }
    if (ring_n_ == w && n_ % static_cast<std::uint64_t>(cfg_->eval_every) == 0) evaluate(step);
}

void TensorTrend::sample(std::int64_t step, double l2) {
    // Every smp_stride_-th finite point; when full, every other one is dropped and the stride doubles.
    static_assert(kSample % 2 == 0);
    const std::uint64_t k = valid_++;
    if (k % smp_stride_) return;
    if (smp_l2_.size() == kSample) {
        std::size_t j = 0;
        for (std::size_t i = 0; i < kSample; i += 2, ++j) {
            smp_step_[j] = smp_step_[i];
            smp_l2_[j] = smp_l2_[i];
        }
        smp_step_.resize(j);
        smp_l2_.resize(j);
        smp_stride_ *= 2;
        if (k % smp_stride_) return;
    }
    smp_step_.push_back(step);
    smp_l2_.push_back(l2);
}

double TensorTrend::run_slope_per_k() const {
    const std::size_t n = smp_l2_.size();
    if (n < 2) return NAN;
    std::vector<double> s;
    s.reserve(n * (n - 1) / 2);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = i + 1; j < n; ++j)
            s.push_back((smp_l2_[j] - smp_l2_[i]) / static_cast<double>(smp_step_[j] - smp_step_[i]));
    return median_of(s.data(), s.size()) * 1000;
}

void TensorTrend::evaluate(std::int64_t step) {
    // Median of the window/2 lagged pair slopes (point i with point i + window/2, oldest first).
    const std::size_t w = ring_l2_.size(), h = w / 2;
    thread_local std::vector<double> d;
    d.resize(h);
    std::size_t up = 0;
    for (std::size_t i = 0; i < h; ++i) {
        const std::size_t a = (ring_head_ + i) % w, b = (ring_head_ + i + h) % w;
        d[i] = (ring_l2_[b] - ring_l2_[a]) / static_cast<double>(ring_step_[b] - ring_step_[a]);
        up += d[i] > 0;
    }
    recent_slope_ = median_of(d.data(), h);
    recent_agree_ = static_cast<double>(up) / static_cast<double>(h);
    if (recent_slope_ * 1000 >= cfg_->growth_per_k && recent_agree_ >= cfg_->growth_agree) {
        const std::size_t first = ring_head_, last = (ring_head_ + w - 1) % w;
        const Growth g{step, ring_step_[first], ring_step_[last], recent_slope_ * 1000, recent_agree_,
                       ring_l2_[first], ring_l2_[last]};
        if (growth_first_.first_step < 0) growth_first_ = g;
        if (g.slope_per_k > growth_max_.slope_per_k) growth_max_ = g;
    }
}

}  // namespace fp8kit::warn
