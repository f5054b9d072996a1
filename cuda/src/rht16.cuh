// TE's random Hadamard transform of one 16-element group on the device, in S's own bits: the three
// steps of lib/src/convert/hadamard.cpp (widen each element exactly to binary64,
// numerics::te_rht16_group, round once to S, nearest even), with each step's bits computed by the
// hardware where that is exact. One function, so that te_rht16_columnwise (hadamard.cu, the
// column-wise copy) and the block quantiser that applies the transform as it casts (block_rows.cu,
// rht_col_blocks_kernel) compute the same bits by the same code. Internal to cuda/src.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

template <class S>
__device__ __forceinline__ RhtSpan rht_span(const typename S::storage_t (&x)[16]) {
    constexpr std::uint32_t kExpMask = S::exp_all_ones;
    RhtSpan r{kExpMask, 1u, false};
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const std::uint32_t mag = static_cast<std::uint32_t>(x[i]) & static_cast<std::uint32_t>(S::code_mask >> 1);
        const std::uint32_t e = mag >> S::man_bits;
        r.special |= e == kExpMask;
        const std::uint32_t ep = e > 1u ? e : 1u;
        if (mag != 0u) r.lo = min(r.lo, ep);
        r.hi = max(r.hi, ep);
    }
    return r;
}

// Whether every partial sum of te_rht16_group over the group is exact in a binary format of p
// significand bits. Each term v[i] s[i] H[i][j] / 4 is an integer multiple of q = 2^(E'lo - bias -
// m - 2) (m = S's mantissa bits), and every partial sum is at most 16 terms below
// 2^(E'hi - bias + 1 - 2), so below 2^(E'hi - bias + 3); it is exact when that is at most 2^p q,
// i.e. E'hi - E'lo <= p - 5 - m: binary64 (p 53) 48 - m (25 for f32, 38 for f16, 41 for bf16),
// binary32 (p 24) 19 - m (12 for bf16, 9 for f16; never for f32). Zeros are multiples of
// anything; an Inf or NaN fails the test. In binary32 the sums must also stay below FLT_MAX and
// q at or above its smallest subnormal 2^-149: bf16's q is at least 2^-135, and E'hi - bias <= 100
// keeps the sums below 2^103.
template <class S, int kPrecision>
__device__ __forceinline__ bool rht_sums_exact(const RhtSpan& r) {
    if (r.special || static_cast<int>(r.hi) - static_cast<int>(r.lo) > kPrecision - 5 - S::man_bits) return false;
    if constexpr (kPrecision == 24) return static_cast<int>(r.hi) - S::bias <= 100;
    return true;
}

// te_rht16_group's outputs where the sums are exact in V (binary64, or binary32 for f16 / bf16
// inputs): the same exact sums by the fast Walsh-Hadamard transform of u[i] = v[i] s[i] / 4 (exact
// in V: S's elements scaled by 1/4 keep their bits, bf16's smallest at 2^-135), in Sylvester order
// (the butterflies with strides 1, 2, 4, 8 give out[j] = sum_i u[i] (-1)^popcount(i & j)), 64
// additions instead of 240. The ordered sum starts from +0.0, so its zero results are +0 (x + (-x)
// and +0 + -0 are +0 under nearest-even); a butterfly can make -0 (-0 + -0), so each output is
// added to +0 last.
template <class V>
__device__ __forceinline__ void rht16_exact_fwht(V (&u)[16], bool random_signs) {
#pragma unroll
    for (int i = 0; i < 16; ++i) u[i] *= (random_signs && numerics::te_rht_sign(i) < 0) ? V(-0.25) : V(0.25);
#pragma unroll
    for (int h = 1; h < 16; h <<= 1) {
#pragma unroll
        for (int i = 0; i < 16; ++i)
            if ((i & h) == 0) {
                const V a = u[i], b = u[i + h];
                u[i] = a + b;
                u[i + h] = a - b;
            }
    }
#pragma unroll
    for (int j = 0; j < 16; ++j) u[j] = u[j] + V(0);
}

// An exact binary32 sum (the binary32 path, f16 / bf16 inputs) rounded once to S, nearest even:
// cvt.rn.{bf16,f16}.f32, which rounds a binary32 value directly as IEEE 754 does.
template <class S>
__device__ __forceinline__ typename S::storage_t rht_narrow_exact(float y) {
    if constexpr (std::is_same_v<S, BFloat16>)
        return __bfloat16_as_ushort(__float2bfloat16_rn(y));
    else
        return __half_as_ushort(__float2half_rn(y));
}

// S's bits as float32 bits (exact).
template <class S>
__device__ __forceinline__ std::uint32_t rht_f32_bits(typename S::storage_t b) {
    if constexpr (std::is_same_v<S, Binary32>)
        return b;
    else if constexpr (std::is_same_v<S, BFloat16>)
        return static_cast<std::uint32_t>(b) << 16;
    else
        return __float_as_uint(__half2float(__ushort_as_half(b)));
}

// The 16 sums of te_rht16_group over x[i] = load(i), handed to sums(y) as a float[16] where they
// are exact in binary32 (f16 / bf16 inputs), a double[16] otherwise: exact sums by the transform
// above, the rest by te_rht16_group's ordered sum itself.
template <class S, class Load, class Sums>
__device__ __forceinline__ void rht16_sums(Load&& load, bool random_signs, Sums&& sums) {
    typename S::storage_t x[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) x[i] = load(i);
    const RhtSpan span = rht_span<S>(x);
    if constexpr (!std::is_same_v<S, Binary32>) {
        if (rht_sums_exact<S, 24>(span)) {
            float u[16];
#pragma unroll
            for (int i = 0; i < 16; ++i) u[i] = __uint_as_float(rht_f32_bits<S>(x[i]));
            rht16_exact_fwht(u, random_signs);
            sums(u);
            return;
        }
    }
    double v[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) v[i] = rht_widen<S>(x[i]);
    if (rht_sums_exact<S, 53>(span)) {
        rht16_exact_fwht(v, random_signs);
        sums(v);
    } else {
        double y[16];
        numerics::te_rht16_group(v, random_signs, y);
        sums(y);
    }
}

template <class S>
__device__ __forceinline__ typename S::storage_t rht_round_one(float y) {
    return rht_narrow_exact<S>(y);
}
template <class S>
__device__ __forceinline__ typename S::storage_t rht_round_one(double y) {
    return rht_narrow<S>(y);
}

// store(j, round_S(te_rht16_group(x))[j]) for j = 0 .. 15, x[i] = load(i): 16 elements of S
// (storage bits). Every load comes before the first store, so the two may name the same array.
template <class S, class Load, class Store>
__device__ __forceinline__ void rht16_round(Load&& load, bool random_signs, Store&& store) {
    rht16_sums<S>(load, random_signs, [&](auto& y) {
#pragma unroll
        for (int j = 0; j < 16; ++j) store(j, rht_round_one<S>(y[j]));
    });
}

// max_j |round_S(te_rht16_group(x))[j]| over the non-NaN outputs (0 when there is none), as float32
// bits: what elements_amax / bf16_words_amax give over rht16_round's 16 outputs. Nearest-even
// rounding is odd and monotone, so the max of the rounded magnitudes is the rounded max magnitude:
// one rounding a group instead of 16 (fmax ignores a NaN sum).
template <class S, class Load>
__device__ __forceinline__ std::uint32_t rht16_amax_bits(Load&& load, bool random_signs) {
    std::uint32_t bits = 0;
    rht16_sums<S>(load, random_signs, [&](auto& y) {
        std::remove_reference_t<decltype(y[0])> m = 0;
#pragma unroll
        for (int j = 0; j < 16; ++j) m = fmax(m, fabs(y[j]));
        bits = rht_f32_bits<S>(rht_round_one<S>(m));
    });
    return bits;
}

}  // namespace fp8kit::cuda::detail
