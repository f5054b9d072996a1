// The recipe entry points over numerics/scale_rules.hpp (where every formula is written), and
// the stateful recipes (TE DelayedScaling, MS-AMP windowed scaling).
#include <cmath>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/recipes.hpp"
#include "fp8kit/recipes/scale_params.hpp"

namespace fp8kit {

ScalePair rule_scale(ScaleRule rule, Format f, float amax, double epsilon, bool pow2, float value_for_inf, int margin) {
    numerics::ScaleParams p = numerics::make_scale_params(rule, f, epsilon, pow2, value_for_inf, margin);
    // NVFP4 rules on one amax: the block is the whole tensor, so the global amax is the same.
    if (numerics::rule_uses_global_amax(rule)) numerics::set_global_amax(p, amax);
    const numerics::BlockScale b = numerics::rule_scale(p, amax);
    return {b.scale, b.scale_inv};
}

Role parse_recipe_slot(std::string_view s, std::string_view what) {
    const auto r = numerics::parse_role(s);
    if (!r)
        throw std::invalid_argument(fmt::format("{}: unknown role '{}' (choose from input, weight, grad)", what, s));
    return recipe_slot(*r);
}

// The arguments recipe_scale passes to rule_scale, resolved (see recipes/scale_params.hpp).
numerics::ScaleParams recipe_scale_params(const RecipeSpec& r, Role role) {
    return numerics::make_scale_params(r.rule, r.role(role).format, r.epsilon, r.pow2, r.value_for_inf, r.margin);
}

ScalePair recipe_scale(const RecipeSpec& r, Role role, float amax) {
    return rule_scale(r.rule, r.role(role).format, amax, r.epsilon, r.pow2, r.value_for_inf, r.margin);
}

// ---- DelayedScaling ---------------------------------------------------------------------

DelayedScaling::DelayedScaling(float fmax, int history_len, AmaxAlgo algo, int margin)
    : scaled_max_(numerics::te_scaled_max(fmax, margin)), algo_(algo) {
    if (history_len < 1) throw std::invalid_argument("DelayedScaling: history length must be >= 1");
    len_ = static_cast<std::size_t>(history_len);
    ring_.assign(len_ - 1, 0.0f);
}

std::vector<float> DelayedScaling::history() const {
    std::vector<float> h{slot0_};
    for (std::size_t i = 0; i < ring_.size(); ++i) h.push_back(ring_[(head_ + i) % ring_.size()]);
    return h;
}

void DelayedScaling::record(float amax) {
    // The cast stores the step's amax in slot 0 (cleared by the previous roll); kernel_bulk
    // follows: when it is nonzero, m = fmaxf over slot 0 and history[1..L-1] (the last L - 1
    // rolled amaxes, zeros at the start), starting from 0; then the history rolls by one, the
    // oldest entry leaves and slot 0 becomes 0. A zero amax rolls nothing and gives m = 0.
    slot0_ = amax;
    const float last = amax;
    float m = 0.0f;
    if (last != 0.0f) {  // NaN != 0 is true: a NaN amax rolls in and fmaxf skips it
        const std::uint64_t k = rolls_++;
        if (!std::isnan(last)) {
            while (!maxq_.empty() && maxq_.back().second <= last) maxq_.pop_back();
            maxq_.emplace_back(k, last);
        }
        // The window of this roll: rolls k - L + 1 .. k (older entries have left the ring).
        while (!maxq_.empty() && maxq_.front().first + len_ <= k) maxq_.pop_front();
        // fmaxf from 0 over the window: the largest non-NaN entry, or 0 when none is above 0
        // (the entries are nonzero or the initial +0, so no signed-zero choice arises).
        if (!maxq_.empty()) m = std::fmax(m, maxq_.front().second);
        if (!ring_.empty()) {
            ring_[head_] = last;  // the oldest leaves, the newest enters
            head_ = (head_ + 1) % ring_.size();
        }
        slot0_ = 0.0f;
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
