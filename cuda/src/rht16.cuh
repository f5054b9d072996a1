// TE's random Hadamard transform of one 16-element group on the device, in S's own bits: the three
// steps of lib/src/convert/hadamard.cpp (widen each element exactly to binary64,
// numerics::te_rht16_group, round once to S, nearest even), with each step's bits computed by the
// hardware where that is exact. One function, so that te_rht16_columnwise (hadamard.cu, the
// column-wise copy) and the block quantiser that applies the transform as it casts (block_rows.cu,
// rht_col_blocks_kernel) compute the same bits by the same code. Internal to cuda/src.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "block_common.cuh"
#include "common.cuh"
#include "fp8kit/numerics/hadamard.hpp"

namespace fp8kit::cuda::detail {

constexpr emu::Policy kRhtRne{emu::Rounding::nearest_even, emu::Overflow::no_saturate,
                              emu::NanEncoding::signed_quiet_payload};

// Step 1, x in S's bits to binary64: the hardware widening (f32 -> f64, and f16 / bf16 through
// f32) is exact for every non-NaN input. A NaN's payload does not matter: a NaN in a group makes
// every one of its 16 sums a NaN, which te_rht16_group makes canonical.
template <class S>
__device__ __forceinline__ double rht_widen(typename S::storage_t x) {
    if constexpr (std::is_same_v<S, Binary32>)
        return static_cast<double>(__uint_as_float(x));
    else if constexpr (std::is_same_v<S, BFloat16>)
        return static_cast<double>(__uint_as_float(static_cast<std::uint32_t>(x) << 16));
    else
        return static_cast<double>(__half2float(__ushort_as_half(x)));
}

// Step 3, y rounded once to S, nearest even (emu::convert<Binary64, S> under kRhtRne):
//  - f32: cvt.rn.f32.f64, IEEE's nearest-even conversion (subnormal results kept, overflow to
//    Inf);
//  - f16 / bf16: round to odd into f32 (toward zero, then the last bit set when inexact), then
//    f32's nearest-even cvt to S. Rounding to odd into a format with at least two more
//    significand bits than the target, over the target's exponent range, gives the directly
//    rounded result (Boldo and Melquiond, "Emulation of FMA and correctly rounded sums: proved
//    algorithms using rounding to odd", IEEE Trans. Computers 57(4), 2008); f32 has 24 bits
//    against 11 and 8, and reaches below f16's and bf16's smallest subnormals. A y past FLT_MAX
//    rounds toward zero to FLT_MAX (odd), which S's cvt takes to Inf, as y itself rounds;
//  - a NaN (te_rht16_group's canonical one): emu::convert itself, as the host does.
template <class S>
__device__ __forceinline__ typename S::storage_t rht_narrow(double y) {
    using T = typename S::storage_t;
    if (y != y)
        return static_cast<T>(
            emu::convert<emu::Binary64, S>(static_cast<std::uint64_t>(__double_as_longlong(y)), kRhtRne));
    if constexpr (std::is_same_v<S, Binary32>) {
        return __float_as_uint(__double2float_rn(y));
    } else {
        const float t = __double2float_rz(y);
        const float odd = static_cast<double>(t) == y ? t : __uint_as_float(__float_as_uint(t) | 1u);
        if constexpr (std::is_same_v<S, BFloat16>)
            return __bfloat16_as_ushort(__float2bfloat16_rn(odd));
        else
            return __half_as_ushort(__float2half_rn(odd));
    }
}

// The exponents of a group of S's elements: E' = max(E, 1) (E the biased exponent field) of its
// smallest and largest nonzero elements, and whether one is an Inf or a NaN (E all ones).
struct RhtSpan {
    std::uint32_t lo, hi;
    bool special;
};

// A group's span from two magnitudes (S's bits less the sign): hi_mag, the largest, and lo_m1, the
// smallest nonzero one less one, taken as min(mag - 1) over the group in kWidth-bit unsigned
// arithmetic, so that a zero's mag - 1 wraps to all ones and drops out (all ones: no nonzero
// element). The exponent field is monotone in the magnitude, so E of the largest (smallest
// nonzero) magnitude is the largest (smallest nonzero) E: the running max / min takes four
// instructions an element instead of testing each element's E.
template <class S>
__device__ __forceinline__ RhtSpan rht_span_of(std::uint32_t hi_mag, std::uint32_t lo_m1) {
    constexpr std::uint32_t kMagMask = static_cast<std::uint32_t>(S::code_mask >> 1);
    const std::uint32_t ehi = hi_mag >> S::man_bits, elo = ((lo_m1 + 1u) & kMagMask) >> S::man_bits;
    return {elo > 1u ? elo : 1u, ehi > 1u ? ehi : 1u, ehi == S::exp_all_ones};
}

template <class S>
__device__ __forceinline__ RhtSpan rht_span(const typename S::storage_t (&x)[16]) {
    std::uint32_t hi = 0, lo_m1 = ~0u;
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const std::uint32_t mag = static_cast<std::uint32_t>(x[i]) & static_cast<std::uint32_t>(S::code_mask >> 1);
        hi = max(hi, mag);
        lo_m1 = min(lo_m1, mag - 1u);
    }
    return rht_span_of<S>(hi, lo_m1);
}

// The running max of the bf16 magnitudes and min of the magnitudes less one (rht_span's bounds;
// zero wraps to the largest) over kWords words, in both 16-bit halves at once (VIMNMX.U16x2,
// VIADD.16x2 on sm_90).
template <int kWords>
__device__ __forceinline__ void bf16_half_bounds(const std::uint32_t (&words)[kWords], std::uint32_t& hi,
                                                 std::uint32_t& lo_m1) {
    hi = 0, lo_m1 = ~0u;
#pragma unroll
    for (int i = 0; i < kWords; ++i) {
        const std::uint32_t mag = words[i] & 0x7FFF7FFFu;
        hi = __vmaxu2(hi, mag);
        lo_m1 = __vminu2(lo_m1, __vsub2(mag, 0x00010001u));
    }
}

// The spans of two bf16 groups side by side, words[i] holding element i of one group in its low
// half and of the other in its high half (two adjacent columns of X): two instructions an element.
__device__ __forceinline__ void rht_span_bf16_pair(const std::uint32_t (&words)[16], RhtSpan& lo_half,
                                                   RhtSpan& hi_half) {
    std::uint32_t hi, lo_m1;
    bf16_half_bounds(words, hi, lo_m1);
    lo_half = rht_span_of<BFloat16>(hi & 0xFFFFu, lo_m1 & 0xFFFFu);
    hi_half = rht_span_of<BFloat16>(hi >> 16, lo_m1 >> 16);
}

// rht_span of a bf16 group held as words (element 2k in word k's low half, 2k + 1 in its high
// half): the halves' spans as rht_span_bf16_pair takes them, one instruction an element, then
// joined (the larger of the two largest magnitudes, the smaller of the two smallest nonzero ones).
__device__ __forceinline__ RhtSpan rht_span_bf16_words(const std::uint32_t (&words)[8]) {
    std::uint32_t hi, lo_m1;
    bf16_half_bounds(words, hi, lo_m1);
    return rht_span_of<BFloat16>(max(hi & 0xFFFFu, hi >> 16), min(lo_m1 & 0xFFFFu, lo_m1 >> 16));
}

// Whether every partial sum of te_rht16_group over the group is exact in a binary format of p
// significand bits. Each term v[i] s[i] H[i][j] / 4 is an integer multiple of q = 2^(E'lo - bias -
// m - 2) (m = S's mantissa bits), and every partial sum is at most 16 terms below
// 2^(E'hi - bias + 1 - 2), so below 2^(E'hi - bias + 3); it is exact when that is at most 2^p q,
// i.e. E'hi - E'lo <= p - 5 - m: binary64 (p 53) 48 - m (25 for f32, 38 for f16, 41 for bf16),
// binary32 (p 24) 19 - m (12 for bf16, 9 for f16; never for f32). Zeros are multiples of
// anything; an Inf or NaN fails the test. In binary32 the sums must also stay below FLT_MAX and
// q at or above its smallest subnormal 2^-149: bf16's q is at least 2^-135, and E'hi - bias <= 100
// keeps the sums below 2^103. The same holds for the sums before the division by 4 (rht16_fwht4:
// q and the bound both 4 times larger, below 2^105).
template <class S, int kPrecision>
__device__ __forceinline__ bool rht_sums_exact(const RhtSpan& r) {
    if (r.special || static_cast<int>(r.hi) - static_cast<int>(r.lo) > kPrecision - 5 - S::man_bits) return false;
    if constexpr (kPrecision == 24) return static_cast<int>(r.hi) - S::bias <= 100;
    return true;
}

// Four times te_rht16_group's outputs where the sums are exact in V (binary64, or binary32 for
// f16 / bf16 inputs), up to the sign of a zero: the same exact sums by the fast Walsh-Hadamard
// transform of u[i] = v[i] s[i], in Sylvester order (the butterflies with strides 1, 2, 4, 8 give
// out[j] = sum_i u[i] (-1)^popcount(i & j)), 64 additions instead of 240. The signs s[i] are
// negations of the first butterflies' operands, which the additions take for free (FADD's operand
// modifiers); the division by 4 (exact) is left to the caller: rht_quarter for the outputs, once
// for the largest magnitude.
template <class V>
__device__ __forceinline__ void rht16_fwht4(V (&u)[16], bool random_signs) {
#pragma unroll
    for (int i = 0; i < 16; i += 2) {
        const V a = (random_signs && numerics::te_rht_sign(i) < 0) ? -u[i] : u[i];
        const V b = (random_signs && numerics::te_rht_sign(i + 1) < 0) ? -u[i + 1] : u[i + 1];
        u[i] = a + b;
        u[i + 1] = a - b;
    }
#pragma unroll
    for (int h = 2; h < 16; h <<= 1) {
#pragma unroll
        for (int i = 0; i < 16; ++i)
            if ((i & h) == 0) {
                const V a = u[i], b = u[i + h];
                u[i] = a + b;
                u[i + h] = a - b;
            }
    }
}

// An exact sum of rht16_fwht4 as te_rht16_group gives it: y / 4 + 0 in one fused multiply-add
// (exact: y / 4 is exact in V, see rht_sums_exact), the +0 because the ordered sum starts from
// +0.0, so its zero results are +0 (x + (-x) and +0 + -0 are +0 under nearest-even), where a
// butterfly can make -0 (-0 + -0).
__device__ __forceinline__ float rht_quarter(float y) { return __fmaf_rn(y, 0.25f, 0.0f); }
__device__ __forceinline__ double rht_quarter(double y) { return __fma_rn(y, 0.25, 0.0); }

// An exact binary32 sum (the binary32 path, f16 / bf16 inputs) rounded once to S, nearest even:
// cvt.rn.{bf16,f16}.f32, which rounds a binary32 value directly as IEEE 754 does.
template <class S>
__device__ __forceinline__ typename S::storage_t rht_narrow_exact(float y) {
    if constexpr (std::is_same_v<S, BFloat16>)
        return __bfloat16_as_ushort(__float2bfloat16_rn(y));
    else
        return __half_as_ushort(__float2half_rn(y));
}

// The 16 sums of te_rht16_group over x[i] = load(i), whose span (rht_span) is `span`, handed to
// sums(y, exact): where they are exact in binary32 (f16 / bf16 inputs) y is a float[16] holding
// four times the sums (rht16_fwht4; exact is std::true_type), where exact in binary64 a double[16]
// of the same, and otherwise a double[16] of te_rht16_group's ordered sums themselves (exact is
// std::false_type).
template <class S, class Load, class Sums>
__device__ __forceinline__ void rht16_sums_span(Load&& load, const RhtSpan& span, bool random_signs, Sums&& sums) {
    if constexpr (!std::is_same_v<S, Binary32>) {
        if (rht_sums_exact<S, 24>(span)) {
            float u[16];
#pragma unroll
            for (int i = 0; i < 16; ++i) u[i] = __uint_as_float(widen_bits<S>(load(i)));  // no NaN here
            rht16_fwht4(u, random_signs);
            sums(u, std::true_type{});
            return;
        }
    }
    double v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = rht_widen<S>(load(i));
    if (rht_sums_exact<S, 53>(span)) {
        rht16_fwht4(v, random_signs);
        sums(v, std::true_type{});
    } else {
        double y[16];
        numerics::te_rht16_group(v, random_signs, y);
        sums(y, std::false_type{});
    }
}

template <class S, class Load, class Sums>
__device__ __forceinline__ void rht16_sums(Load&& load, bool random_signs, Sums&& sums) {
    typename S::storage_t x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = load(i);
    rht16_sums_span<S>([&](int i) { return x[i]; }, rht_span<S>(x), random_signs, sums);
}

// te_rht16_group's output j rounded once to S, nearest even, from rht16_sums' y: an exact sum
// (four times the output) through rht_quarter, then narrowed without rht_narrow's NaN test (no
// NaN reaches the exact paths).
template <class S>
__device__ __forceinline__ typename S::storage_t rht_round_one(float y4, std::true_type) {
    return rht_narrow_exact<S>(rht_quarter(y4));
}
template <class S>
__device__ __forceinline__ typename S::storage_t rht_round_one(double y4, std::true_type) {
    const double y = rht_quarter(y4);
    if constexpr (std::is_same_v<S, Binary32>)
        return __float_as_uint(__double2float_rn(y));
    else
        return rht_narrow<S>(y);
}
template <class S>
__device__ __forceinline__ typename S::storage_t rht_round_one(double y, std::false_type) {
    return rht_narrow<S>(y);
}

// store(j, round_S(te_rht16_group(x))[j]) for j = 0 .. 15, x[i] = load(i): 16 elements of S
// (storage bits). Every load comes before the first store, so the two may name the same array.
template <class S, class Load, class Store>
__device__ __forceinline__ void rht16_round(Load&& load, bool random_signs, Store&& store) {
    rht16_sums<S>(load, random_signs, [&](auto& y, auto exact) {
#pragma unroll
        for (int j = 0; j < 16; ++j) store(j, rht_round_one<S>(y[j], exact));
    });
}

// round_S(te_rht16_group(x)) for a bf16 group whose span is known, as the words a row-kernel lane
// holds of a row of the copy (word k: output 2k in its low half, 2k + 1 in its high half). On the
// binary32 path each pair takes one cvt.rn.bf16x2.f32 (F2FP.BF16.F32.PACK_AB), which rounds each
// half as cvt.rn.bf16.f32 does.
template <class Load>
__device__ __forceinline__ void rht16_round_bf16_words(Load&& load, const RhtSpan& span, std::uint32_t (&wd)[8]) {
    rht16_sums_span<BFloat16>(load, span, true, [&](auto& y, auto exact) {
        if constexpr (std::is_same_v<std::remove_reference_t<decltype(y[0])>, float>) {
#pragma unroll
            for (int k = 0; k < 8; ++k) {
                const __nv_bfloat162 p = __floats2bfloat162_rn(rht_quarter(y[2 * k]), rht_quarter(y[2 * k + 1]));
                wd[k] = __bfloat16_as_ushort(p.x) | (static_cast<std::uint32_t>(__bfloat16_as_ushort(p.y)) << 16);
            }
        } else {
#pragma unroll
            for (int k = 0; k < 8; ++k)
                wd[k] = rht_round_one<BFloat16>(y[2 * k], exact) |
                        (static_cast<std::uint32_t>(rht_round_one<BFloat16>(y[2 * k + 1], exact)) << 16);
        }
    });
}

// max_j |round_S(te_rht16_group(x))[j]| over the non-NaN outputs (0 when there is none), as float32
// bits: what elements_amax / bf16_words_amax give over rht16_round's 16 outputs. Nearest-even
// rounding is odd and monotone, so the max of the rounded magnitudes is the rounded max magnitude:
// one rounding a group instead of 16 (fmax ignores a NaN sum). On the exact paths the largest of
// the four-times sums is divided by 4 once (exact, and monotone); in binary64 by a plain test of
// the magnitudes (no NaN there; fmax of binary64 takes several instructions on sm_90). The
// rounded max is never a NaN, so widen_bits' f16 NaN case does not arise.
template <class S, class Load>
__device__ __forceinline__ std::uint32_t rht16_amax_bits_span(Load&& load, const RhtSpan& span, bool random_signs) {
    std::uint32_t bits = 0;
    rht16_sums_span<S>(load, span, random_signs, [&](auto& y, auto exact) {
        using V = std::remove_reference_t<decltype(y[0])>;
        V m = 0;
        if constexpr (decltype(exact)::value && std::is_same_v<V, double>) {
#pragma unroll
            for (int j = 0; j < 16; ++j) m = fabs(y[j]) > fabs(m) ? y[j] : m;
            bits = widen_bits<S>(rht_round_one<S>(fabs(m), exact));
        } else if constexpr (decltype(exact)::value) {
#pragma unroll
            for (int j = 0; j < 16; ++j) m = fmaxf(m, fabsf(y[j]));
            bits = widen_bits<S>(rht_round_one<S>(m, exact));
        } else {
#pragma unroll
            for (int j = 0; j < 16; ++j) m = fmax(m, fabs(y[j]));
            bits = widen_bits<S>(rht_round_one<S>(m, exact));
        }
    });
    return bits;
}

template <class S, class Load>
__device__ __forceinline__ std::uint32_t rht16_amax_bits(Load&& load, bool random_signs) {
    typename S::storage_t x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = load(i);
    return rht16_amax_bits_span<S>([&](int i) { return x[i]; }, rht_span<S>(x), random_signs);
}

}  // namespace fp8kit::cuda::detail
