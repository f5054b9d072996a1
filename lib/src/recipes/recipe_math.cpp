// The recipe entry points over numerics/scale_rules.hpp (where every formula is written), and
// the stateful recipes (TE DelayedScaling, MS-AMP windowed scaling).
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/recipes.hpp"

namespace fp8kit {

ScalePair rule_scale(ScaleRule rule, Format f, float amax, double epsilon, bool pow2,
                     float value_for_inf, int margin) {
    numerics::ScaleParams p = numerics::make_scale_params(rule, f, epsilon, pow2, value_for_inf, margin);
    // NVFP4 rules on one amax: the block is the whole tensor, so the global amax is the same.
    if (numerics::rule_uses_global_amax(rule)) numerics::set_global_amax(p, amax);
    const numerics::BlockScale b = numerics::rule_scale(p, amax);
    return {b.scale, b.scale_inv};
}

Role parse_recipe_slot(std::string_view s, std::string_view what) {
    const auto r = numerics::parse_role(s);
    if (!r) throw std::invalid_argument(fmt::format("{}: unknown role '{}' (choose from input, weight, grad)", what, s));
    return recipe_slot(*r);
}

ScalePair recipe_scale(const RecipeSpec& r, Role role, float amax) {
    return rule_scale(r.rule, r.role(role).format, amax, r.epsilon, r.pow2, r.value_for_inf, r.margin);
}

// ---- DelayedScaling ---------------------------------------------------------------------

DelayedScaling::DelayedScaling(float fmax, int history_len, AmaxAlgo algo, int margin)
    : scaled_max_(numerics::te_scaled_max(fmax, margin)), algo_(algo) {
    if (history_len < 1) throw std::invalid_argument("DelayedScaling: history length must be >= 1");
    history_.assign(static_cast<std::size_t>(history_len), 0.0f);
}

void DelayedScaling::record(float amax) {
    // The cast stores the step's amax in slot 0 (cleared by the previous roll); kernel_bulk follows.
    history_[0] = amax;
    const float last = history_[0];
    const std::size_t L = history_.size();
    float m = 0.0f;
    if (last != 0.0f) {  // NaN != 0 is true: a NaN amax rolls in and fmaxf skips it
        std::vector<float> a(L);
        for (std::size_t i = 0; i < L; ++i) {
            a[i] = (i < L - 1) ? history_[i + 1] : last;
            m = std::fmax(m, a[i]);
        }
        for (std::size_t i = 0; i < L; ++i) history_[i] = (i > 0) ? a[i] : 0.0f;
    }
    if (algo_ == AmaxAlgo::most_recent) m = last;
    scale_ = numerics::te_delayed_scale(m, scale_, scaled_max_);
    ++steps_;
}

// ---- MsampScaling -----------------------------------------------------------------------

MsampScaling::MsampScaling(float fmax, int window, int margin) : fmax_(fmax), margin_(margin) {
    if (window < 1) throw std::invalid_argument("MsampScaling: window must be >= 1");
    window_.assign(static_cast<std::size_t>(window), 0.0f);
}

bool MsampScaling::in_time() const { return window_.size() == 1 || counter_ < window_.size(); }

float MsampScaling::scale_for_step(float current_amax) const {
    return in_time() ? msamp_scale(current_amax, scale_, fmax_, 0) : scale_;
}

void MsampScaling::record(float amax) {
    // The cast: amax lands in slot 0; an in-time step also resets the scale from it.
    window_[0] = amax;
    if (in_time()) scale_ = msamp_scale(amax, scale_, fmax_, 0);
    // The optimizer's update: window max with NaN propagating (torch.max), roll by one.
    float m = window_[0];
    for (float v : window_) m = (std::isnan(m) || std::isnan(v)) ? NAN : (v > m ? v : m);
    const float sf = msamp_scale(m, scale_, fmax_, margin_);
    const bool valid = std::isfinite(window_[0]);
    const float oldest = window_.back();
    for (std::size_t i = window_.size() - 1; i > 0; --i) window_[i] = window_[i - 1];
    window_[0] = oldest;
    counter_ = valid ? counter_ + 1 : 0;
    if (valid) scale_ = sf;
}

}  // namespace fp8kit
