// The scale formulas of the frameworks, in float32 as each framework evaluates them. Exponents
// come from the float bits; docs/recipes.md says where a framework's floating log2 could differ.
#include <cfloat>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "convert/float_bits.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/recipes.hpp"

namespace fp8kit {
namespace {

using detail::bits_of;
using detail::float_of;

// floor(log2 |v|) of a finite nonzero float, subnormals included.
int floor_log2(float v) {
    const std::uint32_t u = bits_of(v) & 0x7FFFFFFFu;
    const int biased = static_cast<int>(u >> 23);
    if (biased != 0) return biased - 127;
    return -149 + (31 - __builtin_clz(u));  // subnormal: position of the leading mantissa bit
}

// 2^e as a float32 for e in [-149, 127]; 0 below, Inf above (what float32 arithmetic gives).
float pow2f(int e) {
    if (e > 127) return INFINITY;
    if (e < -149) return 0.0f;
    if (e >= -126) return float_of(static_cast<std::uint32_t>(e + 127) << 23);
    return float_of(std::uint32_t{1} << (e + 149));
}

}  // namespace

// Called per block by the block recipes: decode the one code rather than build format_info.
float fp8_max(Format f) {
    return emu::with_format(f, [&](auto fmt) {
        return static_cast<float>(decode_value(f, static_cast<std::uint8_t>(decltype(fmt)::max_finite_code)));
    });
}

float te_current_scale(float amax, float fmax, float eps, bool pow2, float value_for_inf) {
    if (amax < eps) amax = eps;  // NaN compares false and is handled next
    if (std::isinf(amax) || amax == 0.0f || std::isnan(amax)) return 1.0f;
    float scale = fmax / amax;  // IEEE float32 division, round to nearest (TE: __fdiv_rn)
    if (std::isinf(scale)) scale = value_for_inf;
    if (pow2) scale = float_of(bits_of(scale) & 0xFF800000u);
    return scale;
}

float torchao_scale(float amax, float fmax, double eps, bool pow2) {
    // torch.clamp(float64 amax, min=EPS) propagates NaN; fmax / Inf = 0.
    const double a = static_cast<double>(amax);
    const double clamped = std::isnan(a) ? a : (a < eps ? eps : a);
    float scale = static_cast<float>(static_cast<double>(fmax) / clamped);
    if (pow2 && std::isfinite(scale) && scale != 0.0f) {
        // exp2(floor(log2(scale))): scale is positive and at least fmax / FLT_MAX, so normal.
        scale = pow2f(floor_log2(scale));
    }
    return scale;
}

float msamp_scale(float amax, float previous_scale, float fmax, int margin) {
    if (!(amax > 0.0f) || !std::isfinite(amax)) return previous_scale;
    const float ratio = fmax / amax;  // float32 tensor divided by a Python float stays float32
    if (std::isinf(ratio)) return INFINITY;  // log2(Inf) = Inf -> pow(2, Inf) = Inf
    const int e = floor_log2(ratio) - margin;
    // sf = round(pow(2, |e|)), then 1 / sf for e < 0: 2^|e| overflows to Inf past 127.
    const int a = e < 0 ? -e : e;
    const float sf = a > 127 ? INFINITY : pow2f(a);
    return e < 0 ? 1.0f / sf : sf;
}

ScalePair deepseek_scale(float amax, float fmax, float amax_floor, bool ue8m0) {
    const float a = std::isnan(amax) ? amax : (amax < amax_floor ? amax_floor : amax);
    float sf = a / fmax;
    if (ue8m0 && std::isfinite(sf) && sf > 0.0f) {
        // 2^ceil(log2 sf): sf itself when it is a power of two, else the next one up.
        const int e = floor_log2(sf);
        sf = (pow2f(e) == sf) ? sf : pow2f(e + 1);
    }
    return {1.0f / sf, sf};
}

std::uint8_t mx_e8m0_scale_floor_ocp(float block_amax, Format elem) {
    if (std::isnan(block_amax) || std::isinf(block_amax)) return 0xFF;
    if (block_amax == 0.0f) return 0;  // the smallest scale, 2^-127
    const int e = floor_log2(block_amax) - format_info(elem).emax;
    const int code = e + 127;
    return static_cast<std::uint8_t>(code < 0 ? 0 : (code > 254 ? 254 : code));
}

std::uint8_t mx_e8m0_scale_roundup(float block_amax, Format elem) {
    // TE: val = amax * fl32(1 / fmax), then the biased exponent rounded up (float_to_e8m0).
    const float rcp = static_cast<float>(1.0 / static_cast<double>(fp8_max(elem)));
    const float val = block_amax * rcp;
    if (std::isnan(val)) return 0xFF;
    if (std::isinf(val)) return 0xFE;
    if (val == 0.0f) return 0;
    const std::uint32_t u = bits_of(val);
    std::uint32_t exponent = (u >> 23) & 0xFFu;
    const std::uint32_t mantissa = u & 0x7FFFFFu;
    // A subnormal val at most 2^-127 still gets code 0 (2^-127 covers it); past 0xFE it saturates.
    if (mantissa > 0 && exponent != 0xFE && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
    return static_cast<std::uint8_t>(exponent);
}

ScalePair e8m0_scale_pair(std::uint8_t code) {
    if (code == 0xFF) return {NAN, NAN};
    const int e = static_cast<int>(code) - 127;
    return {pow2f(-e), pow2f(e)};
}

ScalePair rule_scale(ScaleRule rule, Format f, float amax, double epsilon, bool pow2,
                     float value_for_inf, int margin) {
    const float fmax = fp8_max(f);
    switch (rule) {
        case ScaleRule::te: {
            const float s = te_current_scale(amax, fmax, static_cast<float>(epsilon), pow2, value_for_inf);
            return {s, 1.0f / s};
        }
        case ScaleRule::torchao: {
            const float s = torchao_scale(amax, fmax, epsilon, pow2);
            return {s, 1.0f / s};
        }
        case ScaleRule::msamp: {
            const float s = msamp_scale(amax, 1.0f, fmax, margin);
            return {s, 1.0f / s};
        }
        case ScaleRule::deepseek:
            return deepseek_scale(amax, fmax, static_cast<float>(epsilon), pow2);
        case ScaleRule::mx_roundup: {
            const std::uint8_t c = mx_e8m0_scale_roundup(amax, f);
            ScalePair p = e8m0_scale_pair(c);
            if (c == 0) p.scale = 1.0f;  // TE exp2f_rcp: code 0 casts with scale 1
            return p;
        }
        case ScaleRule::mx_ocp_floor: return e8m0_scale_pair(mx_e8m0_scale_floor_ocp(amax, f));
    }
    throw std::invalid_argument("rule_scale: unknown scale rule");
}

ScalePair recipe_scale(const RecipeSpec& r, Role role, float amax) {
    return rule_scale(r.rule, r.role(role).format, amax, r.epsilon, r.pow2, r.value_for_inf, r.margin);
}

// ---- DelayedScaling ---------------------------------------------------------------------

DelayedScaling::DelayedScaling(float fmax, int history_len, AmaxAlgo algo, int margin)
    : scaled_max_(std::ldexp(fmax, -margin)), algo_(algo) {
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
    float scale = (std::isfinite(m) && m > 0.0f) ? scaled_max_ / m : scale_;
    if (std::isinf(scale)) scale = FLT_MAX;
    scale_ = scale;
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
