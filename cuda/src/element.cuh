// The scaled element conversion every cast kernel shares, in three compiled forms chosen on the
// host per (input type, format, policy), so that a kernel's inner loop holds no policy switch:
//
//   kCvt    policy == {nearest_even, saturate_all, canonical} and format E4M3/E5M2: the sm_89+
//           instruction cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32, which computes exactly that policy
//           (profile cuda-satfinite; the exhaustive check compares it with emu::convert).
//   kCvtFix nearest-even into E4M3/E5M2 with any other overflow or NaN policy (torch's casts,
//           ml_dtypes'): cvt.rn.satfinite for |y| at most D's largest finite value, where every
//           nearest-even policy gives the code saturate-all gives (the overflow and NaN policies
//           act only above it and on NaN), and the kTable lookup for the rest (Inf, NaN, |y|
//           past max finite), decided per group of four (2026-11-26; the exhaustive check
//           compares it with emu::convert under every policy). That lookup reads the table in
//           global memory (table_in_smem).
//   kCvtDir toward-zero and nearest-away into E4M3 / E5M2, and nearest-even, toward-zero and
//           nearest-away into E4M3FNUZ / E5M2FNUZ, any overflow and NaN policy: an exact integer
//           step rounds y (FNUZ: 2y, whose E4M3 / E5M2 code is y's FNUZ code) onto the grid and
//           cvt.rn.satfinite encodes the grid value (numerics/cvt_directed.hpp, which proves it
//           and which tests/numerics/test_cvt_directed.cpp checks against emu::convert on all 2^32
//           inputs); the kTable lookup for |y| past the domain (the largest finite value, FNUZ:
//           half of E4M3's / E5M2's), Inf and NaN, decided per group of four as kCvtFix. The
//           step is branch-free: below 2^emin an FFMA.RZ adds 2^emin so that the same add and
//           AND round onto the subnormal grid, and an FADD takes 2^emin back (2026-11-30).
//   kTable  any other deterministic rounding into an FP8 element format: a table of
//           emu::convert's own results (cuda/src/tables.cu), looked up in shared memory.
//   kSrCvt, kSrTable  stochastic rounding into an FP8 element format: an integer step moves y
//           onto D's grid exactly as emu::convert's stochastic rounding does (stochastic_grid_bits
//           below), and the grid value, which no rounding changes, is then encoded by the cvt
//           instruction (policy {saturate_all, canonical} into E4M3/E5M2) or by the
//           nearest-even table of the same overflow and NaN policy. One Philox4x32-10 call
//           serves each aligned group of four elements, which the rule (emu/random.hpp)
//           assigns the four words of that call.
//   kConvert every policy into E8M0, and every policy into the formats of narrow.cuh (FP4 E2M1,
//           FP6 E2M3 / E3M2, e3m4, e4m3b11fnuz, e4m3ieee; issue 16): emu::convert itself with the
//           rounding fixed at compile time (stochastic) or read at run time.
//
// Definitions (kernels.hpp): y = fl32(x * scale) (one float32 multiply, no FMA, no flush to zero);
// a NaN input is converted from its own bits (payload kept); a NaN made by the multiply is
// 0x7FC00000. Internal to cuda/src.
#pragma once

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error \
    "fp8kit: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 needs sm_89 or newer; set CMAKE_CUDA_ARCHITECTURES to 89, 90 or later"
#endif

#include <cfloat>
#include <type_traits>

#include "common.cuh"
#include "fp8kit/numerics/cvt_directed.hpp"
#include "narrow.cuh"
#include "tables.cuh"

namespace fp8kit::cuda::detail {

enum ElementPath : int { kCvt = 0, kTable = 1, kConvert = 2, kSrCvt = 3, kSrTable = 4, kCvtFix = 5, kCvtDir = 6 };

// Paths on which every NaN y gives the same code: the policy's one canonical NaN code (nan_code in
// emu/convert.hpp), whatever the NaN's sign and payload, as cvt.rn.satfinite gives. A kernel on
// such a path may let any NaN stand for another (a NaN product for a NaN input's own bits).
constexpr bool nan_codes_alike(int path) { return path == kCvt || path == kSrCvt; }

// Paths that read a cast table.
constexpr bool reads_table(int path) {
    return path == kTable || path == kSrTable || path == kCvtFix || path == kCvtDir;
}

// Paths that copy the table into shared memory first: those that look up every element. kCvtFix
// and kCvtDir read it only for a group of four with an element outside the instruction's domain
// (past the largest finite value, Inf, NaN), and read it in global memory (through L1): the copy,
// 16 KiB per CTA for E4M3 against the CTA's 16 KiB of float32 input at one step a thread, and
// the barrier after it cost those casts more than the lookups they serve.
constexpr bool table_in_smem(int path) { return path == kTable || path == kSrTable; }

// Which path the host launches for (format, policy).
inline ElementPath element_path(Format to, const Policy& p) {
    if (to == Format::e8m0 || is_narrow_format(to)) return kConvert;
    const bool sat_canonical = p.overflow == emu::Overflow::saturate_all && p.nan == emu::NanEncoding::canonical;
    const bool ocp = to == Format::e4m3 || to == Format::e5m2;
    if (p.rounding == emu::Rounding::stochastic) return ocp && sat_canonical ? kSrCvt : kSrTable;
    if (ocp && p.rounding == emu::Rounding::nearest_even) return sat_canonical ? kCvt : kCvtFix;
    // What kCvtDir covers is numerics/cvt_directed.hpp's serves, said once there.
    if (with_fp8(to, [&](auto d) { return numerics::cvt_directed::serves<decltype(d)>(p.rounding); })) return kCvtDir;
    return kTable;
}

// The policy of the table a path reads: kTable the launch's own; kSrTable nearest-even with the
// launch's overflow and NaN encoding (it encodes values already on the grid, see kSrCvt).
inline Policy table_policy(const Policy& p) {
    return p.rounding == emu::Rounding::stochastic ? Policy{emu::Rounding::nearest_even, p.overflow, p.nan} : p;
}

// Device pointer to the cast table the path of (to, policy) reads, or null when it reads none.
inline const std::uint8_t* element_table(Format to, const Policy& p, cudaStream_t stream) {
    const ElementPath path = element_path(to, p);
    return reads_table(path) ? cast_table(to, table_policy(p), stream) : nullptr;
}

// fl32(w * scale) (mul.rn.f32: nearest-even, no FMA, no flush to zero, as __fmul_rn), with a
// NaN product replaced by 0x7FC00000, in straight-line PTX: written in C++, ptxas put the
// multiply under a branch per element (BSSY/BRA/BSYNC), which cost the f16 and stochastic
// kernels about 4 issue slots per element. volatile keeps it unconditional.
__device__ __forceinline__ std::uint32_t mul_scale_bits(std::uint32_t w, float scale) {
    std::uint32_t yb;
    asm volatile(
        "{\n\t.reg .pred q;\n\t.reg .f32 t;\n\t"
        "mul.rn.f32 t, %1, %2;\n\t"
        "setp.nan.f32 q, t, t;\n\t"
        "mov.b32 %0, t;\n\t"
        "@q mov.b32 %0, 0x7FC00000;\n\t}"
        : "=r"(yb)
        : "f"(__uint_as_float(w)), "f"(scale));
    return yb;
}

// The float32 bits of input x when x is not a NaN (exact: every f16 and bf16 value is a float32);
// a NaN x gives some NaN.
template <class S>
__device__ __forceinline__ std::uint32_t widen_non_nan(typename S::storage_t x) {
    if constexpr (sizeof(typename S::storage_t) == 4)
        return x;
    else if constexpr (S::man_bits == 7)
        return static_cast<std::uint32_t>(x) << 16;
    else
        return __float_as_uint(__half2float(__ushort_as_half(x)));
}

// widen_non_nan of half `hi` (0: bits 0-15, 1: bits 16-31) of a word of two f16 inputs, from the
// packed word (HADD2.F32 .H0_H0 / .H1_H1, no shift first). bf16 inputs read their elements.
template <class S>
__device__ __forceinline__ std::uint32_t widen_half(std::uint32_t word, int hi) {
    static_assert(sizeof(typename S::storage_t) == 2 && S::man_bits == 10, "f16 inputs");
    const __half2 h2 = *reinterpret_cast<const __half2*>(&word);
    return __float_as_uint(hi ? __high2float(h2) : __low2float(h2));
}

// The float32 bits y that the conversion reads for input bits x (see the top of this file).
// f16 NaNs are widened with their payload (sign, all-ones exponent, mantissa << 13): every
// format's NaN code reads only the payload's leading bits, which the widening keeps; bf16 is
// the upper half of a float32 and widens exactly. A NaN input is not multiplied (its own bits).
template <class S>
__device__ __forceinline__ std::uint32_t scaled_bits(typename S::storage_t x, float scale) {
    std::uint32_t w;
    bool nan;
    if constexpr (sizeof(typename S::storage_t) == 4) {
        w = x;
        nan = (x & 0x7FFFFFFFu) > 0x7F800000u;
    } else if constexpr (S::man_bits == 7) {
        w = static_cast<std::uint32_t>(x) << 16;
        nan = (w & 0x7FFFFFFFu) > 0x7F800000u;
    } else {
        const std::uint32_t mag = x & 0x7FFFu;
        nan = mag > 0x7C00u;
        w = nan ? ((static_cast<std::uint32_t>(x & 0x8000u) << 16) | 0x7F800000u | ((x & 0x3FFu) << 13))
                : widen_non_nan<S>(x);
    }
    const std::uint32_t yb = mul_scale_bits(w, scale);
    return nan ? w : yb;
}

// 16 elements of type S as loaded: kVecs 16-byte vectors, read as elements through `e`.
template <class S>
union Step16 {
    static constexpr int kVecs = 16 * static_cast<int>(sizeof(typename S::storage_t)) / 16;
    uint4 v[kVecs];
    typename S::storage_t e[16];
    // 32-bit word k of the step as loaded (k a compile-time constant after unrolling): read as
    // e[2k] | e[2k+1] << 16 instead, some words were re-packed from their halves (SHF, IMAD.U32
    // and two LOP3 each in the SASS of the bf16 kernels).
    __device__ __forceinline__ std::uint32_t word(int k) const {
        const uint4& q = v[k / 4];
        return k % 4 == 0 ? q.x : k % 4 == 1 ? q.y : k % 4 == 2 ? q.z : q.w;
    }
};

// Whether all 16 f16 / bf16 inputs are finite, tested on the FP pipes: acc = fma(x, 0, acc) per packed
// pair of inputs stays +0 unless an x is NaN or Inf (x * 0 is NaN there, +-0 otherwise, and
// +0 + -0 = +0 under round-to-nearest). Eight HFMA2 and one HADD2 per 16 inputs, in two chains,
// on the FP pipes: the stochastic steps below take no NaN input (its bits would carry into the
// sign), and a NaN clamp in each step (min on the bits, VIMNMX) was one op per element on the
// integer ALU pipe, which issues at half rate on sm_90 and bounds these kernels (see encode16
// in elementwise.cuh).
// bf16 inputs take the same test with the bf16x2 forms (HFMA2.BF16_V2; add.rn.bf16x2 needs sm_90).
template <class S>
__device__ __forceinline__ bool finite16(const Step16<S>& u) {
    static_assert(sizeof(typename S::storage_t) == 2, "f16 / bf16 inputs");
    std::uint32_t acc[2] = {0u, 0u};
    std::uint32_t sum;
    if constexpr (S::man_bits == 10) {
#pragma unroll
        for (int k = 0; k < 8; ++k) asm("fma.rn.f16x2 %0, %1, %2, %0;" : "+r"(acc[k & 1]) : "r"(u.word(k)), "r"(0u));
        asm("add.rn.f16x2 %0, %1, %2;" : "=r"(sum) : "r"(acc[0]), "r"(acc[1]));
    } else {
#pragma unroll
        for (int k = 0; k < 8; ++k) asm("fma.rn.bf16x2 %0, %1, %2, %0;" : "+r"(acc[k & 1]) : "r"(u.word(k)), "r"(0u));
        asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(sum) : "r"(acc[0]), "r"(acc[1]));
    }
    return sum == 0u;
}

// The sign bits of four f16 / bf16 inputs (the halves of words lo and hi, in element order) in
// bits 7, 15, 23 and 31: byte k of the result is the high byte of input k (PRMT selector 0x7531),
// whose top bit is the input's sign. OR-ed onto the codes of the inputs' magnitudes, they give the
// inputs' codes where the format is sign-magnitude with a negative zero and the encoder rounds
// symmetrically (cvt.rn.satfinite into E4M3 / E5M2: code(-m) = code(m) | 0x80 for every m that
// is not a NaN), which replaces one LOP3 per element (the steps' sign merge) by two per four.
// Not for NaN inputs: cvt gives a NaN its one code 0x7F whatever its sign.
__device__ __forceinline__ std::uint32_t sign_bytes(std::uint32_t lo, std::uint32_t hi) {
    return __byte_perm(lo, hi, 0x7531) & 0x80808080u;
}

// Whether any of 16 f16 / bf16 inputs is a NaN, from their packed 32-bit words, so that a step
// of 16 elements without NaNs (nearly all of them) converts each element without the NaN case:
// the payload widening and the select cost the f16 kernels about 8 issue slots per element.
// Word v (two elements): a half h is a NaN iff (h & 0x7FFF) > 0x7C00 (bf16: 0x7F80), i.e. iff
// (h & 0x7FFF) + 0x3FF (bf16: 0x7F) sets bit 15; the low half's sum stays below 2^16, so it
// carries nothing into the high half.
template <class S>
__device__ __forceinline__ bool any_nan16(const typename S::storage_t (&e)[16]) {
    static_assert(sizeof(typename S::storage_t) == 2, "f16 / bf16 inputs");
    constexpr std::uint32_t kBelow = S::man_bits == 7 ? 0x007F007Fu : 0x03FF03FFu;
    std::uint32_t acc = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) {
        const std::uint32_t v = static_cast<std::uint32_t>(e[2 * k]) | (static_cast<std::uint32_t>(e[2 * k + 1]) << 16);
        acc |= (v & 0x7FFF7FFFu) + kBelow;
    }
    return (acc & 0x80008000u) != 0;
}

// Whether fl32(x * scale) can be a NaN only for NaN inputs x: scale finite and nonzero (0 * Inf,
// Inf * 0 and NaN scales are the other ways to make one). Then the multiply needs no NaN
// replacement (mul_scale_bits' setp + select: 2 issue slots per element); computed once per launch.
__device__ __forceinline__ bool plain_scale(float scale) { return fabsf(scale) <= FLT_MAX && scale != 0.0f; }

// scaled_bits of 16 inputs; f16 / bf16 without the NaN case when none of them is a NaN
// (any_nan16). float32 inputs keep scaled_bits per element: their NaN case is one select, and
// the split step made the memory-bound float32 casts 5-9% slower on the H100 (2026-11-26 run
// in docs/performance.md). kPlain (the stochastic paths, which are issue-bound; the
// deterministic casts run near copy speed and keep their measured code) with a plain scale
// (plain_scale): the product needs no NaN replacement, so an f16 / bf16 step without NaNs is a
// widening and one FMUL per element, and a float32 element keeps a NaN input's own bits by one
// FSETP.NAN + select on the input.
// kAnyNan (kSrCvt: the canonical NaN code, nan_code in emu/convert.hpp, whatever the NaN's sign
// and payload): f16 / bf16 inputs are widened and multiplied without any NaN case, as every NaN
// y, a NaN input's widened bits or a NaN product, gives that one code. This drops any_nan16's
// 8 words of LOP3 + add + OR and the branch on `plain` (about 2 issue slots per element).
template <class S, bool kPlain = false, bool kAnyNan = false>
__device__ __forceinline__ void scaled16(const typename S::storage_t (&e)[16], float scale, bool plain,
                                         std::uint32_t (&y)[16]) {
    if constexpr (kAnyNan && sizeof(typename S::storage_t) == 2 && S::man_bits == 7) {
        // bf16 from the loaded 32-bit words (two elements each): the low one is v << 16, the high
        // one v & 0xFFFF0000, one instruction each. The AND is PTX so that NVVM cannot rewrite it
        // as (v >> 16) << 16: written in C++, the high half became PRMT, a move and a shift.
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const std::uint32_t v =
                static_cast<std::uint32_t>(e[2 * k]) | (static_cast<std::uint32_t>(e[2 * k + 1]) << 16);
            std::uint32_t hi;
            asm("and.b32 %0, %1, 0xFFFF0000;" : "=r"(hi) : "r"(v));
            y[2 * k] = __float_as_uint(__fmul_rn(__uint_as_float(v << 16), scale));
            y[2 * k + 1] = __float_as_uint(__fmul_rn(__uint_as_float(hi), scale));
        }
    } else if constexpr (kAnyNan && sizeof(typename S::storage_t) == 2) {
#pragma unroll
        for (int k = 0; k < 16; ++k) y[k] = __float_as_uint(__fmul_rn(__uint_as_float(widen_non_nan<S>(e[k])), scale));
    } else if constexpr (sizeof(typename S::storage_t) == 4) {
        if (kPlain && plain) {
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                const float x = __uint_as_float(e[k]);
                y[k] = isnan(x) ? e[k] : __float_as_uint(__fmul_rn(x, scale));
            }
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k) y[k] = scaled_bits<S>(e[k], scale);
        }
    } else if (!any_nan16<S>(e)) {
        if (kPlain && plain) {
#pragma unroll
            for (int k = 0; k < 16; ++k)
                y[k] = __float_as_uint(__fmul_rn(__uint_as_float(widen_non_nan<S>(e[k])), scale));
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k) y[k] = mul_scale_bits(widen_non_nan<S>(e[k]), scale);
        }
    } else {
#pragma unroll
        for (int k = 0; k < 16; ++k) y[k] = scaled_bits<S>(e[k], scale);
    }
}

// Run-time facts of one launch's conversion (built on the host: ElementCtx{policy, table, seed}).
struct ElementCtx {
    Policy policy;
    const std::uint8_t* table;  // the cast table: its shared-memory copy (table_in_smem) or global
    std::uint64_t seed;
    // The round keys of Philox, computed once per launch on the host (emu/random.hpp): as kernel
    // parameters, ptxas loads them into uniform registers that the rounds' LOP3 read, so a call
    // spends no instruction on them (recomputed per call, they cost about 18 of its 70).
    emu::PhiloxKeys keys;
    ElementCtx(Policy p, const std::uint8_t* t, std::uint64_t s)
        : policy(p), table(t), seed(s), keys(emu::philox_round_keys(s)) {}
};

// Float32 bits of D's largest finite value (E4M3 448: 0x43E00000; E5M2 57344: 0x47600000).
template <class D>
__host__ __device__ constexpr std::uint32_t max_finite_bits() {
    return (static_cast<std::uint32_t>(D::emax + 127) << 23) |
           (static_cast<std::uint32_t>(D::max_man_at_max_exp) << (23 - D::man_bits));
}
static_assert(max_finite_bits<emu::E4M3>() == 0x43E00000u && max_finite_bits<emu::E5M2>() == 0x47600000u,
              "max finite of E4M3 is 448, of E5M2 57344");

template <class D>
__device__ __forceinline__ std::uint8_t cvt_one(std::uint32_t y) {
    std::uint16_t r;
    if constexpr (D::exp_bits == 5)
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(__uint_as_float(y)));
    else
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(0.0f), "f"(__uint_as_float(y)));
    return static_cast<std::uint8_t>(r & 0xFF);
}

// Two codes from one cvt: (lo, hi) -> lo | hi << 8.
template <class D>
__device__ __forceinline__ std::uint32_t cvt_two(std::uint32_t lo, std::uint32_t hi) {
    std::uint16_t r;
    if constexpr (D::exp_bits == 5)
        asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(__uint_as_float(hi)), "f"(__uint_as_float(lo)));
    else
        asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(__uint_as_float(hi)), "f"(__uint_as_float(lo)));
    return r;
}

template <class D, int R>
__device__ __forceinline__ std::uint8_t convert_fixed_inline(std::uint32_t y, Policy p, std::uint32_t random) {
    if constexpr (R >= 0) p.rounding = static_cast<emu::Rounding>(R);  // R < 0: read p.rounding
    return static_cast<std::uint8_t>(emu::convert<Binary32, D>(y, p, random));
}

// emu::convert as one out-of-line function per (format, rounding): inlining the general routine
// 16 or 64 times per kernel made ptxas take many minutes per file; a call costs a few
// instructions per element on the stochastic path, which is bound by Philox and convert anyway.
template <class D, int R>
__device__ __noinline__ std::uint8_t convert_fixed(std::uint32_t y, Policy p, std::uint32_t random) {
    return convert_fixed_inline<D, R>(y, p, random);
}

// The random word of one element (a misaligned group of four: elements of two Philox calls).
__device__ __noinline__ inline std::uint32_t stochastic_word(std::uint64_t seed, std::uint64_t index) {
    return emu::stochastic_bits(seed, index);
}

// Stochastic rounding of float32 bits y into D, as a float32 value on D's grid: the value that
// emu::convert<Binary32, D>(y, {stochastic, ...}, random) rounds y to, before its overflow and
// encoding steps. Encoding that value under any rounding (it is exact) then gives emu::convert's
// stochastic code. Why it equals convert.hpp steps 3-5 (shift = float32 mantissa bits below D's
// last kept bit, 1 <= shift for every FP8 format):
//  - shift <= 23 (y normal, result normal or subnormal in D): convert adds `random` to the 32
//    bits below the last kept bit, whose low 32 - shift bits are zero, so a carry happens exactly
//    when dropped + (random >> (32 - shift)) >= 2^shift. Adding random >> (32 - shift) to y's
//    magnitude bits and clearing the low `shift` bits therefore gives (kept + carry) * 2^q; a
//    carry out of the mantissa moves into the exponent field, which is 2^(e+1), the value
//    convert's step 5 makes. A sum past float32's largest finite bits (y near FLT_MAX) is far
//    past every FP8 maximum and becomes FLT_MAX, which overflows D as the rounded value would.
//  - shift >= 24 (all of y's significand lies below D's smallest quantum 2^q): kept is 0 and
//    convert rounds up to 2^q exactly when below32 + random carries, below32 computed as there.
//  - zero, Inf and NaN are not rounded: their bits pass through.
// The general case of stochastic_grid_bits (every float32 magnitude u, random word `random`),
// without branches, so that the rare elements that need it cost no divergent block.
template <class D>
__device__ __forceinline__ std::uint32_t stochastic_grid_general(std::uint32_t u, std::uint32_t random) {
    const int eb = static_cast<int>(u >> 23);
    constexpr int kBelowEmin = D::emin + 127;  // biased float32 exponent of D's smallest normal binade
    const int shift = 23 - D::man_bits + max(kBelowEmin - max(eb, 1), 0);
    // shift <= 23: add the random bits that land above the last kept bit's lower neighbours.
    const int s23 = min(shift, 23);
    std::uint32_t v = (u + (random >> (32 - s23))) & ~((1u << s23) - 1u);
    v = min(v, 0x7F7FFFFFu);
    // shift >= 24: kept is 0; round up to 2^q when below32 + random carries.
    const std::uint32_t sig = eb != 0 ? (u & 0x7FFFFFu) | 0x800000u : u;
    const std::uint32_t lo = sig << (32 - min(shift, 32));         // shift <= 32
    const std::uint32_t hi = sig >> min(max(shift, 32) - 32, 31);  // shift > 32 (sig < 2^24)
    const std::uint32_t below32 = shift <= 32 ? lo : hi;
    constexpr std::uint32_t kQuantum = static_cast<std::uint32_t>(D::quantum_min + 127) << 23;
    const std::uint32_t tiny = below32 + random < below32 ? kQuantum : 0u;
    v = shift <= 23 ? v : tiny;
    return u - 1u >= 0x7F7FFFFFu ? u : v;  // zero, Inf, NaN: not rounded
}

// P: kSrCvt or kSrTable, the encoder of the result. The common case (y finite with its binade at
// or above D's emin, shift = kShift) is computed on y itself, sign included (u + (random >> (32 -
// kShift)) < 0x7F7FFFFF + 2^21 < 2^31: no carry reaches the sign bit), without an absolute
// value, sign merge or (kSrCvt) saturation: LEA.HI + LOP3 in the SASS. A sum past float32's
// largest finite bits gives exactly +-Inf there (the cleared low bits leave 0x7F800000): for
// kSrCvt that stays, as cvt.rn.satfinite encodes +-Inf and +-FLT_MAX alike (max finite, the
// saturate-all policy); the table path takes +-FLT_MAX, as the general step does.
template <class D, int P>
__device__ __forceinline__ std::uint32_t stochastic_grid_common(std::uint32_t y, std::uint32_t random) {
    constexpr int kShift = 23 - D::man_bits;  // shift for results in D's normal range
    std::uint32_t v = (y + (random >> (32 - kShift))) & ~((1u << kShift) - 1u);
    if constexpr (P != kSrCvt) v -= (v & 0x7FFFFFFFu) == 0x7F800000u ? 1u : 0u;  // +-Inf -> +-FLT_MAX
    return v;
}

// Whether y is outside the common case: not (finite with its binade at or above D's emin). The
// test kNormalLo <= |y| < 0x7F800000 on y << 1 (the sign shifted out): |y| - kNormalLo is below
// 2^31 when non-negative, so doubling it keeps the unsigned order, and it wraps to
// 2^32 - 2 (kNormalLo - |y|) >= 2^32 - 2 kNormalLo > 0xFF000000 - 2 kNormalLo when negative.
// One LEA and one compare per element instead of LOP3, add and compare.
template <class D>
__device__ __forceinline__ bool outside_common(std::uint32_t y) {
    constexpr std::uint32_t kNormalLo = static_cast<std::uint32_t>(D::emin + 127) << 23;
    return (y << 1) - (kNormalLo << 1) >= 0xFF000000u - (kNormalLo << 1);
}

// The grid value of a y outside the common case (outside_common).
template <class D>
__device__ __forceinline__ std::uint32_t stochastic_grid_outside(std::uint32_t y, std::uint32_t random) {
    constexpr std::uint32_t kNormalLo = static_cast<std::uint32_t>(D::emin + 127) << 23;
    constexpr int kShift = 23 - D::man_bits;
    // Binades whose results are D-subnormal with all of y's significand above 2^q - 1 bit: the
    // shift grows by one per binade below emin and stays <= 23 (the general step's first case).
    constexpr std::uint32_t kSubLo = static_cast<std::uint32_t>(D::emin + 127 - D::man_bits) << 23;
    static_assert(D::emin + 127 - D::man_bits >= 1, "the subnormal tier needs float32 normal binades");
    const std::uint32_t u = y & 0x7FFFFFFFu;
    std::uint32_t m;
    if (u - kSubLo < kNormalLo - kSubLo) {  // D-subnormal results: shift = kShift + (emin - e) <= 23
        const int shift = kShift + static_cast<int>((kNormalLo - (u & 0x7F800000u)) >> 23);
        m = (u + (random >> (32 - shift))) & ~((1u << shift) - 1u);
    } else {
        m = stochastic_grid_general<D>(u, random);
    }
    return (y & 0x80000000u) | m;
}

// The grid value of one element: 7 issued instructions per element in the SASS when y is in the
// common case (LEA + compare for the range test, LEA.HI + LOP3 for the step, BSSY, BRA, BSYNC
// for the branch).
template <class D, int P = kSrTable>
__device__ __forceinline__ std::uint32_t stochastic_grid_bits(std::uint32_t y, std::uint32_t random) {
    static_assert(D::total_bits == 8 && D::has_zero && D::man_bits <= 22, "FP8 element formats only");
    const std::uint32_t v = stochastic_grid_common<D, P>(y, random);
    return outside_common<D>(y) ? stochastic_grid_outside<D>(y, random) : v;
}

// stochastic_grid_bits of four elements. For E5M2 / E5M2FNUZ (normal range down to 2^-14 or
// 2^-15, so that an element outside the common case is rare: Inf, NaN, zero, |y| < 2^-14) one
// range test and one branch serve the group (the branch's BSSY / BRA / BSYNC cost 3 issue slots
// each time); a group with such an element is redone element by element. For E4M3 (normal only
// from 2^-6) unscaled data has elements outside in a large share of the warps' groups (0.8% of
// the elements of the benchmark's uniform(-2, 2) input, so about 64% of the groups of four of a
// warp), and a redone group costs more than the branches saved: one test per element there
// (an analysis of 2026-11-26). kGroup: the element-wise kernels pass it for 16-bit
// inputs only; on float32 inputs (memory-bound) the group test cost the f32 -> e5m2 stochastic
// cast about 1% (a bench of 2026-11-26).
template <class D, int P, bool kGroup = true>
__device__ __forceinline__ void stochastic_grid_four(const std::uint32_t (&y)[4], const std::uint32_t (&r)[4],
                                                     std::uint32_t (&v)[4]) {
    if constexpr (kGroup && D::emin <= -14) {
        bool out = false;
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            v[k] = stochastic_grid_common<D, P>(y[k], r[k]);
            out |= outside_common<D>(y[k]);
        }
        if (out) {
#pragma unroll
            for (int k = 0; k < 4; ++k) v[k] = stochastic_grid_bits<D, P>(y[k], r[k]);
        }
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) v[k] = stochastic_grid_bits<D, P>(y[k], r[k]);
    }
}

// The step on the bits t of a float32 >= 0 that is not a NaN (a NaN's bits would carry into the
// sign: the callers keep NaN inputs out, see encode16), kept to a multiple of
// 2^kShift: floor((t + floor(random / 2^(32-kShift))) / 2^kShift) 2^kShift. random's low 32 -
// kShift bits cannot carry: t + floor(random / 2^(32-kShift)) is an integer, and adding
// (random mod 2^(32-kShift)) / 2^(32-kShift) < 1 to it does not change its floor divided by
// 2^kShift. Two forms of the same value, for the pipes they load (sm_90: the integer ALU pipe
// has 16 lanes per SM sub-partition, half the issue rate, and Philox's XORs already sit there):
//  - kAddForm: the add and a mask (LEA.HI + LOP3, both ALU);
//  - else the high word of t 2^(32-kShift) + random, shifted back (mad.wide.u32, which ptxas turns
//    into LEA + LEA.HI.X on the ALU pipe, then IMAD.SHL on the FMA pipe). Given the multiplier in
//    a register, ptxas emitted IMAD.WIDE, and f16 / bf16 -> E4M3 stochastic fell from 90% and
//    87% to 84% and 81% of copy (H100, 2026-11-27, docs/performance.md at 09ae615).
// One instruction fewer against one less on the FMA pipe. On the H100 (2026-11-27) the add form measured
// faster for f16 (widened on the FMA pipe, HADD2.F32) and the multiply-add form for bf16 (LOP3 for
// the upper half, on the ALU pipe). Once the NaN clamp and the sign merge left the steps (2026-11-28:
// finite16, sign_bytes), the add form measured faster for bf16 -> E4M3 too (scale 0.37: 0.3204
// -> 0.3113 ms, 218 M -> 210 M warp instructions); the multiply-add form stays where the steps
// keep their sign merge (kSrTable, bf16; not measured since).
template <int kShift, bool kAddForm>
__device__ __forceinline__ std::uint32_t step_bits(std::uint32_t t, std::uint32_t random) {
    if constexpr (kAddForm) {
        return (t + (random >> (32 - kShift))) & ~((1u << kShift) - 1u);
    } else {
        std::uint32_t kept;  // floor((t 2^(32-kShift) + random) / 2^32)
        asm("{\n\t.reg .u64 p;\n\tmad.wide.u32 p, %1, %2, %3;\n\tmov.b64 {_, %0}, p;\n\t}"
            : "=r"(kept)
            : "r"(t), "n"(1u << (32 - kShift)), "l"(static_cast<std::uint64_t>(random)));
        return kept * (1u << kShift);
    }
}

// The coarse step: stochastic rounding of y = x * scale without the per-element range branch,
// for f16 / bf16 inputs x, a power-of-two scale and a format whose normal range starts above
// binary16's smallest normal (D::emin > -14) with a stochastic cvt / table path (kCoarseStep:
// E4M3 from 2^-6, E4M3FNUZ; the emulated formats take kConvert). There stochastic_grid_bits
// branches per element below 2^emin (0.8% of unscaled uniform(-2, 2) data, in about a fifth of a
// warp's element slots: about 3 branch instructions per element plus the divergent block).
// Why it is exact: for 0 <= |y| < 2^emin convert's stochastic step (stochastic_grid_general: the
// subnormal tier and the steps below it alike) is floor((|y| + random q 2^-32) / q) q, with q =
// 2^(emin - man_bits) D's subnormal quantum. When |y| is a multiple of 2^(emin - 23) (see
// coarse_range for the inputs that are), t = |y| + 2^emin is exact in float32 (its quantum in
// [2^emin, 2^(emin+1)) is 2^(emin-23)) and that binade's D quantum is q too; y's bits below
// 2^(emin-23) being zero, the random bits below the common step's kShift cannot carry. So the
// common step on t's bits, then t - 2^emin (exact), gives convert's value. |y| >= 2^emin takes the
// common step as is (c = 0), and the sign is put back (no carry reaches it). +-Inf stays +-Inf.
// A NaN input must not come here: its bits would carry into the sign (kSrCvt steps with a NaN or
// an Inf take the general step, finite16; kSrTable steps with a NaN, coarse_range's `from`).
// A finite y whose step passes FLT_MAX gives +-Inf: cvt.rn.satfinite encodes it as +-FLT_MAX
// (kSrCvt); kSrTable steps with such inputs do not come here (coarse_range's `from`).
// w: x's float32 bits (widen_non_nan); scale = 2^k > 0, so y = |x| 2^k with x's sign, exactly.
// kScaled false: scale is 1 and not read (no FMUL: with the rest of the step off the ALU pipe,
// dropping this variant cost f16 -> E4M3 at scale 1 about 3 points of copy bandwidth, 90% -> 87%,
// H100, 2026-11-27; before an earlier change it had measured no gain).
// Checked against emu::convert on every f16 and bf16 input at every power-of-two scale on the
// host (cuda/tools/coarse_step_sim.cpp), and on the GPU against lib's encode_array.
// In the SASS the range test keeps off the integer ALU pipe, which these kernels saturate (ncu,
// 2026-11-27, H100: the ALU pipe 70% busy at 62% issue; Philox's XORs are ALU work too) and which runs
// at half the issue rate (16 lanes per SM sub-partition on sm_90): it is one FFMA.SAT on the FP32
// pipe instead of FSETP + FSEL (float compare and select are ALU work). The step on the bits is
// step_bits (kAddForm: its form, see there).
//  - cu = sat(2^23 - |y| 2^(23-emin)) is 1 for |y| < 2^emin (|y| 2^(23-emin) is then an integer
//    below 2^23, by the precondition) and 0 above, for Inf and for NaN (.sat flushes NaN to 0);
//    t = fma(cu, 2^emin, |y|) and the result fma(cu, -2^emin, v) are |y| + c and v - c, exact.
//  - the step on t's bits: step_bits.
// kSign false: the result is |v|, the caller puts the sign back on the code (sign_bytes).
template <class D, bool kScaled, bool kAddForm, bool kSign = true>
__device__ __forceinline__ std::uint32_t stochastic_grid_coarse(std::uint32_t w, float scale, std::uint32_t random) {
    static_assert(D::emin > -14 && D::emin <= -1, "binary16 values below 2^emin must be exact after adding 2^emin");
    constexpr int kShift = 23 - D::man_bits;
    const float normal_lo = __uint_as_float(static_cast<std::uint32_t>(D::emin + 127) << 23);
    const float k_unit = __uint_as_float(static_cast<std::uint32_t>(23 - D::emin + 127) << 23);  // 2^(23-emin)
    const float a = kScaled ? __fmul_rn(fabsf(__uint_as_float(w)), scale) : fabsf(__uint_as_float(w));
    float cu;
    asm("fma.rn.sat.f32 %0, %1, %2, 0f4B000000;" : "=f"(cu) : "f"(a), "f"(-k_unit));  // 0f4B000000: 2^23
    const std::uint32_t t = __float_as_uint(__fmaf_rn(cu, normal_lo, a));
    const std::uint32_t v = step_bits<kShift, kAddForm>(t, random);
    const std::uint32_t m = __float_as_uint(__fmaf_rn(cu, -normal_lo, __uint_as_float(v)));
    return kSign ? m | (w & 0x80000000u) : m;
}

// Whether encode16 may take stochastic_grid_coarse for inputs S, format D and path P.
template <class S, class D, int P>
constexpr bool kCoarseStep = sizeof(typename S::storage_t) == 2 &&
                             (P == kSrCvt || P == kSrTable) && D::emin > -14 && D::total_bits == 8 && D::has_zero;

// The inputs of one launch for which stochastic_grid_coarse equals stochastic_grid_bits, as
// magnitude bits h = x & 0x7FFF of S: every h == 0 or tiny_below <= h < from. tiny_below == 0: no
// input (the scale is not a power of two 2^k, k an integer, or too small); tiny_below == 1: all
// h < from. Derivation (B = S::bias, M = S::man_bits): y = x 2^k is exact where x's quantum
// 2^(e-M) times 2^k is at least 2^(emin-23), i.e. for x's exponent e >= emin - 23 + M - k; a
// subnormal x (quantum 2^(1-B-M)) needs k >= emin - 24 + B + M, the same bound as e = 1 - B.
// f16 (B 15, M 10) into E4M3 (emin -6): every input for k >= -5; bf16 (B 127, M 7) at k = 0:
// |x| >= 2^-22. from: NaN inputs (kSrTable) and, kSrTable, inputs with |y| >= 1.875 2^127, whose
// step could pass FLT_MAX (the nearest-even table would take +-Inf as Inf, not as FLT_MAX).
struct CoarseRange {
    std::uint32_t tiny_below = 0;
    std::uint32_t from = 0x8000;
    bool unit = false;  // scale == 1
};
template <class S, class D, int P>
__device__ __forceinline__ CoarseRange coarse_range(float scale) {
    CoarseRange r;
    const std::uint32_t sb = __float_as_uint(scale);
    if ((sb & 0x807FFFFFu) != 0 || (sb >> 23) == 0 || (sb >> 23) == 0xFF) return r;  // not +2^k, k in [-126, 127]
    constexpr int B = S::bias, M = S::man_bits;
    const int k = static_cast<int>(sb >> 23) - 127;
    const int te = D::emin - 23 + M - k;  // smallest exponent of an exact |x|
    if (te + B > 2 * B) return r;         // no finite x
    r.tiny_below = te <= 1 - B ? 1u : static_cast<std::uint32_t>(te + B) << M;
    r.unit = k == 0;
    if constexpr (P == kSrTable) {
        constexpr std::uint32_t kNan = (static_cast<std::uint32_t>(2 * B + 1) << M) + 1;  // smallest NaN h
        const int eb = 127 - k + B;  // S's biased exponent of 2^(127 - k)
        const std::uint32_t big = eb > 2 * B ? kNan : (static_cast<std::uint32_t>(eb) << M) | (0x70u << (M - 7));
        r.from = min(big, kNan);
    }
    return r;
}

// Bit 15 / 31 set where a half of 16 f16 / bf16 inputs has magnitude bits h >= from (from <=
// 0x8000), from their packed 32-bit words: for a half h < 2^15, h + (0x8000 - from) sets bit 15
// iff h >= from, with no carry into the other half.
template <class S>
__device__ __forceinline__ std::uint32_t from_bits16(const Step16<S>& u, std::uint32_t from) {
    static_assert(sizeof(typename S::storage_t) == 2, "f16 / bf16 inputs");
    const std::uint32_t add = (0x8000u - from) * 0x10001u;
    std::uint32_t acc = 0;
#pragma unroll
    for (int k = 0; k < 8; ++k) acc |= (u.word(k) & 0x7FFF7FFFu) + add;
    return acc;
}

// Whether any of 16 f16 / bf16 inputs has magnitude bits h >= from.
template <class S>
__device__ __forceinline__ bool any_from16(const Step16<S>& u, std::uint32_t from) {
    return (from_bits16<S>(u, from) & 0x80008000u) != 0;
}

// Whether any of 16 f16 / bf16 inputs lies outside a CoarseRange (0 < h < tiny_below or h >=
// from), from their packed 32-bit words: for a half h < 2^15, h + (0x8000 - b) sets bit 15 iff h
// >= b, and h + 0x7FFF iff h != 0, with no carry into the other half. The two tests run only
// where they can fire (tiny_below > 1; from < 0x8000), which is uniform per launch.
template <class S>
__device__ __forceinline__ bool outside_coarse16(const Step16<S>& u, const CoarseRange& r) {
    static_assert(sizeof(typename S::storage_t) == 2, "f16 / bf16 inputs");
    const std::uint32_t below = (0x8000u - r.tiny_below) * 0x10001u;
    std::uint32_t acc = 0;
    if (r.tiny_below > 1) {
#pragma unroll
        for (int k = 0; k < 8; ++k) {
            const std::uint32_t m = u.word(k) & 0x7FFF7FFFu;
            acc |= (m + 0x7FFF7FFFu) & ~(m + below);
        }
    }
    if (r.from < 0x8000u) acc |= from_bits16<S>(u, r.from);
    return (acc & 0x80008000u) != 0;
}

// The float step: stochastic rounding of y = x * scale (x an f16 / bf16 input, scale > 0 and
// finite) without the per-element range branch of stochastic_grid_bits, for the steps that the
// coarse step cannot take: a scale that is not a power of two (products with bits below
// 2^(emin-23)), or a step with a tiny bf16 input. There stochastic_grid_bits branches per element
// below 2^emin (for E4M3, 2.1% of the benchmark's uniform(-2, 2) data at scale 0.37: about 3
// branch instructions per element plus a divergent block that half of a warp's steps enter).
// It is exact for every FP8 format, but it costs two instructions per element more than the
// coarse step (the LOP3 for f and one more FFMA), which measured 9 points of copy bandwidth on
// f16 -> E4M3 at scale 1 (90% -> 81%, H100, 2026-11-27), so the coarse step keeps its steps;
// E5M2 / E5M2FNUZ keep stochastic_grid_four's grouped test (the float step measured 84% against
// its 89% on bf16 -> E5M2, same run): both steps serve the kCoarseStep instantiations.
// With q = 2^(emin - M) D's subnormal quantum (M = D::man_bits) and rho = random q 2^-32, the
// value convert gives (emu::convert's step 4, stochastic_grid_general here) is
//   |y| >= 2^emin: y's bits plus random >> (32 - kShift), the low kShift bits cleared (y has no
//                  bits below 2^-kShift of its last kept bit, so the dropped random bits carry
//                  nothing): step_bits on t = |y|'s bits;
//   |y| <  2^emin: floor_q(|y| + rho) (convert truncates |y| to 32 bits below q first; as rho
//                  is a multiple of q 2^-32, truncating first changes no floor).
// The second case is made the first by computing t = 2^emin + |y| + rl q 2^-32 in float32
// rounded toward zero, rl the low 32 - kShift bits of `random` (the high kShift bits, added by the
// same step_bits, carry in units of 2^(emin-23), t's quantum in [2^emin, 2^(emin+1))). For nested
// power-of-two grids g <= G and c a multiple of g, floor_G(c + floor_g(x)) = floor_G(c + x); an
// RZ sum of non-negative terms is the floor onto its binade's grid; so the two RZ sums below
// floor onto 2^(emin-23) (or 2^(emin-22) when t reaches 2^(emin+1), where the result is 2^emin
// either way) exactly what convert floors onto q. Then the result is the step's value - 2^emin.
//  - cu = sat(2^24 - |y| 2^(24-emin)) is 1 for |y| < 2^emin (|y| <= 2^emin (1 - 2^-24): at least
//    1 before saturation), 0 for |y| >= 2^emin, Inf and NaN (.sat flushes NaN to 0). With cu
//    = 0 every fma below gives |y| (an RZ add of 0) and leaves the common step.
//  - f = 2^F (1 + rl 2^-23), F = emin - M - 9, from one LOP3: f - 2^F = rl q 2^-32 exactly; the
//    2^F is taken back by the second sum's constant 2^emin - 2^F (exact: F >= emin - 23).
//  - A NaN input must not come here: the fmas make it 0x7FFFFFFF, which the step would carry
//    into the sign (kSrCvt steps with a NaN or an Inf take the general step, finite16; kSrTable
//    steps with a NaN, float_step_range). +-Inf stays +-Inf. A step past FLT_MAX gives +-Inf:
//    cvt.rn.satfinite encodes it as +-FLT_MAX (kSrCvt); on kSrTable, float_step_range keeps
//    such inputs out.
// Checked against emu::convert for every float32 exponent, and for every f16 / bf16 input at
// eight scales, in the four FP8 formats (cuda/tools/float_step_sim.cpp, 237 M checks), and on
// the GPU against lib's encode_array (tests/gpu/test_kernels.cpp).
// In the SASS (2026-11-28, bf16): FMUL, FFMA.SAT and three FFMA on the FP32 pipes; the LOP3 for f
// and step_bits on the integer ALU pipe, which runs at half the issue rate on sm_90 (the NaN
// clamp, one VIMNMX, went on 2026-11-27 and 2026-11-28: see above). kAddForm: step_bits' form (see there).
// kSign false: the result is |v|, the caller puts the sign back on the code (sign_bytes).
template <class D, bool kAddForm, bool kSign = true>
__device__ __forceinline__ std::uint32_t stochastic_grid_float(std::uint32_t w, float scale, std::uint32_t random) {
    constexpr int M = D::man_bits, kShift = 23 - M, F = D::emin - M - 9;
    static_assert(D::total_bits == 8 && D::has_zero && F >= -126 && F >= D::emin - 23,
                  "FP8 element formats: f is a normal float32, 2^emin - 2^F is exact");
    constexpr std::uint32_t kF = static_cast<std::uint32_t>(F + 127) << 23, kLow = (1u << (32 - kShift)) - 1u;
    const float normal_lo = __uint_as_float(static_cast<std::uint32_t>(D::emin + 127) << 23);
    const float k_unit = __uint_as_float(static_cast<std::uint32_t>(24 - D::emin + 127) << 23);  // 2^(24-emin)
    const float offset = normal_lo - __uint_as_float(kF);                                        // 2^emin - 2^F
    const float a = __fmul_rn(fabsf(__uint_as_float(w)), scale);
    float cu, inner, t;
    asm("fma.rn.sat.f32 %0, %1, %2, 0f4B800000;" : "=f"(cu) : "f"(a), "f"(-k_unit));  // 0f4B800000: 2^24
    const float f = __uint_as_float(kF | (random & kLow));
    asm("fma.rz.f32 %0, %1, %2, %3;" : "=f"(inner) : "f"(f), "f"(cu), "f"(a));
    asm("fma.rz.f32 %0, %1, %2, %3;" : "=f"(t) : "f"(cu), "f"(offset), "f"(inner));
    const std::uint32_t v = step_bits<kShift, kAddForm>(__float_as_uint(t), random);
    const std::uint32_t m = __float_as_uint(__fmaf_rn(cu, -normal_lo, __uint_as_float(v)));
    return kSign ? m | (w & 0x80000000u) : m;
}

// When a launch's steps may take stochastic_grid_float: on (scale > 0 and finite: then y = |x|
// scale with x's sign, and no NaN comes from the product), and on kSrTable only for steps whose
// 16 inputs have magnitude bits h = x & 0x7FFF below `from`. from keeps out NaN inputs (the table
// reads a NaN's payload) and inputs whose step could pass FLT_MAX (the table would take +-Inf as
// Inf, not as FLT_MAX): with scale < 2^(ks+1), |x| < 2^(126-ks) gives |y| <= 2^127, whose step is
// at most 2^127 (1 + 2^-M), finite. (Steps of 16 elements with one outside take the general step.)
struct FloatStepRange {
    bool on = false;
    std::uint32_t from = 0x8000;
};
template <class S, class D, int P>
__device__ __forceinline__ FloatStepRange float_step_range(float scale) {
    FloatStepRange r;
    if (!(scale > 0.0f && scale <= FLT_MAX)) return r;
    r.on = true;
    if constexpr (P == kSrTable) {
        constexpr int B = S::bias, M = S::man_bits;
        constexpr std::uint32_t kNan = (static_cast<std::uint32_t>(2 * B + 1) << M) + 1;  // smallest NaN h
        const int ks = static_cast<int>(__float_as_uint(scale) >> 23) - 127;              // subnormal: -127
        const int eb = 126 - ks + B;  // S's biased exponent of 2^(126 - ks)
        r.from = eb > 2 * B ? kNan : eb <= 0 ? 0u : min(static_cast<std::uint32_t>(eb) << M, kNan);
    }
    return r;
}

// Code of a value already on D's grid (kSrCvt / kSrTable).
template <class D, int P>
__device__ __forceinline__ std::uint8_t encode_grid(std::uint32_t v, const ElementCtx& c) {
    if constexpr (P == kSrCvt)
        return cvt_one<D>(v);
    else
        return c.table[cast_table_key<D>(v)];
}

// Codes of four values already on D's grid, packed little-endian (kSrCvt / kSrTable).
template <class D, int P>
__device__ __forceinline__ std::uint32_t encode_grid_four(const std::uint32_t (&v)[4], const ElementCtx& c) {
    if constexpr (P == kSrCvt) return cvt_two<D>(v[0], v[1]) | (cvt_two<D>(v[2], v[3]) << 16);
    std::uint32_t out = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) out |= std::uint32_t{encode_grid<D, P>(v[k], c)} << (8 * k);
    return out;
}

// The stochastic code of y with random word `random` (P: kSrCvt, kSrTable or kConvert).
template <class D, int P, int R>
__device__ __forceinline__ std::uint8_t stochastic_code(std::uint32_t y, const ElementCtx& c, std::uint32_t random) {
    if constexpr (P == kSrCvt || P == kSrTable)
        return encode_grid<D, P>(stochastic_grid_bits<D, P>(y, random), c);
    else
        return convert_fixed<D, R>(y, c.policy, random);
}

// kCvtDir's code of one element: the grid step (numerics/cvt_directed.hpp) and the instruction in
// the domain, the table outside it.
template <class D>
__device__ __forceinline__ std::uint8_t cvt_dir_one(std::uint32_t y, const ElementCtx& c) {
    namespace cd = numerics::cvt_directed;
    if (!cd::in_domain<D>(y)) return c.table[cast_table_key<D>(y)];
    const std::uint32_t w = cd::grid_value<D>(y, cd::step_of<D>(c.policy.rounding));
    return static_cast<std::uint8_t>(cd::fix_codes<D>(cvt_one<D>(w)));
}

// One element at stream index `index` (stochastic: draws emu::stochastic_bits(seed, index)).
// R: the rounding for kConvert (compile time).
template <class D, int P, int R>
__device__ __forceinline__ std::uint8_t encode_one(std::uint32_t y, const ElementCtx& c, std::uint64_t index) {
    if constexpr (P == kCvt)
        return cvt_one<D>(y);
    else if constexpr (P == kCvtFix)
        return (y & 0x7FFFFFFFu) <= max_finite_bits<D>() ? cvt_one<D>(y) : c.table[cast_table_key<D>(y)];
    else if constexpr (P == kCvtDir)
        return cvt_dir_one<D>(y, c);
    else if constexpr (P == kTable)
        return c.table[cast_table_key<D>(y)];
    else if constexpr (P == kSrCvt || P == kSrTable)
        return encode_grid<D, P>(stochastic_grid_bits<D, P>(y, stochastic_word(c.seed, index)), c);
    else {
        const std::uint32_t random =
            R == static_cast<int>(emu::Rounding::stochastic) ? stochastic_word(c.seed, index) : 0u;
        return convert_fixed<D, R>(y, c.policy, random);
    }
}

// Four elements whose stream indices are index0 .. index0 + 3, packed little-endian. kInline:
// emu::convert inlined on the stochastic path (the element-wise and row kernels; the 128x128
// tile kernel, which holds 64 elements per thread, calls it out of line to keep ptxas fast).
template <class D, int P, int R, bool kInline = true>
__device__ __forceinline__ std::uint32_t encode_four(const std::uint32_t (&y)[4], const ElementCtx& c,
                                                     std::uint64_t index0) {
    if constexpr (P == kCvt) {
        return cvt_two<D>(y[0], y[1]) | (cvt_two<D>(y[2], y[3]) << 16);
    } else if constexpr (P == kCvtFix) {
        const std::uint32_t hi =
            max(max(y[0] & 0x7FFFFFFFu, y[1] & 0x7FFFFFFFu), max(y[2] & 0x7FFFFFFFu, y[3] & 0x7FFFFFFFu));
        if (hi <= max_finite_bits<D>()) return cvt_two<D>(y[0], y[1]) | (cvt_two<D>(y[2], y[3]) << 16);
        std::uint32_t out = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) out |= std::uint32_t{c.table[cast_table_key<D>(y[k])]} << (8 * k);
        return out;
    } else if constexpr (P == kCvtDir) {
        namespace cd = numerics::cvt_directed;
        const std::uint32_t hi =
            max(max(y[0] & 0x7FFFFFFFu, y[1] & 0x7FFFFFFFu), max(y[2] & 0x7FFFFFFFu, y[3] & 0x7FFFFFFFu));
        if (cd::in_domain<D>(hi)) {
            const cd::Step st = cd::step_of<D>(c.policy.rounding);
            const std::uint32_t codes = cvt_two<D>(cd::grid_value<D>(y[0], st), cd::grid_value<D>(y[1], st)) |
                                        (cvt_two<D>(cd::grid_value<D>(y[2], st), cd::grid_value<D>(y[3], st)) << 16);
            return cd::fix_codes<D>(codes);
        }
        std::uint32_t out = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) out |= std::uint32_t{cvt_dir_one<D>(y[k], c)} << (8 * k);
        return out;
    } else if constexpr (P == kSrCvt || P == kSrTable) {
        std::uint32_t v[4];
        if ((index0 & 3u) == 0) {  // an aligned group: one Philox call, all four words
            const emu::PhiloxWords w = emu::philox4x32_10(c.keys, index0 >> 2);
            stochastic_grid_four<D, P>(y, w.w, v);
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) v[k] = stochastic_grid_bits<D, P>(y[k], stochastic_word(c.seed, index0 + k));
        }
        return encode_grid_four<D, P>(v, c);
    } else if constexpr (P == kConvert && R == static_cast<int>(emu::Rounding::stochastic)) {
        std::uint32_t out = 0;
        if ((index0 & 3u) == 0) {  // an aligned group: one Philox call, all four words
            const emu::PhiloxWords w = emu::philox4x32_10(c.keys, index0 >> 2);
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                // The narrow formats call it out of line: 16 inlined copies per kernel for each of
                // six more formats would slow ptxas for a path that is bound by convert anyway.
                constexpr bool inl = kInline && !is_narrow_type<D>();
                const std::uint8_t q = inl ? convert_fixed_inline<D, R>(y[k], c.policy, w.w[k])
                                           : convert_fixed<D, R>(y[k], c.policy, w.w[k]);
                out |= std::uint32_t{q} << (8 * k);
            }
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) out |= std::uint32_t{encode_one<D, P, R>(y[k], c, index0 + k)} << (8 * k);
        }
        return out;
    } else {
        std::uint32_t out = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) out |= std::uint32_t{encode_one<D, P, R>(y[k], c, index0 + k)} << (8 * k);
        return out;
    }
}

// The (format, path, rounding) combinations element_path can choose: kernels are instantiated
// for these only.
template <class D, int P, int R>
constexpr bool path_exists() {
    constexpr bool e8m0 = !D::has_zero;
    constexpr bool ocp = D::encoding == emu::Encoding::ieee || D::encoding == emu::Encoding::fn;
    constexpr bool narrow = is_narrow_type<D>();  // kConvert only (element_path)
    if constexpr (P == kCvt || P == kSrCvt || P == kCvtFix)
        return ocp && !e8m0 && !narrow && D::total_bits == 8;
    else if constexpr (P == kCvtDir)
        return numerics::cvt_directed::is_ocp_pair<D>() || numerics::cvt_directed::is_fnuz_pair<D>();
    else if constexpr (P == kTable || P == kSrTable)
        return !e8m0 && !narrow && D::total_bits == 8;
    else
        return e8m0 || narrow;
}

// Dynamic shared memory a kernel of path P needs for the table of D.
template <class D, int P>
constexpr std::size_t element_smem() {
    if constexpr (table_in_smem(P))
        return cast_table_size<D>();
    else
        return 0;
}

// Copies the launch's cast table into shared memory (table_in_smem: kTable, kSrTable), or points
// ctx at it in global memory (kCvtFix, kCvtDir); every thread must call it.
template <class D, int P>
__device__ __forceinline__ void load_cast_table(ElementCtx& c, const std::uint8_t* global_table, std::uint8_t* smem) {
    if constexpr (table_in_smem(P)) {
        constexpr int kVecs = static_cast<int>(cast_table_size<D>() / 16);
        for (int i = threadIdx.x; i < kVecs; i += blockDim.x)
            reinterpret_cast<uint4*>(smem)[i] = __ldg(reinterpret_cast<const uint4*>(global_table) + i);
        __syncthreads();
        c.table = smem;
    } else if constexpr (reads_table(P)) {
        c.table = global_table;
    }
}

// Host: run fn(P, R) with the path and the compile-time rounding for (to, policy) as integral
// constants (R matters only for kConvert).
template <class Fn>
void with_element_path(Format to, const Policy& p, Fn&& fn) {
    using emu::Rounding;
    switch (element_path(to, p)) {
        case kCvt: fn(std::integral_constant<int, kCvt>{}, std::integral_constant<int, 0>{}); return;
        case kTable: fn(std::integral_constant<int, kTable>{}, std::integral_constant<int, 0>{}); return;
        case kCvtFix: fn(std::integral_constant<int, kCvtFix>{}, std::integral_constant<int, 0>{}); return;
        case kCvtDir: fn(std::integral_constant<int, kCvtDir>{}, std::integral_constant<int, 0>{}); return;
        case kSrCvt: fn(std::integral_constant<int, kSrCvt>{}, std::integral_constant<int, 5>{}); return;
        case kSrTable: fn(std::integral_constant<int, kSrTable>{}, std::integral_constant<int, 5>{}); return;
        case kConvert: break;
    }
    switch (p.rounding) {
        case Rounding::stochastic:
            fn(std::integral_constant<int, kConvert>{}, std::integral_constant<int, 5>{});
            return;
        default: fn(std::integral_constant<int, kConvert>{}, std::integral_constant<int, -1>{}); return;
    }
}

}  // namespace fp8kit::cuda::detail
