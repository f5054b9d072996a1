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

double t_quantile(double z, double dof) {
    // Cornish-Fisher expansion of Student's t quantile in the normal quantile z (two terms).
    const double z3 = z * z * z, z5 = z3 * z * z;
    return z + (z3 + z) / (4 * dof) + (5 * z5 + 16 * z3 + 3 * z) / (96 * dof * dof);
}

void check(const TrendConfig& c) {
    auto bad = [](const char* f, const std::string& why) {
        throw std::invalid_argument(fmt::format("{}: {}", f, why));
    };
    if (c.window < 8 || c.window > 4096 || c.window % 2) bad("window", "must be even, 8 .. 4096");
    if (c.growth_min_window < 8 || c.growth_min_window > c.window) bad("growth min window", "must be 8 .. window");
    if (!(c.growth_z >= 0) || !std::isfinite(c.growth_z)) bad("growth z", "must be a finite number >= 0");
    if (c.growth_gap < 1) bad("growth gap", "must be >= 1");
    if (!(c.growth_top > 0)) bad("growth top", "must be > 0");
    if (c.warmup < 0) bad("warmup", "must be >= 0 steps");
    if (c.spike_window < 4 || c.spike_window > 4096) bad("spike window", "must be 4 .. 4096");
    if (!(c.spike_k > 1) || !std::isfinite(c.spike_k)) bad("spike k", "must be a finite number > 1");
    if (!(c.growth_per_k > 0) || !std::isfinite(c.growth_per_k)) bad("growth", "must be a finite number > 0");
    if (c.eval_every < 1) bad("eval every", "must be >= 1");
    if (!(c.forecast_horizon >= 1) || !std::isfinite(c.forecast_horizon)) bad("horizon", "must be >= 1 step");
    if (!(c.forecast_probability > 0 && c.forecast_probability <= 1)) bad("forecast probability", "must be in (0, 1]");
    if (c.fixed_calibration < 0) bad("fixed calibration", "must be >= 0");
    if (c.fixed_levels.size() > 8) bad("fixed levels", "at most 8");
    if (c.recipe && c.recipe->kind == RecipeKind::current)
        bad("recipe",
            fmt::format(
                "'{}' scales from each step's own amax: nothing to forecast (choose a delayed or windowed recipe)",
                c.recipe->name));
    if (c.fixed_calibration > 0 && !c.fixed_recipe) bad("fixed recipe", "needed with a calibration length");
}

int growth_detection_delay(const TrendConfig& c, double sigma, double rate_per_k) {
    check(c);
    for (int w = c.growth_min_window;; w = std::min(2 * w, c.window)) {
        const double n = w;
        const double se = 1000 * sigma * std::sqrt(12 / (n * (n * n - 1)));
        if (rate_per_k - c.growth_per_k >= 2 * se && rate_per_k >= (t_quantile(c.growth_z, n - 2) + 2) * se)
            return w + c.eval_every;
        if (w == c.window) return -1;
    }
}

double noise_log2(const std::vector<float>& amax) {
    std::vector<double> l;
    for (float a : amax)
        if (std::isfinite(a) && a > 0) l.push_back(std::log2(static_cast<double>(a)));
    if (l.size() < 8) return NAN;
    std::vector<double> d2(l.size() - 2);
    for (std::size_t i = 0; i + 2 < l.size(); ++i) d2[i] = l[i + 2] - 2 * l[i + 1] + l[i];
    std::vector<double> tmp = d2;
    const double m = median_of(tmp.data(), tmp.size());
    for (auto& x : d2) x = std::fabs(x - m);
    return 1.4826 * median_of(d2.data(), d2.size()) / std::sqrt(6.0);
}

TensorTrend::TensorTrend(std::string tensor, Role role, const TrendConfig* cfg)
    : tensor_(std::move(tensor)), role_(role), cfg_(cfg) {
    ring_step_.assign(static_cast<std::size_t>(cfg->window), 0);
    ring_l2_.assign(static_cast<std::size_t>(cfg->window), 0.0);
    spike_ring_.assign(static_cast<std::size_t>(cfg->spike_window), 0.0f);
    spike_sorted_.reserve(spike_ring_.size());
    std::size_t windows = 0;  // the ladder: growth_min_window, doubling, up to window
    for (int k = cfg->growth_min_window;; k = std::min(2 * k, cfg->window)) {
        ++windows;
        if (k == cfg->window) break;
    }
    baseline_.assign(windows, NAN);

    if (cfg->recipe) {
        const RecipeSpec& r = *cfg->recipe;
        format_ = replay::role_format(r, recipe_slot(role_), cfg->format);
        rounding_ = r.policy_for(role_).rounding;
        const float fmax = fp8_max(format_);
        if (r.kind == RecipeKind::delayed)
            delayed_ = std::make_unique<DelayedScaling>(fmax, r.history_len, r.algo, r.margin);
        if (r.kind == RecipeKind::windowed)
            windowed_ = std::make_unique<MsampScaling>(fmax, r.role(recipe_slot(role_)).window, r.margin);
    }
}

void TensorTrend::observe(std::int64_t step, float amax) {
    if (n_ > 0 && step <= last_step_)
        throw std::invalid_argument(
            fmt::format("tensor '{}': step {} after step {} (steps must increase)", tensor_, step, last_step_));
    if (n_ == 0)
        first_step_ = step;
    else if (step - last_step_ > 1)
        ++gapped_;
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
        if (static_cast<double>(amax) >= cfg_->spike_k * static_cast<double>(med)) {
            ++spike_count_;
            if (step >= warmup_end()) ++spikes_late_;
            const Spike s{step, amax, med, overflow_now_};
            if (spikes_.size() < cfg_->spikes_kept) spikes_.push_back(s);
            if (worst_spike_.step < 0 ||
                static_cast<double>(amax) / med > static_cast<double>(worst_spike_.amax) / worst_spike_.median)
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
    if (ring_n_ >= static_cast<std::size_t>(cfg_->growth_min_window) &&
        n_ % static_cast<std::uint64_t>(cfg_->eval_every) == 0)
        evaluate(step);
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

GrowthFit TensorTrend::fit(std::size_t n) const {
    // Least squares of log2 amax on the step over the last n ring points (oldest first), steps
    // taken relative to the last one; se from the residuals (n - 2 degrees of freedom).
    const std::size_t w = ring_l2_.size();
    const std::size_t first = (ring_head_ + w - n) % w, last = (ring_head_ + w - 1) % w;
    const std::int64_t s0 = ring_step_[last];
    double mx = 0, my = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (first + k) % w;
        mx += static_cast<double>(ring_step_[i] - s0);
        my += ring_l2_[i];
    }
    mx /= static_cast<double>(n);
    my /= static_cast<double>(n);
    double sxx = 0, sxy = 0, syy = 0;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (first + k) % w;
        const double dx = static_cast<double>(ring_step_[i] - s0) - mx, dy = ring_l2_[i] - my;
        sxx += dx * dx;
        sxy += dx * dy;
        syy += dy * dy;
    }
    const double b = sxy / sxx;
    const double sse = std::max(0.0, syy - b * sxy);
    GrowthFit f;
    f.window = static_cast<int>(n);
    f.from_step = ring_step_[first];
    f.to_step = s0;
    f.slope_per_k = b * 1000;
    f.se_per_k = std::sqrt(sse / static_cast<double>(n - 2) / sxx) * 1000;
    f.from_l2 = ring_l2_[first];
    f.to_l2 = ring_l2_[last];
    return f;
}

void TensorTrend::evaluate(std::int64_t step) {
    // One fit per window (growth_min_window, doubling, up to window) that the ring fills.
    thread_local std::vector<GrowthFit> fits;
    fits.clear();
    const std::size_t w = ring_l2_.size();
    for (std::size_t k = static_cast<std::size_t>(cfg_->growth_min_window); k <= ring_n_; k = std::min(2 * k, w)) {
        fits.push_back(fit(k));
        if (k == w) break;
    }
    if (fits.empty()) return;
    recent_slope_ = fits.back().slope_per_k / 1000;
    const double thr = cfg_->growth_per_k, z = cfg_->growth_z;
    // z standard errors of a normal, as Student's t quantile for the window's n - 2 degrees of
    // freedom (the same tail probability: short windows' se is itself uncertain).
    auto past = [&](const GrowthFit& f, double base) {
        const double d = f.slope_per_k - base;
        return d >= thr && d >= t_quantile(z, f.window - 2) * f.se_per_k;
    };
    auto open = [&](const GrowthFit& f, double base) {
        ++episode_count_;
        if (episodes_.size() < cfg_->episodes_kept) {
            episodes_.push_back({step, base, f, f});
            open_ = static_cast<std::ptrdiff_t>(episodes_.size()) - 1;
        } else {
            open_ = -1;
        }
        in_episode_ = true;
        last_pass_n_ = report_n_ = n_;
        std::fill(baseline_.begin(), baseline_.end(), NAN);
    };
    // An open episode is followed on its local window: the window that opened it, at least the
    // second of the ladder (short windows follow the growth's changes, long ones resolve noisy
    // series). It closes after growth_gap points in which no window up to that one shows growth.
    if (in_episode_) {
        const std::size_t li = std::min(local_, fits.size() - 1);
        bool grows = false;
        for (std::size_t i = 0; i <= li; ++i) grows = grows || past(fits[i], 0);
        if (grows)
            last_pass_n_ = n_;
        else if (n_ - last_pass_n_ > static_cast<std::uint64_t>(cfg_->growth_gap)) {
            in_episode_ = false;
            open_ = -1;
        }
    }
    if (!in_episode_) {
        for (std::size_t i = 0; i < fits.size(); ++i)
            if (past(fits[i], 0)) {
                local_ = std::max<std::size_t>(i, 1);
                open(fits[i], 0);
                break;
            }
        return;
    }
    // New growth inside an open episode: each window, once it has filled with points after the
    // report (the reported growth's ramp is over for it), is measured against the lowest slope it
    // has shown since (never below 0: a series that stops falling is not growing); past that
    // baseline by the threshold is new growth, reported again.
    for (std::size_t i = 0; i < fits.size(); ++i) {
        const GrowthFit& f = fits[i];
        if (n_ - report_n_ >= static_cast<std::uint64_t>(f.window) && !std::isnan(baseline_[i]) &&
            past(f, baseline_[i])) {
            open(f, baseline_[i]);
            return;
        }
    }
    for (std::size_t i = 0; i < fits.size(); ++i)
        if (n_ - report_n_ >= static_cast<std::uint64_t>(fits[i].window))
            baseline_[i] = std::max(
                0.0, std::isnan(baseline_[i]) ? fits[i].slope_per_k : std::min(baseline_[i], fits[i].slope_per_k));
    if (open_ >= 0) {
        GrowthEpisode& e = episodes_[static_cast<std::size_t>(open_)];
        for (const auto& x : fits)
            if (past(x, 0) && x.slope_per_k > e.steepest.slope_per_k) e.steepest = x;
    }
}

}  // namespace fp8kit::warn
