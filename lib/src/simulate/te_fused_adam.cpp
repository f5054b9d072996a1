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
// with the four multiply-adds that nvcc contracts into FMAs in both builds (the SASS of
// scripts/gpu/te_adam_probe.sh, H200, nvcc 13.0):
//     m = fma(1 - b1, g, b1 * m)          v = fma(g, (1 - b2) * g, b2 * v)
//     update = fma(decay, p, m' / denom)  p = fma(-lr, update, p)
// TE's own build (`-O3 --use_fast_math`, TeBuild::fast_math) flushes subnormals in every operation
// and computes a / b as a * MUFU.RCP(b) and sqrtf as MUFU.SQRT (numerics/fast_math.hpp); nvcc's
// default build (TeBuild::nvcc_default) is IEEE throughout.
template <class Ops>
void adamw_update(const Ops& o, float b1, float b2, float bc1, float bc2, float eps, float lr, float decay, float g,
                  float& p, float& m, float& v) {
    m = o.fma(o.sub(1, b1), g, o.mul(b1, m));
    v = o.fma(g, o.mul(o.sub(1, b2), g), o.mul(b2, v));
    const float m_unbiased = o.div(m, bc1), v_unbiased = o.div(v, bc2);
    const float denom = o.add(o.sqrt(v_unbiased), eps);
    const float update = o.fma(decay, p, o.div(m_unbiased, denom));
    p = o.fma(-lr, update, p);
}

struct IeeeOps {  // nvcc -O3: IEEE float arithmetic (this file is built with -ffp-contract=off)
    float add(float a, float b) const { return a + b; }
    float sub(float a, float b) const { return a - b; }
    float mul(float a, float b) const { return a * b; }
    float div(float a, float b) const { return a / b; }
    float fma(float a, float b, float c) const { return std::fma(a, b, c); }
    float sqrt(float a) const { return std::sqrt(a); }
};

struct FastMathOps {  // nvcc -O3 --use_fast_math on sm_90
    const numerics::fast_math::MufuTables& t = mufu_sm90_tables();
    float add(float a, float b) const { return numerics::fast_math::add(a, b); }
    float sub(float a, float b) const { return numerics::fast_math::sub(a, b); }
    float mul(float a, float b) const { return numerics::fast_math::mul(a, b); }
    float div(float a, float b) const { return numerics::fast_math::div(a, b, t); }
    float fma(float a, float b, float c) const { return numerics::fast_math::fma(a, b, c); }
    float sqrt(float a) const { return numerics::fast_math::sqrt(a, t); }
};

struct TeKernel {
    float b1, b2, eps, lr, decay, bc1, bc2;
    TeBuild build;
    TeKernel(const AdamHyper& h, std::int64_t step, TeBuild b) : build(b) {
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
    // Every element of one step.
    void operator()(const std::vector<float>& g, std::vector<float>& p, std::vector<float>& m,
                    std::vector<float>& v) const {
        if (build == TeBuild::fast_math) {
            const FastMathOps o;
            for (std::size_t i = 0; i < g.size(); ++i)
                adamw_update(o, b1, b2, bc1, bc2, eps, lr, decay, g[i], p[i], m[i], v[i]);
        } else {
            const IeeeOps o;
            for (std::size_t i = 0; i < g.size(); ++i)
                adamw_update(o, b1, b2, bc1, bc2, eps, lr, decay, g[i], p[i], m[i], v[i]);
        }
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
    build_ = o.build;
}

void TeFusedAdam::step(const std::vector<float>& grad, const std::vector<float>& ref_grad) {
    begin_step(grad, ref_grad);
    const TeKernel k(h_, step_, build_);
    k(ref_grad, w32_, m32_, v32_);  // FP32 reference: the same kernel, FP32 states and master
    // 1. get_unscaled_state for exp_avg, exp_avg_sq, master_param; 2. multi_tensor_adam;
    // 3. _apply_scale for each (fused_adam.py step(), "Scaling").
    std::vector<float> p = w_.dequantized(), m = m_.dequantized(), v = v_.dequantized();
    k(grad, p, m, v);
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
