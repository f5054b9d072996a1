// Every scale rule of the training frameworks, written once for host and device (FP8KIT_HD).
// A rule turns an amax into the float32 `scale` of the cast q = fp8(fl32(x * scale)) and the
// `scale_inv` of dequantisation x^ = q * scale_inv, with the float32 arithmetic of its source.
// Exponents are read from float bits, never from a floating log2 (docs/recipes.md says where a
// framework's log2 can differ). lib (fp8kit::core) and the CUDA kernels call these; nothing else
// may re-type them.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit::numerics {

using emu::Format;

// ---- float bits ---------------------------------------------------------------------------

FP8KIT_HD std::uint32_t bits_of(float v) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(v);
#else
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
#endif
}

FP8KIT_HD float float_of(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float v;
    std::memcpy(&v, &u, 4);
    return v;
#endif
}

FP8KIT_HD bool is_nan(float v) { return (bits_of(v) & 0x7FFFFFFFu) > 0x7F800000u; }
FP8KIT_HD bool is_inf(float v) { return (bits_of(v) & 0x7FFFFFFFu) == 0x7F800000u; }
FP8KIT_HD bool is_finite(float v) { return (bits_of(v) & 0x7FFFFFFFu) < 0x7F800000u; }

inline constexpr float kFltMax = 3.40282346638528859812e+38f;

// Round-to-nearest float32 operations that stay IEEE even under nvcc --use_fast_math.
FP8KIT_HD float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fdiv_rn(a, b);
#else
    return a / b;
#endif
}
FP8KIT_HD float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}
FP8KIT_HD float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}
FP8KIT_HD float fma_rn(float a, float b, float c) {  // rounded once
#if defined(__CUDA_ARCH__)
    return __fmaf_rn(a, b, c);
#else
    return std::fma(a, b, c);
#endif
}

// floor(log2 |v|) of a finite nonzero float32, subnormals included, from the bits.
FP8KIT_HD int floor_log2(float v) {
    const std::uint32_t u = bits_of(v) & 0x7FFFFFFFu;
    const int biased = static_cast<int>(u >> 23);
    if (biased != 0) return biased - 127;
    int lead = 22;  // subnormal: the position of the leading mantissa bit
    while (lead > 0 && !((u >> lead) & 1u)) --lead;
    return -149 + lead;
}

// floor(log2(v)) with torch.log2's float32 result (MS-AMP's TorchScript step), taken as correctly
// rounded: the binary64 log2 rounded to float32, then floored. Within half a float32 ulp of an
// integer k it is k also for v just below 2^k, where the exact floor_log2 gives k - 1 (docs/msamp.md).
FP8KIT_HD int floor_log2_f32(float v) {
#if defined(__CUDA_ARCH__)
    const float l = static_cast<float>(::log2(static_cast<double>(v)));
#else
    const float l = static_cast<float>(std::log2(static_cast<double>(v)));
#endif
    const int f = static_cast<int>(l);
    return static_cast<float>(f) > l ? f - 1 : f;
}

// 2^e as a float32: exact for e in [-149, 127]; 0 below and Inf above, as float32 arithmetic gives.
FP8KIT_HD float pow2f(int e) {
    if (e > 127) return float_of(0x7F800000u);
    if (e < -149) return 0.0f;
    if (e >= -126) return float_of(static_cast<std::uint32_t>(e + 127) << 23);
    return float_of(std::uint32_t{1} << (e + 149));
}

// ---- format facts -------------------------------------------------------------------------

// Largest finite value of an element format as float32 (448, 57344, 240, 57344, 2^127).
FP8KIT_HD float format_max(Format f) {
    return emu::with_format(f, [&](auto fmt) {
        using F = decltype(fmt);
        return float_of(
            static_cast<std::uint32_t>(emu::decode(f, emu::Wide::f32, static_cast<std::uint8_t>(F::max_finite_code))));
    });
}

// The element format's largest exponent, emax_elem of OCP MX v1.0 section 6.3 (8 for E4M3).
FP8KIT_HD int format_emax(Format f) {
    return emu::with_format(f, [](auto fmt) { return decltype(fmt)::emax; });
}

// The element format's mantissa bits (3 for E4M3, 1 for E2M1).
FP8KIT_HD int format_mbits(Format f) {
    return emu::with_format(f, [](auto fmt) { return decltype(fmt)::man_bits; });
}

// ---- per-tensor and per-block rules -------------------------------------------------------

struct ScalePair {
    float scale, scale_inv;
};

// TransformerEngine compute_scale_from_amax (transformer_engine/common/recipe/recipe_common.cuh),
// used by current scaling and, per block, by Float8BlockScaling:
//   1. amax < eps -> eps (NaN compares false);
//   2. amax Inf or 0 -> 1;
//   3. scale = fmax / amax (__fdiv_rn); NaN (from a NaN amax) -> 1;
//   4. Inf -> value_for_inf (FLT_MAX for current scaling);
//   5. pow2: keep sign and exponent bits (floor to a power of two).
FP8KIT_HD float te_scale(float amax, float fmax, float eps, bool pow2, float value_for_inf) {
    if (amax < eps) amax = eps;
    if (is_inf(amax) || amax == 0.0f || is_nan(amax)) return 1.0f;
    float scale = div_rn(fmax, amax);
    if (is_inf(scale)) scale = value_for_inf;
    if (pow2) scale = float_of(bits_of(scale) & 0xFF800000u);
    return scale;
}

// TransformerEngine DelayedScaling's division (delayed_scaling.cu, kernel_bulk), after the
// history reduction gave `amax`: scaled_max = fmax * 2^-margin; scale = scaled_max / amax when
// amax is finite and > 0, else the previous scale; an Inf scale becomes FLT_MAX.
FP8KIT_HD float te_scaled_max(float fmax, int margin) {
#if defined(__CUDA_ARCH__)
    return ldexpf(fmax, -margin);
#else
    return std::ldexp(fmax, -margin);
#endif
}
FP8KIT_HD float te_delayed_scale(float amax, float previous_scale, float scaled_max) {
    float scale = (is_finite(amax) && amax > 0.0f) ? div_rn(scaled_max, amax) : previous_scale;
    if (is_inf(scale)) scale = kFltMax;
    return scale;
}

// torchao float8_utils.amax_to_scale (torchao/float8/float8_utils.py):
//   scale = fl32(fmax / clamp(fl64(amax), min=eps)) in binary64, one rounding to float32;
//   round_scales_to_power_of_2: exp2(floor(log2 scale)) (from the bits here).
// No guard: amax Inf gives 0 and amax NaN gives NaN (torch.clamp propagates NaN).
FP8KIT_HD float torchao_scale(float amax, float fmax, double eps, bool pow2) {
    const double a = static_cast<double>(amax);
    const double clamped = (a != a) ? a : (a < eps ? eps : a);
    float scale = static_cast<float>(static_cast<double>(fmax) / clamped);
    // A finite positive scale is at least fmax / FLT_MAX, so normal: floor from the bits.
    if (pow2 && is_finite(scale) && scale > 0.0f) scale = pow2f(floor_log2(scale));
    return scale;
}

// MS-AMP ScalingMeta.compute_scaling_factor (msamp/common/tensor/meta.py), TorchScript on
// float32 tensors, transcribed step by step in its order:
//   1. ratio = fp_max / amax: TorchScript evaluates `float / Tensor` as reciprocal(amax) * fp_max
//      (torch/csrc/jit/frontend/builtin_functions.cpp), so fl32(fl32(1 / amax) * fp_max);
//   2. exp = floor(log2(ratio)) - margin, log2 in float32 (log2 of 0 is -Inf, of Inf Inf, of < 0 NaN);
//   3. sf = round(2^|exp|) (Inf past 2^127);
//   4. sf = previous where not (amax > 0);
//   5. sf = previous where amax is not finite;
//   6. sf = 1 / sf where exp < 0 (after 4 and 5: an Inf amax gives exp = -Inf, so 1 / previous).
// fp_max per format: 448 (E4M3), 57344 (E5M2), 65504 (FP16).
FP8KIT_HD float msamp_scale(float amax, float previous_scale, float fmax, int margin) {
    const float ratio = mul_rn(div_rn(1.0f, amax), fmax);  // step 1
    // Step 2 as an integer with the IEEE special values kept apart: NaN, -Inf, +Inf.
    enum { kFinite, kNan, kMinusInf, kPlusInf } kind = kFinite;
    int e = 0;
    if (is_nan(ratio) || ratio < 0.0f)
        kind = kNan;  // log2(<0) = NaN
    else if (ratio == 0.0f)
        kind = kMinusInf;
    else if (is_inf(ratio))
        kind = kPlusInf;
    else
        e = floor_log2_f32(ratio) - margin;  // float32 log2
    const int mag = e < 0 ? -e : e;
    float sf = (kind == kNan)                   ? float_of(0x7FC00000u)  // step 3
               : (kind != kFinite || mag > 127) ? float_of(0x7F800000u)
                                                : pow2f(mag);
    if (!(amax > 0.0f)) sf = previous_scale;                                // step 4
    if (!is_finite(amax)) sf = previous_scale;                              // step 5
    const bool negative = kind == kMinusInf || (kind == kFinite && e < 0);  // NaN < 0 is false
    return negative ? div_rn(1.0f, sf) : sf;                                // step 6
}

// DeepGEMM per_token_cast_to_fp8 / per_block_cast_to_fp8 (deep_gemm/utils/math.py), as used by
// DeepSeek-V3: sf = fl32(max(amax, floor) / fmax) (torch clamp: NaN propagates); with UE8M0
// (use_ue8m0) sf = 2^ceil(log2 sf) from the bits; scale = fl32(1 / sf), scale_inv = sf.
FP8KIT_HD ScalePair deepseek_scale(float amax, float fmax, float amax_floor, bool ue8m0) {
    const float a = is_nan(amax) ? amax : (amax < amax_floor ? amax_floor : amax);
    float sf = div_rn(a, fmax);
    if (ue8m0 && is_finite(sf) && sf > 0.0f) {
        const int e = floor_log2(sf);
        sf = (pow2f(e) == sf) ? sf : pow2f(e + 1);  // itself when a power of two, else the next up
    }
    return {div_rn(1.0f, sf), sf};
}

// ---- MX (E8M0 block scales) ---------------------------------------------------------------

// E8M0 code b stands for X = 2^(b - 127); 0xFF is NaN.
inline constexpr std::uint8_t kE8m0Nan = 0xFF;

// OCP Microscaling Formats v1.0, section 6.3: X = 2^(floor(log2 amax) - emax_elem), the code
// clamped to [0, 254]; amax 0 -> code 0 (2^-127); NaN or Inf amax -> 0xFF.
FP8KIT_HD std::uint8_t mx_code_floor(float block_amax, int emax_elem) {
    if (!is_finite(block_amax)) return kE8m0Nan;
    if (block_amax == 0.0f) return 0;
    const int code = floor_log2(block_amax) - emax_elem + 127;
    return static_cast<std::uint8_t>(code < 0 ? 0 : (code > 254 ? 254 : code));
}

// TransformerEngine MXFP8 (transformer_engine/common/util/ptx.cuh float_to_e8m0, the software
// path of cvt.rp.satfinite.ue8m0x2.f32): val = amax * fl32(1 / fmax); NaN -> 0xFF, Inf -> 0xFE,
// 0 -> 0; else the biased exponent of val, plus one when the mantissa is nonzero, except at 0xFE
// (saturates) and for a subnormal val <= 2^-127 (2^-127, code 0, already covers it). Never
// overflows the elements: amax / X <= fmax.
FP8KIT_HD std::uint8_t mx_code_roundup(float block_amax, float fmax) {
    const float rcp = static_cast<float>(1.0 / static_cast<double>(fmax));
    const float val = mul_rn(block_amax, rcp);
    if (is_nan(val)) return kE8m0Nan;
    if (is_inf(val)) return 0xFE;
    if (val == 0.0f) return 0;
    const std::uint32_t u = bits_of(val);
    std::uint32_t exponent = (u >> 23) & 0xFFu;
    const std::uint32_t mantissa = u & 0x7FFFFFu;
    if (mantissa > 0 && exponent != 0xFE && !(exponent == 0 && mantissa <= 0x400000u)) ++exponent;
    return static_cast<std::uint8_t>(exponent);
}

// triton_kernels' downcast_to_mxfp with its default DequantScaleRoundingMode.ROUND_UP and uint8
// scales (triton-lang/triton python/triton_kernels/triton_kernels/numerics_details/
// mxfp_details/_downcast_to_mxfp.py _compute_quant_and_scale, the same at commits 9e1e203f,
// August 2025, and d80d2866, May 2026): dequant_scale = fl32(amax / fmax) (a division, unlike
// mx_code_roundup's multiply by fl32(1 / fmax)); code = ((bits + 0x007FFFFF) & 0x7F800000) >> 23
// in uint32, i.e. the exponent field plus one unless the mantissa field is zero. A subnormal
// quotient gives code 1 (2^-126), a zero amax code 0; an Inf quotient 0xFF. The kernel then
// multiplies the elements by 1 / 2^(code - 127), by 0 for code 0 (`tl.where(dequant_scale_rounded
// == 0, 0, 1.0 / dequant_scale_rounded)`).
FP8KIT_HD std::uint8_t mx_code_triton_round_up(float block_amax, float fmax) {
    const std::uint32_t u = bits_of(div_rn(block_amax, fmax));
    return static_cast<std::uint8_t>(((u + 0x007FFFFFu) & 0x7F800000u) >> 23);
}

// The pair of an E8M0 code: scale_inv = 2^(code - 127), scale = 2^(127 - code) (2^-127 at 254
// is a float32 subnormal and exact); NaN for 0xFF.
FP8KIT_HD ScalePair e8m0_scale_pair(std::uint8_t code) {
    if (code == kE8m0Nan) return {float_of(0x7FC00000u), float_of(0x7FC00000u)};
    const int e = static_cast<int>(code) - 127;
    return {pow2f(-e), pow2f(e)};
}

enum class MxRule : std::uint8_t { ocp_floor, round_up };

// The scale an MX block is CAST with, from its code. OCP floor: 2^(127 - code). Round-up follows
// TransformerEngine, whose cast multiplies by exp2f_rcp(code) (transformer_engine/common/util/
// ptx.cuh): 1 for code 0, else 2^(127 - code). So a block whose amax gives code 0 (amax below
// about fmax * 2^-127, e.g. 1e-38) casts unscaled under round-up. scale_inv stays 2^(code - 127).
FP8KIT_HD ScalePair mx_cast_pair(MxRule rule, std::uint8_t code) {
    ScalePair p = e8m0_scale_pair(code);
    if (rule == MxRule::round_up && code == 0) p.scale = 1.0f;
    return p;
}

// ---- torchao 0.18's MX rules (torchao/prototype/mx_formats/mx_tensor.py, to_mx) -------------
// ScaleCalculationMode FLOOR, CEIL and EVEN, from the bits of the block amax in float32, in
// to_mx's order (emax = the element format's emax, torchao's F*_MAX_POW2; mbits its mantissa bits):
//   EVEN:  bits = (bits + 2^(22 - mbits)) & 0xFF800000  (the amax rounded to the element's precision
//          first: a carry moves it to the next power of two; NaN is put back afterwards)
//   e = biased exponent field of bits - 127             (every subnormal reads as -127)
//   CEIL:  e += 1 when the mantissa field is nonzero
//   code = clamp(e - emax, -127, 128) + 127; NaN amax -> 0xFF. An Inf amax is NOT 0xFF: its
//          exponent field 255 gives code 255 - emax - 0 (247 for E4M3), as torchao 0.18 computes it.
// torchao's amax is torch.amax(torch.abs(block)): NaN propagates (rule_amax_keeps_nan).
enum class TorchaoMx : std::uint8_t { floor, ceil, even };

FP8KIT_HD std::uint8_t mx_code_torchao(float block_amax, int emax_elem, int mbits_elem, TorchaoMx mode) {
    if (is_nan(block_amax)) return kE8m0Nan;
    std::uint32_t u = bits_of(block_amax) & 0x7FFFFFFFu;  // torch.abs: the sign bit is clear
    if (mode == TorchaoMx::even) u = (u + (std::uint32_t{1} << (22 - mbits_elem))) & 0xFF800000u;
    int e = static_cast<int>((u >> 23) & 0xFFu) - 127;
    if (mode == TorchaoMx::ceil && (u & 0x7FFFFFu) != 0) ++e;
    int unbiased = e - emax_elem;
    unbiased = unbiased < -127 ? -127 : (unbiased > 128 ? 128 : unbiased);
    return static_cast<std::uint8_t>(unbiased + 127);
}

// The scale torchao's FLOOR/CEIL/EVEN cast with, from the code: scale_fp32 = float with exponent
// field `code` (code 0 is 0.0, 0xFF is +Inf), clamp(min=F32_MIN_NORMAL = 2^-126), and the elements
// are DIVIDED by it. So code 0 divides by 2^-126 (while the code stores 2^-127: the elements come
// out half as large as under the OCP rule), and code 0xFF divides by Inf (finite elements -> +-0,
// Inf and NaN -> NaN). Division by a power of two equals the multiply by its exact reciprocal, so
// `scale` is 2^(127 - code), 2^126 for code 0, 0 for 0xFF. scale_inv is what torchao dequantises
// with (get_fp_scale): 2^(code - 127) (2^-127 for code 0), NaN for 0xFF.
FP8KIT_HD ScalePair mx_torchao_cast_pair(std::uint8_t code) {
    if (code == kE8m0Nan) return {0.0f, float_of(0x7FC00000u)};
    ScalePair p = e8m0_scale_pair(code);
    if (code == 0) p.scale = pow2f(126);
    return p;
}

// ceil(log2(v)) with torch.log2's float32 result, taken as correctly rounded (the binary64 log2
// rounded to float32, then ceiled): for v just above 2^k the float32 log2 rounds to k exactly
// when |k| is large enough, and the ceiling is then k, where the exact ceiling is k + 1.
FP8KIT_HD int ceil_log2_f32(float v) {
#if defined(__CUDA_ARCH__)
    const float l = static_cast<float>(::log2(static_cast<double>(v)));
#else
    const float l = static_cast<float>(std::log2(static_cast<double>(v)));
#endif
    const int f = static_cast<int>(l);
    return static_cast<float>(f) < l ? f + 1 : f;
}

// torchao 0.18 RCEIL (mx_tensor.py _to_mx_rceil, the path every CPU and every GPU before
// Blackwell takes: the cvt.rp.satfinite.ue8m0x2.f32 branch needs torch.compile on sm_100):
//   descale = fl32(amax / fmax) (a division); NaN -> 0xFF; Inf -> 0xFE;
//   code = clamp(ceil(log2(descale)), -127, 127) + 127 with torch.log2 in float32 (ceil_log2_f32;
//   log2(0) = -Inf -> code 0).
// Cast: rcp = 1 for code 0, 2^-127 for 0xFE, NaN for 0xFF, else 2^(127 - code); elements x * rcp,
// then clamped to +-fmax (torch.clamp keeps NaN). Dequantisation (get_fp_scale): 2^(code - 127).
FP8KIT_HD std::uint8_t mx_code_torchao_rceil(float block_amax, float fmax) {
    const float d = div_rn(block_amax, fmax);
    if (is_nan(d)) return kE8m0Nan;
    if (is_inf(d)) return 0xFE;
    if (d == 0.0f) return 0;
    int c = ceil_log2_f32(d);
    c = c < -127 ? -127 : (c > 127 ? 127 : c);
    return static_cast<std::uint8_t>(c + 127);
}
FP8KIT_HD ScalePair mx_torchao_rceil_cast_pair(std::uint8_t code) {
    ScalePair p = e8m0_scale_pair(code);
    if (code == 0) p.scale = 1.0f;
    return p;  // 0xFE: 2^-127 (e8m0_scale_pair's own); 0xFF: NaN
}

// ---- NVFP4 (E2M1 elements, E4M3 block scales, a float32 global scale) ------------------------

// 448 * 6: E4M3's largest value times E2M1's, the constant of every NVFP4 rule (exact in float32).
inline constexpr float kNvfp4ScaleMax = 2688.0f;
// fl32(1 / 6) and fl32(1 / 2688), TE's two constant quotients, by their bits: __fdiv_rn of two
// constants is not folded by nvcc, and each cost a division (about ten instructions) per block.
FP8KIT_HD float one_sixth() { return float_of(0x3E2AAAABu); }
FP8KIT_HD float one_over_2688() { return float_of(0x39C30C31u); }

// E4M3 code of a float32 as cuda_fp8.h's __nv_cvt_float_to_fp8(v, __NV_SATFINITE, __NV_E4M3)
// gives it (RNE; finite overflow and +-Inf -> +-448; NaN -> 0x7F): static_cast<fp8e4m3>(float).
// On sm_89 and later the device computes it with the instruction cuda_fp8.hpp uses there,
// cvt.rn.satfinite.e4m3x2.f32 (one F2FP), the conversion of the element kernels' kCvt path
// (cuda/src/element.cuh), which the exhaustive check compares with emu::convert under this
// policy; emu's general conversion took about 60 instructions per NVFP4 block.
FP8KIT_HD std::uint8_t e4m3_satfinite(float v) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    std::uint16_t r;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(v));
    return static_cast<std::uint8_t>(r & 0xFFu);
#else
    return emu::encode(Format::e4m3, emu::Wide::f32, bits_of(v),
                       {emu::Rounding::nearest_even, emu::Overflow::saturate_all, emu::NanEncoding::canonical});
#endif
}
// The float32 value of an E4M3 code. On sm_89 and later the device widens the non-NaN codes by
// cvt.rn.f16x2.e4m3x2 and cvt.f32.f16 (F2FP, HADD2.F32): every E4M3 value, -0 included, is an
// f16 value (3 mantissa bits, 2^-9 .. 448) and every f16 value a float32 one, so both steps are
// exact; the NaN codes 0x7F / 0xFF keep emu::decode's bits.
FP8KIT_HD float e4m3_value(std::uint8_t code) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
    if ((code & 0x7Fu) != 0x7Fu) {
        std::uint32_t h2;
        float v;
        asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(h2) : "h"(static_cast<std::uint16_t>(code)));
        asm("{\n\t.reg .f16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.f32.f16 %0, lo;\n\t}" : "=f"(v) : "r"(h2));
        return v;
    }
#endif
    return float_of(static_cast<std::uint32_t>(emu::decode(Format::e4m3, emu::Wide::f32, code)));
}

// fminf(v, FLT_MAX), TE's cap: v below FLT_MAX stays (its sign too), a NaN v gives FLT_MAX. The
// device takes PTX min.f32, which is that function in one instruction (PTX ISA, min: "if one
// input is NaN, the result is the non-NaN input"; without .ftz subnormals are kept, whatever
// nvcc's -ftz), where the compare chain below took four.
FP8KIT_HD float fmin_flt_max(float v) {
#if defined(__CUDA_ARCH__)
    float r;
    asm("min.f32 %0, %1, 0f7F7FFFFF;" : "=f"(r) : "f"(v));
    return r;
#else
    return is_nan(v) ? kFltMax : (v < kFltMax ? v : kFltMax);
#endif
}

// TransformerEngine compute_global_encode_scaling_factor_FP4 (transformer_engine/common/cast/
// nvfp4/core_nvfp4.cuh): S_enc = fminf(fl32(2688 / global_amax), FLT_MAX); 1 when global_amax is
// 0 or S_enc is 0 (global_amax Inf). fminf drops a NaN, so a NaN amax gives FLT_MAX (TE's amax
// reduction ignores NaN, so it does not arise from TE itself).
FP8KIT_HD float nvfp4_te_global_encode(float global_amax) {
    float s = div_rn(kNvfp4ScaleMax, global_amax);
    s = fmin_flt_max(s);
    if (global_amax == 0.0f || s == 0.0f) return 1.0f;
    return s;
}

// The per-block numbers of one NVFP4 block: the E4M3 decode-scale byte the tensor stores, the
// float32 factor the elements are multiplied by before the E2M1 cast, and the float32 factor a
// code is multiplied by to dequantise.
struct Nvfp4Block {
    std::uint8_t scale_code;  // E4M3
    float encode;             // elements: e2m1_satfinite(fl32(x * encode))
    float decode;             // x^ = e2m1(code) * decode
};

// TransformerEngine NVFP4, round to nearest (quantize_transpose_nvfp4.cuh with core_nvfp4.cuh
// quantization_and_transposition_SF::compute_decoding_scaling_factor; the Python reference
// transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py _quantize_blockwise_reference):
//   1. S_dec = fl32(1 / S_enc) (the kernel divides in binary64 and rounds once to float32: the
//      same float32, since a quotient of floats rounded via binary64 is correctly rounded);
//   2. scale byte = e4m3_satfinite(fminf(fl32(block_amax * fl32(S_enc * fl32(1/6))), FLT_MAX)):
//      a multiply by the float nearest 1/6, never a division by 6; a block amax below 2^-10 /
//      (S_enc/6) rounds to byte 0 (TE keeps it: no floor on the block scale);
//   3. encode = fminf(fl32(1 / fl32(float(byte) * S_dec)), FLT_MAX): a zero byte gives FLT_MAX,
//      so the block's nonzero elements saturate to +-6 while its scale decodes to 0;
//   4. decode (dequantize_nvfp4.cuh dequantize_fp4_kernel) = fl32(fl32(float(byte) * global_amax)
//      * fl32(1 / 2688)).
// Steps 1 and the factor of step 2 depend on the tensor alone (set_global_amax computes them once
// per tensor: nvfp4_te_s_dec, nvfp4_te_byte_factor), step 2 on the block amax, and steps 3 and 4
// on the byte alone (so a kernel may take them from a table of the bytes).
FP8KIT_HD float nvfp4_te_s_dec(float s_enc) { return div_rn(1.0f, s_enc); }  // 1
FP8KIT_HD float nvfp4_te_byte_factor(float s_enc) { return mul_rn(s_enc, one_sixth()); }

// Step 2, with factor = nvfp4_te_byte_factor(S_enc).
FP8KIT_HD std::uint8_t nvfp4_te_byte(float block_amax, float factor) {
    float sb = mul_rn(block_amax, factor);
    sb = fmin_flt_max(sb);
    return e4m3_satfinite(sb);
}

// Steps 3 and 4, with s_dec = nvfp4_te_s_dec(S_enc).
FP8KIT_HD Nvfp4Block nvfp4_te_from_byte(std::uint8_t code, float s_dec, float global_amax) {
    float enc = div_rn(1.0f, mul_rn(e4m3_value(code), s_dec));
    enc = fmin_flt_max(enc);                                                           // 3
    const float dec = mul_rn(mul_rn(e4m3_value(code), global_amax), one_over_2688());  // 4
    return {code, enc, dec};
}

FP8KIT_HD Nvfp4Block nvfp4_te_block(float block_amax, float s_enc, float global_amax) {
    return nvfp4_te_from_byte(nvfp4_te_byte(block_amax, nvfp4_te_byte_factor(s_enc)), nvfp4_te_s_dec(s_enc),
                              global_amax);
}

// torchao NVFP4 with a per-tensor scale (torchao/prototype/mx_formats/nvfp4_tensor.py
// per_tensor_amax_to_scale and nvfp4_quantize, two-level branch), in its order:
//   1. per_tensor_scale = fl32(global_amax / 2688) (no guard: amax 0 gives 0);
//   2. block_scale = fl32(block_amax / 6) (a division), then fl32(block_scale / per_tensor_scale);
//   3. byte = e4m3(clamp(that, 2^-6, 448)) (E4M3_EPS = finfo(float8_e4m3fn).tiny: block scales
//      stay normal, never 0; torch.clamp propagates NaN, which .to(float8_e4m3fn) makes 0x7F);
//   4. encode = fl32(fl32(1 / per_tensor_scale) / float(byte)); the elements are clamped to +-6
//      and rounded to nearest even (f32_to_f4_unpacked);
//   5. decode = fl32(float(byte) * per_tensor_scale) (NVFP4Tensor.dequantize's scale product).
// Step 1 and the quotient 1 / per_tensor_scale of step 4 depend on the tensor alone
// (set_global_amax computes them once: nvfp4_torchao_pts, nvfp4_torchao_pts_inv), steps 2 and 3
// on the block amax, and steps 4 and 5 on the byte alone.
FP8KIT_HD float nvfp4_torchao_pts(float global_amax) { return div_rn(global_amax, kNvfp4ScaleMax); }  // 1
FP8KIT_HD float nvfp4_torchao_pts_inv(float pts) { return div_rn(1.0f, pts); }

// E4M3 of clamp(v, 2^-6, 448) (torch.clamp keeps NaN): step 3 here and step 2 of the single rule.
FP8KIT_HD std::uint8_t nvfp4_torchao_clamped_byte(float v) {
    const float tiny = float_of(0x3C800000u);  // 2^-6
    const float clamped = is_nan(v) ? v : (v < tiny ? tiny : (v > 448.0f ? 448.0f : v));
    return e4m3_satfinite(clamped);
}

// Steps 2 and 3, with pts = nvfp4_torchao_pts(global_amax).
FP8KIT_HD std::uint8_t nvfp4_torchao_byte(float block_amax, float pts) {
    return nvfp4_torchao_clamped_byte(div_rn(div_rn(block_amax, 6.0f), pts));
}

// Steps 4 and 5, with pts_inv = nvfp4_torchao_pts_inv(pts).
FP8KIT_HD Nvfp4Block nvfp4_torchao_from_byte(std::uint8_t code, float pts, float pts_inv) {
    const float enc = div_rn(pts_inv, e4m3_value(code));  // 4
    const float dec = mul_rn(e4m3_value(code), pts);      // 5
    return {code, enc, dec};
}

FP8KIT_HD Nvfp4Block nvfp4_torchao_block(float block_amax, float global_amax) {
    const float pts = nvfp4_torchao_pts(global_amax);
    return nvfp4_torchao_from_byte(nvfp4_torchao_byte(block_amax, pts), pts, nvfp4_torchao_pts_inv(pts));
}

// torchao NVFP4 without a per-tensor scale (nvfp4_tensor.py nvfp4_quantize with
// per_tensor_scale=None, "single level scaling"), in its order:
//   1. block_scale = fl32(block_amax / 6);
//   2. byte = e4m3(clamp(block_scale, 2^-6, 448)) (NaN stays NaN: byte 0x7F);
//   3. encode = fl32(1 / float(byte)) (torch's 1.0 / t is t.reciprocal() * 1.0); the elements are
//      clamped to +-6 and rounded to nearest even;
//   4. decode = float(byte) (NVFP4Tensor.dequantize with no per-tensor scale).
// Steps 1 and 2 depend on the block amax, steps 3 and 4 on the byte alone.
FP8KIT_HD std::uint8_t nvfp4_torchao_single_byte(float block_amax) {
    return nvfp4_torchao_clamped_byte(div_rn(block_amax, 6.0f));  // 1, 2
}

FP8KIT_HD Nvfp4Block nvfp4_torchao_single_from_byte(std::uint8_t code) {
    const float enc = div_rn(1.0f, e4m3_value(code));  // 3
    return {code, enc, e4m3_value(code)};              // 4
}

FP8KIT_HD Nvfp4Block nvfp4_torchao_single_block(float block_amax) {
    return nvfp4_torchao_single_from_byte(nvfp4_torchao_single_byte(block_amax));
}

// ---- one entry point for every rule -------------------------------------------------------

// The formula that turns an amax into a scale (a recipe's `rule`).
enum class ScaleRule : std::uint8_t {
    te,             // te_scale (TE current, block, and DelayedScaling's division)
    torchao,        // torchao_scale
    msamp,          // msamp_scale
    deepseek,       // deepseek_scale (DeepGEMM)
    mx_roundup,     // mx_code_roundup (TE/cuBLAS MXFP8)
    mx_ocp_floor,   // mx_code_floor (OCP MX v1.0 section 6.3)
    nvfp4_te,       // nvfp4_te_block (TransformerEngine NVFP4; needs the tensor's global amax)
    nvfp4_torchao,  // nvfp4_torchao_block (torchao NVFP4 with a per-tensor scale; likewise)
    // torchao 0.18 to_mx / nvfp4_quantize (torchao/prototype/mx_formats), whose block amax keeps
    // NaN (rule_amax_keeps_nan):
    mx_torchao_floor,      // mx_code_torchao(floor) + mx_torchao_cast_pair (ScaleCalculationMode.FLOOR)
    mx_torchao_ceil,       // mx_code_torchao(ceil) + mx_torchao_cast_pair (CEIL)
    mx_torchao_even,       // mx_code_torchao(even) + mx_torchao_cast_pair (EVEN)
    mx_torchao_rceil,      // mx_code_torchao_rceil + mx_torchao_rceil_cast_pair (RCEIL)
    nvfp4_torchao_single,  // nvfp4_torchao_single_block (NVFP4 without a per-tensor scale)
};

// Whether a rule's block scale depends on the whole tensor's amax too (ScaleParams::global_amax).
FP8KIT_HD bool rule_uses_global_amax(ScaleRule r) { return r == ScaleRule::nvfp4_te || r == ScaleRule::nvfp4_torchao; }

// Whether a rule's block amax keeps NaN (torch.amax(torch.abs(x)): a block holding a NaN has amax
// NaN) rather than ignoring it as the kernels' fmaxf reductions do (TE, cuBLAS, lib's amax_of).
// True for torchao's to_mx and single-level nvfp4_quantize rules.
FP8KIT_HD bool rule_amax_keeps_nan(ScaleRule r) {
    return r == ScaleRule::mx_torchao_floor || r == ScaleRule::mx_torchao_ceil || r == ScaleRule::mx_torchao_even ||
           r == ScaleRule::mx_torchao_rceil || r == ScaleRule::nvfp4_torchao_single;
}

// The amax a rule is given for one block: the block's amax with NaN ignored, or NaN when the rule
// keeps NaN and the block holds one. Every caller of rule_scale on a block goes through this.
FP8KIT_HD float rule_block_amax(ScaleRule r, float amax_nan_ignored, bool block_has_nan) {
    return (block_has_nan && rule_amax_keeps_nan(r)) ? float_of(0x7FC00000u) : amax_nan_ignored;
}

// Whether a rule writes E8M0 scale codes (the MX rules).
FP8KIT_HD bool rule_is_mx(ScaleRule r) {
    return r == ScaleRule::mx_roundup || r == ScaleRule::mx_ocp_floor || r == ScaleRule::mx_torchao_floor ||
           r == ScaleRule::mx_torchao_ceil || r == ScaleRule::mx_torchao_even || r == ScaleRule::mx_torchao_rceil;
}

// Whether a rule writes E4M3 block-scale bytes (the NVFP4 rules).
FP8KIT_HD bool rule_is_nvfp4(ScaleRule r) {
    return r == ScaleRule::nvfp4_te || r == ScaleRule::nvfp4_torchao || r == ScaleRule::nvfp4_torchao_single;
}

// A rule with its parameters, and the format facts it reads, resolved once (per tensor or per
// kernel launch) so that the per-block call does no format dispatch.
struct ScaleParams {
    ScaleRule rule;
    Format format;
    double epsilon;       // te: fl32(eps); torchao: binary64 clamp; deepseek: fl32 amax floor
    bool pow2;            // te/torchao: power-of-two floor; deepseek: UE8M0 round-up
    float value_for_inf;  // te only
    int margin;           // msamp only
    float fmax;           // format_max(format)
    int emax;             // format_emax(format)
    int mbits;            // format_mbits(format) (torchao EVEN)
    float global_amax;    // nvfp4 rules: amax of the whole tensor (0 until set_global_amax)
    float global_encode;  // nvfp4_te: nvfp4_te_global_encode(global_amax)
    // The NVFP4 rules' other numbers of the tensor alone, from global_amax (set_global_amax):
    float te_s_dec;         // nvfp4_te_s_dec(global_encode)
    float te_byte_factor;   // nvfp4_te_byte_factor(global_encode)
    float torchao_pts;      // nvfp4_torchao_pts(global_amax)
    float torchao_pts_inv;  // nvfp4_torchao_pts_inv(torchao_pts)
};

// NVFP4 rules: the tensor's amax, set once per tensor before the per-block calls, with the
// numbers of the rules' steps that depend on it alone.
FP8KIT_HD void set_global_amax(ScaleParams& p, float global_amax) {
    p.global_amax = global_amax;
    p.global_encode = nvfp4_te_global_encode(global_amax);
    p.te_s_dec = nvfp4_te_s_dec(p.global_encode);
    p.te_byte_factor = nvfp4_te_byte_factor(p.global_encode);
    p.torchao_pts = nvfp4_torchao_pts(global_amax);
    p.torchao_pts_inv = nvfp4_torchao_pts_inv(p.torchao_pts);
}

FP8KIT_HD ScaleParams make_scale_params(ScaleRule rule, Format format, double epsilon, bool pow2, float value_for_inf,
                                        int margin) {
    ScaleParams p{rule,
                  format,
                  epsilon,
                  pow2,
                  value_for_inf,
                  margin,
                  format_max(format),
                  format_emax(format),
                  format_mbits(format),
                  0.0f,
                  0.0f,
                  0.0f,
                  0.0f,
                  0.0f,
                  0.0f};
    set_global_amax(p, 0.0f);
    return p;
}

// The NVFP4 rules in two halves (rule_is_nvfp4): the E4M3 byte of a block amax, and the block's
// numbers from the byte and the tensor's (set_global_amax), which a kernel may tabulate over the
// bytes once per launch. rule_scale is their composition.
FP8KIT_HD std::uint8_t rule_nvfp4_byte(const ScaleParams& p, float amax) {
    if (p.rule == ScaleRule::nvfp4_te) return nvfp4_te_byte(amax, p.te_byte_factor);
    if (p.rule == ScaleRule::nvfp4_torchao) return nvfp4_torchao_byte(amax, p.torchao_pts);
    return nvfp4_torchao_single_byte(amax);
}

FP8KIT_HD Nvfp4Block rule_nvfp4_from_byte(const ScaleParams& p, std::uint8_t code) {
    if (p.rule == ScaleRule::nvfp4_te) return nvfp4_te_from_byte(code, p.te_s_dec, p.global_amax);
    if (p.rule == ScaleRule::nvfp4_torchao) return nvfp4_torchao_from_byte(code, p.torchao_pts, p.torchao_pts_inv);
    return nvfp4_torchao_single_from_byte(code);
}

// One scale for one amax. `code` is the E8M0 code for the MX rules, the E4M3 block-scale byte
// for the NVFP4 rules (whose scale_inv is the dequantisation factor), and 0 otherwise. MS-AMP here is
// its stateless (in-time) form with previous scale 1; its window lives in lib's MsampScaling.
struct BlockScale {
    float scale, scale_inv;
    std::uint8_t code;
};

FP8KIT_HD BlockScale rule_scale(const ScaleParams& p, float amax) {
    switch (p.rule) {
        case ScaleRule::te: {
            const float s = te_scale(amax, p.fmax, static_cast<float>(p.epsilon), p.pow2, p.value_for_inf);
            return {s, div_rn(1.0f, s), 0};
        }
        case ScaleRule::torchao: {
            const float s = torchao_scale(amax, p.fmax, p.epsilon, p.pow2);
            return {s, div_rn(1.0f, s), 0};
        }
        case ScaleRule::msamp: {
            const float s = msamp_scale(amax, 1.0f, p.fmax, p.margin);
            return {s, div_rn(1.0f, s), 0};
        }
        case ScaleRule::deepseek: {
            const ScalePair d = deepseek_scale(amax, p.fmax, static_cast<float>(p.epsilon), p.pow2);
            return {d.scale, d.scale_inv, 0};
        }
        case ScaleRule::mx_roundup: {
            const std::uint8_t c = mx_code_roundup(amax, p.fmax);
            const ScalePair m = mx_cast_pair(MxRule::round_up, c);
            return {m.scale, m.scale_inv, c};
        }
        case ScaleRule::nvfp4_te:
        case ScaleRule::nvfp4_torchao:
        case ScaleRule::nvfp4_torchao_single: {
            const Nvfp4Block b = rule_nvfp4_from_byte(p, rule_nvfp4_byte(p, amax));
            return {b.encode, b.decode, b.scale_code};
        }
        case ScaleRule::mx_torchao_floor:
        case ScaleRule::mx_torchao_ceil:
        case ScaleRule::mx_torchao_even: {
            const TorchaoMx mode = p.rule == ScaleRule::mx_torchao_floor  ? TorchaoMx::floor
                                   : p.rule == ScaleRule::mx_torchao_ceil ? TorchaoMx::ceil
                                                                          : TorchaoMx::even;
            const std::uint8_t c = mx_code_torchao(amax, p.emax, p.mbits, mode);
            const ScalePair m = mx_torchao_cast_pair(c);
            return {m.scale, m.scale_inv, c};
        }
        case ScaleRule::mx_torchao_rceil: {
            const std::uint8_t c = mx_code_torchao_rceil(amax, p.fmax);
            const ScalePair m = mx_torchao_rceil_cast_pair(c);
            return {m.scale, m.scale_inv, c};
        }
        case ScaleRule::mx_ocp_floor: break;
    }
    const std::uint8_t c = mx_code_floor(amax, p.emax);
    const ScalePair m = mx_cast_pair(MxRule::ocp_floor, c);
    return {m.scale, m.scale_inv, c};
}

}  // namespace fp8kit::numerics
