// MS-AMP LBAdamW with FP8/FP16 states (msamp/optim/adamw.py adamw_fn, adamw.cu
// adamw_fp8_stage1_kernel / adamw_fp8_stage2_kernel) next to the FP32 AdamW reference.
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "adam_report.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {
namespace {

// torch: x.abs().max(): NaN propagates.
float torch_amax(const std::vector<float>& x) {
    float m = 0;
    for (float v : x) {
        const float a = std::fabs(v);
        if (std::isnan(a)) return a;
        if (a > m) m = a;
    }
    return m;
}

// A state's stored value: adamw.cu's cast_dtype<float>(T) for T = __nv_fp8_e4m3 or half (exact),
// and cast_dtype<T>(float): __nv_fp8_e4m3(float) (RNE, saturating) or __float2half (RNE, Inf).
float decode(StateDtype d, std::uint16_t code) {
    return d == StateDtype::fp8 ? e4m3_to_float(static_cast<std::uint8_t>(code)) : f16_to_float(code);
}
std::uint16_t encode(StateDtype d, float x) { return d == StateDtype::fp8 ? to_e4m3_satfinite(x) : to_f16(x); }
// Floating.fp_maxs (msamp/common/dtype/floating.py): E4M3 448, float16 65504.
float fp_max(StateDtype d) { return d == StateDtype::fp8 ? kE4M3Max : kF16Max; }

// TypeCast.cast_to_fp8 / cast_to_fp16 (cast.py), in-time: scale from this tensor's amax and its
// old scale, then the saturating E4M3 cast or (x * scale).to(fp16).
void cast_state(StateDtype d, const std::vector<float>& x, float& scale, std::vector<std::uint16_t>& out) {
    scale = compute_scaling_factor(torch_amax(x), scale, fp_max(d), 0);
    out.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) out[i] = encode(d, x[i] * scale);
}

void check_state_dtype(StateDtype d, const char* which) {
    if (d != StateDtype::fp8 && d != StateDtype::f16)
        throw std::invalid_argument(
            fmt::format("{} dtype {}: LBAdamW's low-precision states are fp8 (torch.uint8) or fp16", which, name(d)));
}

// The float32 constants adamw_fp8_stage1_compute derives (adamw.cu): beta1, beta2, eps and lr
// arrive as float; `1 - pow(beta1, step)` is evaluated in double (std::pow(float, int)).
// The expressions are adamw.cu's in source order, as MS-AMP compiles them: msamp/optim/setup.py
// passes nvcc only -O3 (no --use_fast_math), so nvcc's defaults apply: IEEE division and square
// root, and multiply-adds contracted into FMAs. In the SASS of both kernels (sm_90, nvcc 13.0;
// scripts/gpu/msamp_adam_probe.sh) exactly three are: the last multiply of each moment with the
// add after it, and the parameter update. Every other operation is rounded on its own.
struct KernelConst {
    float b1, b2, eps, step_size, sqrt_bc2;
    KernelConst(const AdamHyper& h, std::int64_t step) {
        b1 = static_cast<float>(h.beta1);
        b2 = static_cast<float>(h.beta2);
        eps = static_cast<float>(h.eps);
        const float lr = static_cast<float>(h.lr);
        const float bc1 = h.bias_correction
                              ? static_cast<float>(1 - std::pow(static_cast<double>(b1), static_cast<double>(step)))
                              : 1.0f;
        const float bc2 = h.bias_correction
                              ? static_cast<float>(1 - std::pow(static_cast<double>(b2), static_cast<double>(step)))
                              : 1.0f;
        step_size = lr / bc1;
        sqrt_bc2 = std::sqrt(bc2);
    }
    // exp_avg_value_i of both kernels: beta1 * m * factor + (1 - beta1) * g, with
    // (beta1 * m) * factor + ((1 - beta1) * g) as one FMA (SASS: FFMA(b1 * m, factor, (1 - b1) * g))
    float m(float m_old, float inv, float g) const { return std::fma(b1 * m_old, inv, (1.f - b1) * g); }
    // exp_avg_sq_value_i: beta2 * v * factor + (1 - beta2) * (g * g), the same contraction
    float v(float v_old, float inv, float g) const { return std::fma(b2 * v_old, inv, (1.f - b2) * (g * g)); }
    // denom = sqrt(v) / sqrt_bias_corr2 + eps; param -= step_size * (m / denom), the last as one
    // FMA (SASS: FFMA(-(m / denom), step_size, param))
    float update(float param, float m, float v) const {
        const float denom = std::sqrt(v) / sqrt_bc2 + eps;
        return std::fma(-(m / denom), step_size, param);
    }
};

}  // namespace

MsampAdam::MsampAdam(std::vector<float> weight, std::vector<float> exp_avg, std::vector<float> exp_avg_sq, AdamHyper h,
                     std::int64_t step, bool fp16_master, MsampStates states)
    : AdamReference(std::move(weight), h, step), fp16_master_(fp16_master), states_(states) {
    const std::size_t n = w32_.size();
    check_state_dtype(states.exp_avg, "exp_avg");
    check_state_dtype(states.exp_avg_sq, "exp_avg_sq");
    if (exp_avg.empty()) exp_avg.assign(n, 0.0f);
    if (exp_avg_sq.empty()) exp_avg_sq.assign(n, 0.0f);
    if (exp_avg.size() != n || exp_avg_sq.size() != n)
        throw std::invalid_argument(fmt::format("optimizer states: {} and {} elements for a weight of {}",
                                                exp_avg.size(), exp_avg_sq.size(), n));
    if (step < 0) throw std::invalid_argument("optimizer step count must be >= 0");
    m32_ = std::move(exp_avg);
    v32_ = std::move(exp_avg_sq);
    cast_state(states.exp_avg, m32_, m_scale_, m_q_);
    cast_state(states.exp_avg_sq, v32_, v_scale_, v_q_);
    if (fp16_master_)
        cast_state(StateDtype::f16, w32_, w_scale_, w_q_);
    else
        wsim_ = w32_;
}

void AdamReference::begin_step(const std::vector<float>& grad, const std::vector<float>& ref_grad) {
    const std::size_t n = w32_.size();
    if (grad.size() != n || ref_grad.size() != n)
        throw std::invalid_argument(fmt::format("gradient of {} elements for a weight of {}",
                                                grad.size() != n ? grad.size() : ref_grad.size(), n));
    ++step_;
}

void MsampAdam::step(const std::vector<float>& grad, const std::vector<float>& ref_grad) {
    begin_step(grad, ref_grad);
    const std::size_t n = w32_.size();
    const KernelConst k(h_, step_);
    // param.mul_(1 - lr * weight_decay): a Python double used as float32
    const float decay = static_cast<float>(1.0 - h_.lr * h_.weight_decay);
    const bool decays = h_.weight_decay != 0;

    // FP32 reference: the same kernel expressions with FP32 states (factor 1).
    for (std::size_t i = 0; i < n; ++i) {
        float p = decays ? w32_[i] * decay : w32_[i];
        m32_[i] = k.m(m32_[i], 1.0f, ref_grad[i]);
        v32_[i] = k.v(v32_[i], 1.0f, ref_grad[i]);
        w32_[i] = k.update(p, m32_[i], v32_[i]);
    }

    // MS-AMP: 1. inverse factors 1.0 / meta.scale (Python double, passed as float)
    const float inv_m = static_cast<float>(1.0 / static_cast<double>(m_scale_));
    const float inv_v = static_cast<float>(1.0 / static_cast<double>(v_scale_));
    // 2. param.float(): fl32(fp16 value * scale_inv) with scale_inv = reciprocal(scale)
    std::vector<float> param = fp16_master_ ? weight() : wsim_;
    if (decays)
        for (float& p : param) p = p * decay;
    // 3. stage 1: moments, amaxes (fmaxf from 0: NaN is skipped) and the parameter update
    float amax_m = 0, amax_v = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const float m = k.m(decode(states_.exp_avg, m_q_[i]), inv_m, grad[i]);
        const float v = k.v(decode(states_.exp_avg_sq, v_q_[i]), inv_v, grad[i]);
        amax_m = std::fmax(std::fabs(m), amax_m);
        amax_v = std::fmax(std::fabs(v), amax_v);
        param[i] = k.update(param[i], m, v);
    }
    // 4. the master weight stored back: params[i].copy_(param.cast(fp16, meta))
    if (fp16_master_)
        cast_state(StateDtype::f16, param, w_scale_, w_q_);
    else
        wsim_ = param;
    // 5. new factors compute_scaling_factor(amax, ones, fp_max, 0) (tensor_scale=True)
    const float new_m = compute_scaling_factor(amax_m, 1.0f, fp_max(states_.exp_avg), 0);
    const float new_v = compute_scaling_factor(amax_v, 1.0f, fp_max(states_.exp_avg_sq), 0);
    // 6. stage 2: the same moments from the old states, stored as cast(m * s_m), cast(v * s_v)
    for (std::size_t i = 0; i < n; ++i) {
        const float m = k.m(decode(states_.exp_avg, m_q_[i]), inv_m, grad[i]);
        const float v = k.v(decode(states_.exp_avg_sq, v_q_[i]), inv_v, grad[i]);
        m_q_[i] = encode(states_.exp_avg, m * new_m);
        v_q_[i] = encode(states_.exp_avg_sq, v * new_v);
    }
    m_scale_ = new_m;
    v_scale_ = new_v;
}

std::vector<float> MsampAdam::weight() const {
    if (!fp16_master_) return wsim_;
    const float inv = 1.0f / w_scale_;
    std::vector<float> w(w_q_.size());
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = f16_to_float(w_q_[i]) * inv;
    return w;
}
std::vector<float> MsampAdam::m_dequantized() const {
    const float inv = 1.0f / m_scale_;
    std::vector<float> m(m_q_.size());
    for (std::size_t i = 0; i < m.size(); ++i) m[i] = decode(states_.exp_avg, m_q_[i]) * inv;
    return m;
}
std::vector<float> MsampAdam::v_dequantized() const {
    const float inv = 1.0f / v_scale_;
    std::vector<float> v(v_q_.size());
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = decode(states_.exp_avg_sq, v_q_[i]) * inv;
    return v;
}

AdamReport compare_with_fp32(const std::vector<float>& m, const std::vector<float>& v, const std::vector<float>& w,
                             const std::vector<float>& ref_m, const std::vector<float>& ref_v,
                             const std::vector<float>& ref_w, const std::vector<float>& w0) {
    AdamReport r;
    double me = 0, mr = 0, ve = 0, vr = 0, ue = 0, ur = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double rm = ref_m[i], rv = ref_v[i];
        r.m_nonzero += rm != 0;
        r.v_nonzero += rv != 0;
        r.m_underflow += rm != 0 && m[i] == 0;
        r.v_underflow += rv != 0 && v[i] == 0;
        me += (m[i] - rm) * (m[i] - rm);
        mr += rm * rm;
        ve += (v[i] - rv) * (v[i] - rv);
        vr += rv * rv;
        const double dref = ref_w[i] - static_cast<double>(w0[i]), dsim = w[i] - static_cast<double>(w0[i]);
        ue += (dsim - dref) * (dsim - dref);
        ur += dref * dref;
        r.weight_max_abs_diff = std::fmax(r.weight_max_abs_diff, std::fabs(static_cast<double>(w[i]) - ref_w[i]));
    }
    auto rel = [](double e, double ref) { return ref > 0 ? std::sqrt(e / ref) : (e > 0 ? INFINITY : 0.0); };
    r.m_rel_error = rel(me, mr);
    r.v_rel_error = rel(ve, vr);
    r.update_rel_error = rel(ue, ur);
    return r;
}

AdamReport report(const MsampAdam& a) {
    AdamReport r = compare_with_fp32(a.m_dequantized(), a.v_dequantized(), a.weight(), a.ref_m(), a.ref_v(),
                                     a.ref_weight(), a.initial_weight());
    r.steps = a.steps();
    r.m_scale = a.m_scale();
    r.v_scale = a.v_scale();
    return r;
}

}  // namespace fp8kit::simulate
