// The KV cache cast: each scale policy's scale and each cache format's cast, as the serving
// kernels compute them (float32 arithmetic, every cast through emu::encode). Sources of every rule
// are cited where it is computed and in docs/inference.md ("The KV cache").
#include <algorithm>
#include <cmath>
#include <cstring>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/emu/formats.hpp"
#include "fp8kit/calibrate.hpp"
#include "fp8kit/kv.hpp"
#include "fp8kit/recipes.hpp"
#include "convert/float_bits.hpp"

namespace fp8kit::kv {
namespace {

// Saturating round to nearest even: cuda_fp8.h __nv_cvt_float_to_fp8(x, __NV_SATFINITE, ...), as
// vLLM's cache kernels (csrc/quantization/w8a8/fp8/nvidia/quant_utils.cuh scaled_vec_conversion)
// and Triton's fp32 -> fp8 store cast (after tl.clamp) produce it: emu::kRneSaturate (FP4
// elements: emu::kRneSaturateNoNan).
using fp8kit::detail::bits_of;
using fp8kit::detail::decode_f32;
Format element(CacheFormat f) {
    switch (f) {
        case CacheFormat::e5m2: return Format::e5m2;
        case CacheFormat::e4m3fnuz: return Format::e4m3fnuz;
        case CacheFormat::nvfp4: return Format::e2m1;
        default: return Format::e4m3;
    }
}
// Largest finite value of the element format (the traits' limit, numerics::format_max).
float element_max(CacheFormat f) { return fp8_max(element(f)); }

// Saturated: the cast without saturation would overflow, i.e. x / s rounds (to nearest even)
// beyond the largest finite value: E4M3 |v| > 464, E5M2 |v| >= 61440, E4M3FNUZ |v| >= 248, E2M1
// |v| >= 7 (the ties go to the even neighbour: 448 for E4M3, the overflow for the others). A value
// that only rounds down to the maximum is not counted (vLLM's per-token scale puts each row's amax
// a rounding away from it).
bool overflows(Format el, float v) {
    if (el == Format::e2m1) return std::fabs(v) >= 7.0f;
    return !std::isfinite(decode_f32(el, emu::encode(el, Wide::f32, bits_of(v), emu::kRneNoSaturate)));
}

// One value cast: x / factor (float32, as `(float)x / scale` in the CUDA cache kernel) or
// x * inv (the Triton per-token kernel multiplies by 1 / scale), encoded; the statistics updated.
struct Cell {
    CastStats* head;
    CastStats* bucket;
};
void account(float x, double deq, bool saturated, bool zero_code, Cell c) {
    for (CastStats* s : {c.head, c.bucket}) {
        ++s->elements;
        if (x == 0.0f) continue;
        ++s->nonzero;
        s->saturated += saturated;
        s->underflow += zero_code;
        const double e = deq - static_cast<double>(x);
        s->signal += static_cast<double>(x) * x;
        s->noise += e * e;
        s->max_abs_err = std::max(s->max_abs_err, std::fabs(e));
    }
}

void cast_fp8(float x, float scale, bool by_reciprocal, CacheFormat f, Cell c) {
    const Format el = element(f);
    float v = by_reciprocal ? x * (1.0f / scale) : x / scale;
    const float m = element_max(f);
    const bool sat = overflows(el, v);
    if (by_reciprocal) v = std::clamp(v, -m, m);  // tl.clamp(k * (1 / k_scale), QUANT_MIN, QUANT_MAX)
    const float q = decode_f32(el, emu::encode(el, Wide::f32, bits_of(v), emu::kRneSaturate));
    account(x, static_cast<double>(q) * scale, sat, q == 0.0f, c);
}

// NVFP4, ModelOpt's rule (modelopt/torch/quantization/qtensor/nvfp4_tensor.py): global s2; block
// scale e4m3(clamp(block_amax / (6 * s2), 2^-9, 448)), 0 -> 1.0; codes e2m1(x / (sb * s2)), round
// to nearest even, saturating at 6.
void cast_nvfp4_row(const float* x, std::size_t n, float s2, Cell c) {
    for (std::size_t b0 = 0; b0 < n; b0 += 16) {
        const std::size_t b1 = std::min(n, b0 + 16);
        float amax = 0;
        for (std::size_t i = b0; i < b1; ++i) amax = std::max(amax, std::fabs(x[i]));
        float sb = s2 == 0.0f ? 0.0f : amax / (6.0f * s2);
        sb = sb == 0.0f ? 1.0f : std::clamp(sb, 0.001953125f, 448.0f);
        sb = decode_f32(Format::e4m3, emu::encode(Format::e4m3, Wide::f32, bits_of(sb), emu::kRneSaturate));
        const float factor = sb * s2;
        for (std::size_t i = b0; i < b1; ++i) {
            if (factor == 0.0f) {  // s2 = 0: every value of the scope is zero
                account(x[i], 0.0, false, true, c);
                continue;
            }
            const float v = x[i] / factor;
            const float q =
                decode_f32(Format::e2m1, emu::encode(Format::e2m1, Wide::f32, bits_of(v), emu::kRneSaturateNoNan));
            account(x[i], static_cast<double>(q) * sb * s2, overflows(Format::e2m1, v), q == 0.0f, c);
        }
    }
}

float amax_of(const float* x, std::size_t n) {
    float a = 0;
    for (std::size_t i = 0; i < n; ++i) a = std::max(a, std::fabs(x[i]));
    return a;
}

// The per-tensor policies' statistics: the first batch's amax, every batch's, and per head.
struct Amax {
    float first = 0, all = 0;
    std::vector<float> head;
};
Amax amax_stats(const std::vector<Tensor4>& steps) {
    Amax a;
    a.head.assign(steps.front().heads, 0.0f);
    for (std::size_t s = 0; s < steps.size(); ++s) {
        const Tensor4& t = steps[s];
        const std::size_t per_head = t.positions * t.dim;
        for (std::size_t b = 0; b < t.batch; ++b)
            for (std::size_t h = 0; h < t.heads; ++h) {
                const float m = amax_of(&t.data[(b * t.heads + h) * per_head], per_head);
                a.head[h] = std::max(a.head[h], m);
                if (s == 0) a.first = std::max(a.first, m);
            }
    }
    for (float m : a.head) a.all = std::max(a.all, m);
    return a;
}

// The scale of head h under a per-tensor or per-head policy (FP8: the dequantisation factor;
// NVFP4: the global scale s2).
float policy_scale(ScalePolicy p, CacheFormat f, const Amax& a, std::size_t h, char which) {
    const bool fp4 = f == CacheFormat::nvfp4;
    switch (p) {
        case ScalePolicy::one: return 1.0f;
        case ScalePolicy::vllm_first_batch: return fp4 ? a.first / 2688.0f : vllm_first_batch_scale(a.first, which);
        case ScalePolicy::tensor: return fp4 ? a.all / 2688.0f : calibrated_scale(a.all, f);
        case ScalePolicy::modelopt_trtllm: return fp4 ? a.all / 2688.0f : modelopt_kv_scale(a.all, f);
        // ModelOpt's HF export: amax / 448 unclamped, the calibrated rule.
        case ScalePolicy::modelopt_hf: return fp4 ? a.all / 2688.0f : calibrated_scale(a.all, f);
        case ScalePolicy::head: return fp4 ? a.head[h] / 2688.0f : calibrated_scale(a.head[h], f);
        default: return 0.0f;
    }
}

}  // namespace

float vllm_first_batch_scale(float amax, char which) {
    // vllm/attention/layer.py Attention.calc_kv_scales: torch.abs(key).max() / self.k_range, the
    // range a float32 tensor of envs.K_SCALE_CONSTANT (200; Q_SCALE_CONSTANT 200, V 100): the
    // bfloat16 amax is widened exactly, one float32 division.
    return amax / (which == 'v' ? 100.0f : 200.0f);
}

float calibrated_scale(float amax, CacheFormat f) {
    // llm-compressor (calculate_qparams, strategy tensor: amax / 448) writes k_scale / v_scale for
    // an E4M3 cache, as ModelOpt's HF export does (unified_export_hf.py -> postprocess_state_dict
    // divides the k/v_bmm_quantizer amax by 448, warns above 0.5 and never clamps; its TensorRT-LLM
    // and Megatron exports raise it to at least 1.0: modelopt_kv_scale). vLLM
    // (model_executor/layers/quantization/kv_cache.py BaseKVCacheMethod.process_weights_after_loading)
    // doubles checkpoint scales on FNUZ platforms (`if current_platform.is_fp8_fnuz(): k_scale *= 2`).
    const float s = amax / 448.0f;
    return f == CacheFormat::e4m3fnuz ? s * 2.0f : s;
}

float modelopt_kv_scale(float amax, CacheFormat f) {
    // modelopt/torch/export/quant_utils.py get_kv_cache_scaling_factor: get_scaling_factor of the
    // k/v_bmm_quantizer (amax / 448), then for an FP8 KV cache "we recommend default kv cache
    // scaling factor to be 1": torch.max(factor, tensor([1.0])). vLLM doubles it on FNUZ.
    const float s = std::max(amax / 448.0f, 1.0f);
    return f == CacheFormat::e4m3fnuz ? s * 2.0f : s;
}

float llmc_minmax_scale(const std::vector<Tensor4>& steps, CacheFormat f) {
    std::vector<calibrate::Batch> batches;
    batches.reserve(steps.size());
    for (const Tensor4& t : steps) batches.push_back(t.data);
    const calibrate::Scale s = calibrate::calibrate(calibrate::Method::llmc_minmax, batches, calibrate::DType::bf16);
    if (f == CacheFormat::nvfp4) return s.amax / 2688.0f;
    return f == CacheFormat::e4m3fnuz ? s.value * 2.0f : s.value;
}

float token_head_scale(float amax, CacheFormat f) {
    // vllm/v1/attention/ops/triton_reshape_and_cache_flash.py _reshape_cache_per_token:
    // tl.maximum(tl.max(tl.abs(k)) / QUANT_MAX, 1e-6), QUANT_MAX from _PER_TOKEN_QUANT_PARAMS
    // (float8_e4m3fn 448, float8_e4m3fnuz 240). E5M2 is not in that table: its largest value here.
    return std::max(amax / element_max(f), 1e-6f);
}

double CastStats::sqnr_db() const { return noise == 0 ? HUGE_VAL : 10.0 * std::log10(signal / noise); }
void CastStats::add(const CastStats& o) {
    elements += o.elements;
    nonzero += o.nonzero;
    saturated += o.saturated;
    underflow += o.underflow;
    signal += o.signal;
    noise += o.noise;
    max_abs_err = std::max(max_abs_err, o.max_abs_err);
}

CastResult cast_cache(const std::vector<Tensor4>& steps, char which, CacheFormat f, ScalePolicy p, std::size_t bucket) {
    if (steps.empty()) throw KvError("kv: no step to cast");
    if (bucket == 0) throw KvError("kv: the position bucket must be at least 1");
    const Tensor4& t0 = steps.front();
    const Amax a = amax_stats(steps);
    CastResult r;
    r.per_head.assign(t0.heads, {});
    r.per_bucket.assign((t0.positions + bucket - 1) / bucket, {});
    if (p != ScalePolicy::token_head) {
        const std::size_t n = p == ScalePolicy::head ? t0.heads : 1;
        for (std::size_t h = 0; h < n; ++h)
            r.scales.push_back(p == ScalePolicy::llmc_minmax ? llmc_minmax_scale(steps, f)
                                                             : policy_scale(p, f, a, h, which));
    }
    for (const Tensor4& t : steps)
        for (std::size_t b = 0; b < t.batch; ++b)
            for (std::size_t h = 0; h < t.heads; ++h)
                for (std::size_t pos = 0; pos < t.positions; ++pos) {
                    const float* x = &t.data[((b * t.heads + h) * t.positions + pos) * t.dim];
                    const Cell c{&r.per_head[h], &r.per_bucket[pos / bucket]};
                    float s = r.scales.empty() ? 0.0f : r.scales[r.scales.size() == 1 ? 0 : h];
                    if (p == ScalePolicy::token_head)  // one scale per (token, head): its own amax
                        s = f == CacheFormat::nvfp4 ? amax_of(x, t.dim) / 2688.0f
                                                    : token_head_scale(amax_of(x, t.dim), f);
                    if (f == CacheFormat::nvfp4) {
                        cast_nvfp4_row(x, t.dim, s, c);
                        continue;
                    }
                    for (std::size_t d = 0; d < t.dim; ++d) cast_fp8(x[d], s, p == ScalePolicy::token_head, f, c);
                }
    return r;
}

}  // namespace fp8kit::kv
