// TransformerEngine FusedAdam with FP8/FP16/BF16 optimizer states (fp8kit/simulate.hpp; sources:
// transformer_engine/pytorch/optimizers/fused_adam.py, transformer_engine/common/multi_tensor/adam.cu,
// transformer_engine/common/util/vectorized_pointwise.h unary_kernel, common/utils.cuh reciprocal).
#include <cmath>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "../convert/float_bits.hpp"
#include "adam_report.hpp"
#include "fp8kit/emu/formats.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {
namespace {

// Tensor.bfloat16(): round to nearest even.
std::uint16_t to_bf16(float x) {
    return emu::convert<emu::Binary32, emu::BFloat16>(detail::bits_of(x), emu::kRneNoSaturate);
}
float bf16_to_float(std::uint16_t b) {
    return detail::float_of(
        static_cast<std::uint32_t>(emu::convert<emu::BFloat16, emu::Binary32>(b, emu::kDecodePolicy)));
}

// FusedAdam.dtype_to_range_map: float16 -> torch.finfo(torch.float16).max / 2.0, uint8 -> 448.0
float range_of(StateDtype d) { return d == StateDtype::fp8 ? 448.0f : 65504.0f / 2.0f; }

// torch.aminmax(x), then torch.maximum(-min, max): a NaN anywhere gives NaN.
float te_absmax(const std::vector<float>& x) {
    float lo = INFINITY, hi = -INFINITY;
    for (float v : x) {
        if (std::isnan(v)) return v;
        lo = std::fmin(lo, v);
        hi = std::fmax(hi, v);
    }
    // On a tie of -0 and +0 (an all-zero state) the max is taken: +0. Which zero torch.maximum
    // returns there is not specified; a zero scale of either sign stores and restores the same values.
    return x.empty() ? 0.0f : (-lo > hi ? -lo : hi);
}

// _initialize_state(zero_buffer=True): zeros; an FP8 state is quantize_(zeros) with scale ones
// (codes 0, scale_inv = __frcp_rn(1) = 1); _scales[param][name] = ones.
TeState fresh_state(StateDtype d, std::size_t n) {
    TeState s;
    s.dtype = d;
    s.bits.assign(n, 0);
    return s;
}

// FusedAdam._apply_scale(state_name, unscaled_state, scaled_state, scale), step by step.
void apply_scale(TeState& s, const std::vector<float>& x) {
    s.bits.resize(x.size());
    if (s.dtype == StateDtype::f32) {  // set_scaled_state: local_state.copy_(unscaled_state)
        for (std::size_t i = 0; i < x.size(); ++i) s.bits[i] = detail::bits_of(x[i]);
        return;
    }
    if (s.dtype == StateDtype::bf16) {  // scaled_state.copy_(unscaled_state.bfloat16()); no scale
        for (std::size_t i = 0; i < x.size(); ++i) s.bits[i] = to_bf16(x[i]);
        return;
    }
    // 1. absmax = maximum(-min, max); 2. torch.div(absmax, max_range, out=scale) (float32)
    s.scale = te_absmax(x) / range_of(s.dtype);
    if (s.dtype == StateDtype::fp8) {
        // 3. quantizer.scale.copy_(1 / scale): torch's 1 / t is t.reciprocal() * 1 (Inf for scale 0)
        s.fp8_scale = 1.0f / s.scale;
        // 4. scaled_state.copy_(unscaled_state): TE quantize (common/cast/fp8/quantize_fp8.cuh,
        //    util/vectorized_pointwise.h unary_kernel): static_cast<fp8>(x * s) (__nv_fp8_e4m3,
        //    saturating; 0 * Inf is NaN -> 0x7F), then scale_inv = __frcp_rn(s) (utils.cuh)
        for (std::size_t i = 0; i < x.size(); ++i) s.bits[i] = to_e4m3_satfinite(x[i] * s.fp8_scale);
        s.fp8_scale_inv = 1.0f / s.fp8_scale;
        return;
    }
    // FP16: 3. rscale = where(scale > 0, scale.reciprocal(), 0); 4. unscaled.mul_(rscale);
    // 5. scaled_state.copy_(unscaled_state): .to(float16), RNE
    const float rscale = s.scale > 0 ? 1.0f / s.scale : 0.0f;
    for (std::size_t i = 0; i < x.size(); ++i) s.bits[i] = to_f16(x[i] * rscale);
}

// AdamFunctor (adam.cu), ADAM_MODE_1 (AdamW), MATH_T = float, every operation in source order,
// with the four multiply-adds that nvcc contracts into FMAs. TE builds adam.cu with
// `-O3 --use_fast_math` (transformer_engine/common/CMakeLists.txt); the SASS of the update built so
// (scripts/gpu/te_adam_probe.sh, H200, nvcc 13.0) has exactly these FMAs, as does nvcc's default
// build. The divisions and the square root here are IEEE; TE's build uses MUFU.RCP / MUFU.SQRT
// approximations, so m and v are TE's bit for bit but the master weight p can differ in its last
// bits (docs/msamp.md, "The kernel as TE compiles it").
struct TeKernel {
    float b1, b2, eps, lr, decay, bc1, bc2;
    TeKernel(const AdamHyper& h, std::int64_t step) {
        // FusedAdam passes lr, betas, eps, weight_decay as C++ float; multi_tensor_adam_cuda:
        // bias_correction1 = 1 - std::pow(beta1, step) (float beta1, int step: evaluated in double)
        b1 = static_cast<float>(h.beta1);
        b2 = static_cast<float>(h.beta2);
        eps = static_cast<float>(h.eps);
        lr = static_cast<float>(h.lr);
        decay = static_cast<float>(h.weight_decay);
        bc1 = h.bias_correction ? static_cast<float>(1 - std::pow(static_cast<double>(b1), static_cast<double>(step)))
                                : 1.0f;
        bc2 = h.bias_correction ? static_cast<float>(1 - std::pow(static_cast<double>(b2), static_cast<double>(step)))
                                : 1.0f;
    }
    void operator()(float g, float& p, float& m, float& v) const {
        m = std::fma(1 - b1, g, b1 * m);        // beta1 * m + (1 - beta1) * g
        v = std::fma(g, (1 - b2) * g, b2 * v);  // beta2 * v + ((1 - beta2) * g) * g
        const float m_unbiased = m / bc1, v_unbiased = v / bc2;
        const float denom = std::sqrt(v_unbiased) + eps;
        const float update = std::fma(decay, p, m_unbiased / denom);  // (m' / denom) + (decay * p)
        p = std::fma(-lr, update, p);                                 // p - (lr * update)
    }
};

}  // namespace

// get_unscaled_state: FP8 Float8Tensor.float() (code * scale_inv: common/cast/fp8/dequantize_fp8.cuh
// dequantize_func), FP16 .float().mul_(scale),
// BF16 .float(), FP32 as stored.
std::vector<float> TeState::dequantized() const {
    std::vector<float> x(bits.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        switch (dtype) {
            case StateDtype::f32: x[i] = detail::float_of(bits[i]); break;
            case StateDtype::f16: x[i] = f16_to_float(static_cast<std::uint16_t>(bits[i])) * scale; break;
            case StateDtype::bf16: x[i] = bf16_to_float(static_cast<std::uint16_t>(bits[i])); break;
            case StateDtype::fp8: x[i] = e4m3_to_float(static_cast<std::uint8_t>(bits[i])) * fp8_scale_inv; break;
        }
    }
    return x;
}

TeFusedAdam::TeFusedAdam(std::vector<float> weight, std::vector<float> exp_avg, std::vector<float> exp_avg_sq,
                         AdamHyper h, std::int64_t step, TeAdamOptions o)
    : AdamReference(std::move(weight), h, step) {
    const std::size_t n = w32_.size();
    if (o.master != StateDtype::f32 && o.master != StateDtype::f16)
        throw std::invalid_argument(
            fmt::format("master weight dtype {}: FusedAdam allows fp32 or fp16", name(o.master)));
    if ((!exp_avg.empty() && exp_avg.size() != n) || (!exp_avg_sq.empty() && exp_avg_sq.size() != n))
        throw std::invalid_argument(fmt::format("optimizer states: {} and {} elements for a weight of {}",
                                                exp_avg.size(), exp_avg_sq.size(), n));
    if (step < 0) throw std::invalid_argument("optimizer step count must be >= 0");
    m_ = fresh_state(o.exp_avg, n);
    v_ = fresh_state(o.exp_avg_sq, n);
    if (!exp_avg.empty()) apply_scale(m_, exp_avg);
    if (!exp_avg_sq.empty()) apply_scale(v_, exp_avg_sq);
    m32_ = exp_avg.empty() ? std::vector<float>(n, 0.0f) : std::move(exp_avg);
    v32_ = exp_avg_sq.empty() ? std::vector<float>(n, 0.0f) : std::move(exp_avg_sq);
    // initialize_state: set_scaled_state(param, "master_param", param.float())
    w_.dtype = o.master;
    apply_scale(w_, w32_);
}

void TeFusedAdam::step(const std::vector<float>& grad, const std::vector<float>& ref_grad) {
    begin_step(grad, ref_grad);
    const std::size_t n = w32_.size();
    const TeKernel k(h_, step_);
    for (std::size_t i = 0; i < n; ++i) k(ref_grad[i], w32_[i], m32_[i], v32_[i]);  // FP32 reference
    // 1. get_unscaled_state for exp_avg, exp_avg_sq, master_param; 2. multi_tensor_adam;
    // 3. _apply_scale for each (fused_adam.py step(), "Scaling").
    std::vector<float> p = w_.dequantized(), m = m_.dequantized(), v = v_.dequantized();
    for (std::size_t i = 0; i < n; ++i) k(grad[i], p[i], m[i], v[i]);
    apply_scale(m_, m);
    apply_scale(v_, v);
    apply_scale(w_, p);
}

AdamReport report(const TeFusedAdam& a) {
    AdamReport r = compare_with_fp32(a.m_dequantized(), a.v_dequantized(), a.weight(), a.ref_m(), a.ref_v(),
                                     a.ref_weight(), a.initial_weight());
    r.steps = a.steps();
    r.m_scale = a.m_state().scale;
    r.v_scale = a.v_state().scale;
    return r;
}

}  // namespace fp8kit::simulate
