// The fast path of quantize_blocks (blocks.hpp) for the block shapes of NVFP4 and MX: 1 x 16 and
// 16 x 16 (NVFP4, TE and torchao) and 1 x 32 (MXFP4, MXFP6, MXFP8 under every E8M0 rule), in the
// style of block.cu: each lane owns one row of a block, 16 or 32 consecutive elements (segments
// of 16: 16-byte loads, a 16-byte store of codes or an 8-byte store of packed E2M1 pairs each), the
// 16 lanes of a 16 x 16 block are adjacent in a warp and meet in shuffles for its amax (but E2M1
// 16 x 16 blocks from bf16 and float32, TE's nvfp4 weights, take tile16_blocks_kernel and
// tile16_f32_blocks_kernel: a warp a tile of 16 rows, loads coalesced along the rows), and the
// element conversion's path is fixed at compile time (element.cuh). Scales come from numerics::rule_scale, the products from
// host_mul_bits (lib's host multiply), and the codes from emu::convert's results: through
// element.cuh's paths for the FP8 formats, and for E2M1 / E2M3 / E3M2 from the exact steps below,
// which fall back to emu::convert itself for every element they do not cover.
#include <algorithm>
#include <atomic>
#include <cfloat>
#include <type_traits>

#include "block_common.cuh"
#include "fp8kit/cuda/fake_quantize.hpp"
#include "fp8kit/numerics/block_factor.hpp"
#include "elementwise.cuh"
#include "rht16.cuh"

namespace fp8kit::cuda::detail {

namespace {

// The OCP MX element formats (E2M1, E2M3, E3M2: no Inf, no NaN) with the exact steps below.
template <class D>
constexpr bool kMxNarrow = std::is_same_v<D, emu::E2M1> || std::is_same_v<D, emu::E2M3> || std::is_same_v<D, emu::E3M2>;

// Float32 bits of D's largest finite value (E2M1 6, E2M3 7.5, E3M2 28).
template <class D>
constexpr std::uint32_t kMaxBits = (static_cast<std::uint32_t>(D::emax + 127) << 23) |
                                   (static_cast<std::uint32_t>((1u << D::man_bits) - 1u) << (23 - D::man_bits));

// E2M1 / E2M3 / E3M2 through the sm_89+ FP8 cvt (cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32): scaled by
// 2^(emin(T) - emin(D)) (exact), D's grid is T's (T = E4M3 for E2M1 / E2M3: 3 mantissa bits and the
// same quantum below the smallest normal; T = E5M2 for E3M2: 2 bits), and a magnitude's T code is
// its D code (E2M3 / E3M2: the same exponent field and mantissa; E2M1, whose grid values are
// E2M3 values with mantissa 0 or 4: its E2M3 code >> 2). These formats have neither Inf nor NaN:
// every magnitude past the largest finite value, Inf included, gives the largest finite code
// under every overflow policy (emu::convert: on_overflow / overflow_nan fall back to max_finite),
// so magnitudes are clamped to it first. The sign goes to D's top bit (-0 and negatives that round
// to zero keep it, as emu::convert's sign-magnitude assembly).
template <class D>
using CvtTwin = std::conditional_t<D::exp_bits == 3, emu::E5M2, emu::E4M3>;

template <class D>
__device__ __forceinline__ float twin_scale() {
    return __uint_as_float(static_cast<std::uint32_t>(CvtTwin<D>::emin - D::emin + 127) << 23);
}

// Nearest-even onto D's grid for E2M1 (1 mantissa bit, which no cvt has): one float32 add of
// C = 2^(e + 23 - m), e = max(exponent of u, emin), whose ulp is D's quantum at u, and its
// subtraction (both exact but the add's roundTiesToEven, which rounds at D's last bit); a carry
// to the next binade is D's next value.
template <class D>
__device__ __forceinline__ std::uint32_t rne_grid(std::uint32_t u) {
    constexpr std::uint32_t kNormalLo = static_cast<std::uint32_t>(D::emin + 127) << 23;
    const std::uint32_t c = max(u & 0x7F800000u, kNormalLo) + (static_cast<std::uint32_t>(23 - D::man_bits) << 23);
    return __float_as_uint(__fsub_rn(__fadd_rn(__uint_as_float(u), __uint_as_float(c)), __uint_as_float(c)));
}

// rne_grid in the cvt twin's domain (see mx_narrow_bf16_four): the same add and subtraction on a =
// u 2^(emin(T) - emin(D)), with C scaled by the same power of two, so the result is rne_grid(u)
// scaled by it (every operand and result is a normal float32 or zero, where scaling by a power of
// two commutes with roundTiesToEven). C is written max(a + K, lo + K) & 0x7F800000 (K = (23 - m)
// << 23, lo the scaled smallest normal): K only adds to the exponent field (a is at most D's
// scaled largest value, so no carry leaves it), and max(a, lo) has lo's exponent or a's, so this
// is max(a & 0x7F800000, lo) + K as in rne_grid, in two instructions (VIADDMNMX, LOP3) for three.
template <class D>
__device__ __forceinline__ std::uint32_t rne_grid_twin(std::uint32_t a) {
    constexpr std::uint32_t kLo = static_cast<std::uint32_t>(CvtTwin<D>::emin + 127) << 23;
    constexpr std::uint32_t kC = static_cast<std::uint32_t>(23 - D::man_bits) << 23;
    const std::uint32_t c = max(a + kC, kLo + kC) & 0x7F800000u;
    return __float_as_uint(__fsub_rn(__fadd_rn(__uint_as_float(a), __uint_as_float(c)), __uint_as_float(c)));
}

// Codes of four magnitudes g (float32 bits, at most D's largest finite value; E2M1: on D's grid)
// with the signs of y, little-endian bytes.
template <class D>
__device__ __forceinline__ std::uint32_t mx_narrow_cvt_four(const std::uint32_t (&g)[4], const std::uint32_t (&y)[4]) {
    using T = CvtTwin<D>;
    const float k = twin_scale<D>();
    std::uint32_t t[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) t[i] = __float_as_uint(__fmul_rn(__uint_as_float(g[i]), k));
    std::uint32_t w = cvt_two<T>(t[0], t[1]) | (cvt_two<T>(t[2], t[3]) << 16);
    if constexpr (D::man_bits == 1) w = (w >> 2) & 0x07070707u;
    // Sign bits: the high byte of each y (PRMT), bit 7 moved to D's sign bit.
    const std::uint32_t sb =
        __byte_perm(__byte_perm(y[0], y[1], 0x0073), __byte_perm(y[2], y[3], 0x0073), 0x5410) & 0x80808080u;
    return w | (sb >> (8 - D::total_bits));
}

// Codes of four E2M1 / E2M3 / E3M2 elements (stream indices index0 ..), little-endian bytes.
// Nearest-even (read at run time when R < 0) and stochastic rounding of non-NaN elements take the
// steps above (stochastic: element.cuh's stochastic_grid_general with the existing bit rule's
// words, then the exact encoding of the grid value); a group with a NaN, and the other roundings,
// take emu::convert itself, with the same random words.
template <class D, int R>
__device__ __forceinline__ std::uint32_t mx_narrow_four(const std::uint32_t (&y)[4], const ElementCtx& c,
                                                        std::uint64_t index0) {
    std::uint32_t u[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) u[k] = y[k] & 0x7FFFFFFFu;
    const bool no_nan = max(max(u[0], u[1]), max(u[2], u[3])) <= 0x7F800000u;
#pragma unroll
    for (int k = 0; k < 4; ++k) u[k] = min(u[k], kMaxBits<D>);
    std::uint32_t out = 0;
    if constexpr (R == static_cast<int>(emu::Rounding::stochastic)) {
        std::uint32_t w[4];
        if ((index0 & 3u) == 0) {
            const emu::PhiloxWords pw = emu::philox4x32_10(c.keys, index0 >> 2);
#pragma unroll
            for (int k = 0; k < 4; ++k) w[k] = pw.w[k];
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) w[k] = stochastic_word(c.seed, index0 + k);
        }
        if (no_nan) {
            std::uint32_t g[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) g[k] = stochastic_grid_general<D>(u[k], w[k]);
            out = mx_narrow_cvt_four<D>(g, y);
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) out |= std::uint32_t{convert_fixed<D, R>(y[k], c.policy, w[k])} << (8 * k);
        }
    } else {
        if (no_nan && c.policy.rounding == emu::Rounding::nearest_even) {
            if constexpr (D::man_bits == 1) {
#pragma unroll
                for (int k = 0; k < 4; ++k) u[k] = rne_grid<D>(u[k]);
            }
            out = mx_narrow_cvt_four<D>(u, y);
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) out |= std::uint32_t{convert_fixed<D, R>(y[k], c.policy, 0u)} << (8 * k);
        }
    }
    return out;
}

// ---- bf16 inputs as loaded: 32-bit words of two elements ------------------------------------
// A bf16 segment stays in the eight words its two 16-byte loads give (word k: element 2k in bits
// 0-15, element 2k+1 in bits 16-31, little-endian): held as 16 separate elements, each was moved
// into a register of its own (PRMT) and widened from there (LOP3 + IMAD.U32), three instructions
// per element where the words need one (v << 16, v & 0xFFFF0000).
template <class S>
constexpr bool kBf16Words = sizeof(typename S::storage_t) == 2 && S::man_bits == 7;

// Float32 bits of the high element of a word. The AND is PTX so that NVVM cannot rewrite it as
// (v >> 16) << 16 (see scaled16 in element.cuh).
__device__ __forceinline__ std::uint32_t bf16_high(std::uint32_t v) {
    std::uint32_t r;
    asm("and.b32 %0, %1, 0xFFFF0000;" : "=r"(r) : "r"(v));
    return r;
}

// Float32 bits of element k (0 .. 15) of a segment: a bf16 value is the upper half of its float32.
__device__ __forceinline__ std::uint32_t bf16_bits(const std::uint32_t (&w)[8], int k) {
    return k % 2 ? bf16_high(w[k / 2]) : w[k / 2] << 16;
}

// Byte k of the result is 0xFF where input k (the halves of lo, then of hi) is negative, else 0:
// prmt.b32 with selectors 8 + i replicates the sign bit of source byte i over the byte (PTX ISA,
// prmt: "msb=1 means replicate the sign"); __byte_perm keeps only the low three bits of each
// selector (nvcc 13 compiles __byte_perm(lo, hi, 0xFDB9) to PRMT 0x7531).
__device__ __forceinline__ std::uint32_t sign_byte_masks(std::uint32_t lo, std::uint32_t hi) {
    std::uint32_t r;
    asm("prmt.b32 %0, %1, %2, 0xFDB9;" : "=r"(r) : "r"(lo), "r"(hi));
    return r;
}

// Twin scale exponent: mx_narrow_cvt_four multiplies D's grid values by 2^kTwinExp<D> (exactly).
template <class D>
constexpr int kTwinExp = CvtTwin<D>::emin - D::emin;

// The codes mx_narrow_four gives under nearest-even to four bf16 inputs (words lo, hi) at scale
// `scale`, from st = scale 2^kTwinExp (exact) and scale > 0 finite, no input a NaN:
//  1. a = fl32(|x| st) (FMUL with an |x| operand): st is exact and a power of two apart from scale,
//     and roundTiesToEven commutes with scaling by a power of two while the result is a normal
//     float32, so a = |fl32(x scale)| 2^kTwinExp (the magnitude mx_narrow_four starts from, in
//     the twin's domain) whenever |x| scale 2^kTwinExp >= 2^-126. Otherwise both are at most
//     2^-126, far below half of D's smallest subnormal scaled (2^-8 for E2M1, 2^-10 for E2M3,
//     2^-17 for E3M2), and both give magnitude code 0.
//     A product past FLT_MAX is +Inf before the scaling and finite after it; both are above D's
//     largest value, so the clamp of step 2 gives both its code.
//  2. a = min(a, D's largest value 2^kTwinExp) on the bits (mx_narrow_four's clamp, scaled).
//  3. E2M1: rne_grid_twin (rne_grid, scaled); then the cvt gives T's code of the scaled grid value,
//     which is D's code (mx_narrow_cvt_four; its own multiply by twin_scale is step 1's here).
//     E2M1's scaled grid values are E4M3 codes with the two low mantissa bits zero (0x00, 0x04,
//     .., 0x1C), so w >> 2 is the E2M1 code in each byte with nothing shifted in from the next.
//  4. The sign: y = fl32(x scale) has x's sign (scale > 0), also where it rounds to zero, and
//     emu::convert puts it on D's top bit (sign-magnitude; no NaN here): byte k | (sign mask k &
//     the top bit), one PRMT and one LOP3 per four codes.
template <class D>
__device__ __forceinline__ std::uint32_t mx_narrow_bf16_four(std::uint32_t lo, std::uint32_t hi, float st) {
    using T = CvtTwin<D>;
    constexpr std::uint32_t kMaxTwin = kMaxBits<D> - (static_cast<std::uint32_t>(-kTwinExp<D>) << 23);
    static_assert(kTwinExp<D> < 0 && kMaxBits<D> > (static_cast<std::uint32_t>(-kTwinExp<D>) << 23),
                  "D's largest value scaled by the twin is a normal float32");
    const std::uint32_t x[4] = {lo << 16, bf16_high(lo), hi << 16, bf16_high(hi)};
    std::uint32_t a[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        a[k] = min(__float_as_uint(__fmul_rn(fabsf(__uint_as_float(x[k])), st)), kMaxTwin);  // 1, 2
        if constexpr (D::man_bits == 1) a[k] = rne_grid_twin<D>(a[k]);                       // 3
    }
    std::uint32_t w = cvt_two<T>(a[0], a[1]) | (cvt_two<T>(a[2], a[3]) << 16);
    if constexpr (D::man_bits == 1) w >>= 2;
    constexpr std::uint32_t kSignBits = 0x01010101u << (D::total_bits - 1);
    return w | (sign_byte_masks(lo, hi) & kSignBits);  // 4
}

// The (format, path) pairs with a kernel here: E2M1 / E2M3 / E3M2 under every policy, and E4M3 /
// E5M2 on the cvt paths (nearest-even and stochastic rounding with the saturating, canonical
// policies, and nearest-even with any overflow and NaN policy: MXFP8 as TE, torchao and the OCP
// rule give it). The rest (the FNUZ formats, the other roundings into FP8, the ml_dtypes formats)
// run the general kernel of fp4_blocks.cu, so that this file compiles in reasonable time.
template <class D, int P, int R>
constexpr bool kFastPath = kMxNarrow<D> ? P == kConvert
                                        : (std::is_same_v<D, emu::E4M3> ||
                                           std::is_same_v<D, emu::E5M2>)&&(P == kCvt || P == kCvtFix || P == kSrCvt) &&
                                              path_exists<D, P, R>();

// Codes of group g (elements 4g .. 4g + 3, stream indices index0 + 4g ..) of a segment at the
// block's scale.
template <class S, class D, int P, int R>
__device__ __forceinline__ std::uint32_t encode_block_four(const typename S::storage_t (&e)[16], int g, float scale,
                                                           const ElementCtx& c, std::uint64_t index0) {
    // fl32(x * scale) by __fmul_rn, equal to lib's host product unless it is a NaN (a NaN
    // operand, Inf * 0): a group with one takes host_mul_bits, which gives the host's NaN.
    // kCvt skips that step: every NaN y has the one code 0x7F there (nan_codes_alike).
    std::uint32_t y[4];
    bool nan = false;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const float p = __fmul_rn(__uint_as_float(widen_non_nan<S>(e[4 * g + k])), scale);
        if constexpr (P != kCvt) nan |= p != p;
        y[k] = __float_as_uint(p);
    }
    if (nan) {
#pragma unroll
        for (int k = 0; k < 4; ++k) y[k] = host_mul_bits(widen_bits<S>(e[4 * g + k]), scale);
    }
    if constexpr (kMxNarrow<D>)
        return mx_narrow_four<D, R>(y, c, index0 + 4 * g);
    else
        return encode_four<D, P, R>(y, c, index0 + 4 * g);
}

// Codes of one segment (16 elements, stream indices index0 ..) at the block's scale.
template <class S, class D, int P, int R>
__device__ __forceinline__ uint4 encode_block_segment(const typename S::storage_t (&e)[16], float scale,
                                                      const ElementCtx& c, std::uint64_t index0) {
    std::uint32_t w[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) w[g] = encode_block_four<S, D, P, R>(e, g, scale, c, index0);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Whether a lane's segments may take mx_narrow_bf16_four (bf16) or mx_narrow_f32_four (float32),
// and its st (row_blocks_kernel, col_blocks_kernel): no input of the lane is a NaN (bf16: nan_in;
// float32 lanes pass false and mx_narrow_f32_four tests each group) and the scale is positive and
// finite (so no product is a NaN: Inf * 0 needs a zero or Inf scale, and __fmul_rn is lib's host
// product, host_mul_bits), the rounding is nearest-even, and st = scale 2^kTwinExp is exact
// (st 2^-kTwinExp gives the scale back).
struct NarrowLane {
    bool narrow;
    float st;
};

template <class D, int R>
__device__ __forceinline__ NarrowLane narrow_lane(bool nan_in, float scale, const ElementCtx& c) {
    NarrowLane l{false, 0.0f};
    if constexpr (kMxNarrow<D> && R < 0) {
        const float back = __uint_as_float(static_cast<std::uint32_t>(127 - kTwinExp<D>) << 23);  // 2^-kTwinExp
        l.st = __fmul_rn(scale, twin_scale<D>());
        l.narrow = !nan_in && scale > 0.0f && scale <= FLT_MAX && c.policy.rounding == emu::Rounding::nearest_even &&
                   __fmul_rn(l.st, back) == scale;
    }
    return l;
}

// The codes mx_narrow_four gives under nearest-even to four float32 inputs x (bits) at a lane's scale,
// from st = scale 2^kTwinExp (narrow_lane: the scale positive and finite, st exact): the steps 1 to
// 4 of mx_narrow_bf16_four on float32 elements (their argument holds for any float32 x; bf16
// inputs are float32 values), the sign from each element's top byte as mx_narrow_cvt_four takes
// it from y = fl32(x scale), whose sign is x's (scale > 0). A NaN x gives a NaN fl32(|x| st) (bits
// above 0x7F800000 after the absolute value): then the function returns false and the caller
// takes the group by encode_block_four, as mx_narrow_four takes a group with a NaN.
template <class D>
__device__ __forceinline__ bool mx_narrow_f32_four(const std::uint32_t (&x)[4], float st, std::uint32_t& codes) {
    using T = CvtTwin<D>;
    constexpr std::uint32_t kMaxTwin = kMaxBits<D> - (static_cast<std::uint32_t>(-kTwinExp<D>) << 23);
    std::uint32_t a[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) a[k] = __float_as_uint(__fmul_rn(fabsf(__uint_as_float(x[k])), st));  // 1
    if (max(max(a[0], a[1]), max(a[2], a[3])) > 0x7F800000u) return false;
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        a[k] = min(a[k], kMaxTwin);                                     // 2
        if constexpr (D::man_bits == 1) a[k] = rne_grid_twin<D>(a[k]);  // 3
    }
    std::uint32_t w = cvt_two<T>(a[0], a[1]) | (cvt_two<T>(a[2], a[3]) << 16);
    if constexpr (D::man_bits == 1) w >>= 2;
    const std::uint32_t sb =
        __byte_perm(__byte_perm(x[0], x[1], 0x0073), __byte_perm(x[2], x[3], 0x0073), 0x5410) & 0x80808080u;
    codes = w | (sb >> (8 - D::total_bits));  // 4
    return true;
}

// Whether a lane of kSegs segments of D from float32 takes mx_narrow_f32_four: measured on the H200
// (docs/performance.md) from float32, NVFP4 91.9 -> 94.9% (torchao) and 93.7 -> 96.7% (TE) of its
// floor, MXFP6 84 -> 88% of copy, but MXFP4 (two E2M1 segments a lane) 82.8 -> 80%, which keeps
// encode_block_segment.
template <class D, int kSegs>
constexpr bool kF32Twin = kMxNarrow<D> && !(std::is_same_v<D, emu::E2M1> && kSegs == 2);

// Codes of one float32 / float16 segment at the block's scale: float32 groups of the narrow
// formats under nearest-even by mx_narrow_f32_four where the lane allows it (l.narrow, and
// kF32Twin), every other group and path as encode_block_segment.
template <class S, class D, int P, int R, int kSegs>
__device__ __forceinline__ uint4 encode_wide_segment(const typename S::storage_t (&e)[16], float scale,
                                                     const NarrowLane& l, const ElementCtx& c, std::uint64_t index0) {
    if constexpr (kF32Twin<D, kSegs> && R < 0 && std::is_same_v<S, Binary32>) {
        if (l.narrow) {
            std::uint32_t w[4];
#pragma unroll
            for (int g = 0; g < 4; ++g) {
                const std::uint32_t x[4] = {e[4 * g], e[4 * g + 1], e[4 * g + 2], e[4 * g + 3]};  // float32 bits
                if (!mx_narrow_f32_four<D>(x, l.st, w[g])) w[g] = encode_block_four<S, D, P, R>(e, g, scale, c, index0);
            }
            return make_uint4(w[0], w[1], w[2], w[3]);
        }
    }
    return encode_block_segment<S, D, P, R>(e, scale, c, index0);
}

// ---- NVFP4: a block's numbers from its scale byte --------------------------------------------
// Per block the NVFP4 rules take the E4M3 byte from the block amax (numerics::rule_nvfp4_byte: for
// TE a multiply, fminf and one cvt) and everything after it from the byte and numbers of the
// launch alone: numerics::rule_nvfp4_from_byte (encode, with a division, and decode, from the
// byte and the ScaleParams after set_global_amax) and, from bf16, narrow_lane's st and its test of
// the scale and the rounding (from encode and the policy; the lane's own part, no NaN input, is
// ANDed in per block). The prologue of row_blocks_kernel tabulates these for the bytes 0 .. 127
// once per CTA (kNvfp4Bytes entries of 16 bytes in shared memory, one LDS.128 a block). Why each
// entry is bit for bit what the per-block step gives for that byte: it is computed by the same
// device functions with the same arguments (the byte, the launch's ScaleParams after
// set_global_amax, ctx's policy), and these are deterministic in their arguments: every operation
// is a round-to-nearest intrinsic (div_rn, mul_rn: __fdiv_rn, __fmul_rn, never contracted into an
// FMA), a compare, or the cvt of e4m3_value, so the bits do not depend on where they run. This
// covers every case of the rules alike (global amax 0, subnormal, Inf or NaN; byte 0, whose TE
// encode is FLT_MAX; the NaN byte 0x7F of torchao's clamp; the single-level rule, whose numbers
// need no global amax). Every byte the rules give is below 128 (TE: the cvt of a float in
// [0, FLT_MAX], at most 0x7E; torchao: the cvt of a clamped float >= 2^-6 or of a NaN, 0x7F; the
// block amax is +0 or more, or NaN); a byte from 128 up would take rule_scale itself.
struct Nvfp4Entry {
    float encode, decode, st;  // numerics::Nvfp4Block's encode and decode, NarrowLane::st
    std::uint32_t narrow;      // NarrowLane::narrow with no NaN input of the lane
};
constexpr std::uint32_t kNvfp4Bytes = 128;

// The rule as a value the compiler cannot relate to rule.rule (a mov it does not look into), for
// the NVFP4 rules' per-block dispatch: branching on rule.rule itself, nvcc merged that dispatch
// into rule_scale's switch (the fallback) and took the common path through its tree of compares.
__device__ __forceinline__ numerics::ScaleRule opaque_rule(numerics::ScaleRule r) {
    std::uint32_t v = static_cast<std::uint32_t>(r);
    asm("mov.b32 %0, %1;" : "=r"(v) : "r"(v));
    return static_cast<numerics::ScaleRule>(v);
}

// Entry `code` of the table at shared address `tab` (__cvta_generic_to_shared, taken once in the
// prologue and held in a register: nvcc otherwise rebuilt the address from the CTA's shared
// window, four instructions, every block). volatile: the load stays after the prologue's
// __syncthreads, which the compiler would not otherwise order it after.
__device__ __forceinline__ Nvfp4Entry nvfp4_entry(std::uint32_t tab, std::uint32_t code) {
    Nvfp4Entry e;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(e.encode), "=f"(e.decode), "=f"(e.st), "=r"(e.narrow)
                 : "r"(tab + code * static_cast<std::uint32_t>(sizeof(Nvfp4Entry))));
    return e;
}

// The instantiations that may run an NVFP4 rule with its 16-element blocks (E2M1 elements, one
// segment a lane) hold the table; MXFP4's (two segments) do not pay for it.
template <class D, int kSegs>
constexpr bool kNvfp4Table = std::is_same_v<D, emu::E2M1>&& kSegs == 1;

// Entries i, i + blockDim.x, .. of the table; every thread of the CTA calls it, then
// __syncthreads.
template <class D, int R>
__device__ __forceinline__ void fill_nvfp4_table(Nvfp4Entry* tab, const numerics::ScaleParams& rule,
                                                 const ElementCtx& c) {
    for (std::uint32_t i = threadIdx.x; i < kNvfp4Bytes; i += blockDim.x) {
        const numerics::Nvfp4Block nb = numerics::rule_nvfp4_from_byte(rule, static_cast<std::uint8_t>(i));
        const NarrowLane l = narrow_lane<D, R>(false, nb.encode, c);
        tab[i] = {nb.encode, nb.decode, l.st, l.narrow ? 1u : 0u};
    }
}

// A CTA's NVFP4 numbers, set once in the prologue of each kernel that quantises NVFP4 blocks.
struct Nvfp4Tab {
    numerics::ScaleParams rule;  // with the tensor's numbers (set_global_amax), its kind opaque_rule's
    bool on;                     // the table holds this rule's entries
    std::uint32_t addr;          // the table's shared address (nvfp4_entry)
};

// The prologue: the rule with the tensor's numbers and, where kTable and the rule is an NVFP4 one,
// the table filled into `tab` (kNvfp4Bytes entries of shared memory). Every thread of the CTA
// calls it; the condition is the same for all of them, so all reach the barrier or none.
template <class D, int R, bool kTable = true>
__device__ __forceinline__ Nvfp4Tab nvfp4_prologue(const numerics::ScaleParams& rule, const float* d_global_amax,
                                                   const ElementCtx& ctx, Nvfp4Entry* tab) {
    Nvfp4Tab t;
    t.rule = rule;
    if (numerics::rule_uses_global_amax(t.rule.rule)) numerics::set_global_amax(t.rule, *d_global_amax);
    t.rule.rule = opaque_rule(rule.rule);  // rule_nvfp4_byte's dispatch on its own value
    t.on = kTable && numerics::rule_is_nvfp4(t.rule.rule);
    t.addr = static_cast<std::uint32_t>(__cvta_generic_to_shared(tab));
    asm("mov.b32 %0, %0;" : "+r"(t.addr));  // kept in a register (nvfp4_entry)
    if constexpr (kTable) {
        if (t.on) {
            fill_nvfp4_table<D, R>(tab, t.rule, ctx);
            __syncthreads();
        }
    }
    return t;
}

// A block's scale (bs) and narrow lane (bl) from its amax, nan_in: the block holds a NaN.
// rule_scale's NVFP4 case is rule_nvfp4_from_byte(rule, rule_nvfp4_byte(rule, amax)) (scale =
// encode, scale_inv = decode, code = the byte); the table's entry of the byte is that and
// narrow_lane's result for it (Nvfp4Entry), so where the table holds the byte this is rule_scale's
// result and narrow_lane<D, R>(nan_in, bs.scale, ctx)'s, whose narrow is its no-NaN one AND
// !nan_in. Off the table, rule_scale takes the tensor's numbers from d_global_amax again
// (volatile: not merged with the prologue's read; held from there across a kernel's loop, the six
// floats took registers from every instantiation although only the table's blocks read two of
// them, TE's byte factor and torchao's per-tensor scale, on their common path).
template <class D, int R>
__device__ __forceinline__ void block_scale_of(const Nvfp4Tab& t, const numerics::ScaleParams& rule,
                                               const float* d_global_amax, float block_amax, bool nan_in,
                                               const ElementCtx& ctx, numerics::BlockScale& bs, NarrowLane& bl) {
    bool tabulated = false;
    if (t.on) {
        const std::uint8_t code = numerics::rule_nvfp4_byte(t.rule, block_amax);
        if (code < kNvfp4Bytes) {
            const Nvfp4Entry e = nvfp4_entry(t.addr, code);
            bs = {e.encode, e.decode, code};
            bl = {e.narrow != 0u && !nan_in, e.st};
            tabulated = true;
        }
    }
    if (!tabulated) {
        numerics::ScaleParams p = rule;
        if (numerics::rule_uses_global_amax(p.rule))
            numerics::set_global_amax(p, *reinterpret_cast<const volatile float*>(d_global_amax));
        bs = numerics::rule_scale(p, block_amax);
        bl = narrow_lane<D, R>(nan_in, bs.scale, ctx);
    }
}

// Codes of one bf16 segment (words w, stream indices index0 ..) at the block's scale: kCvt and the
// narrow formats' nearest-even from the words; every other path (and a lane with a NaN, or a scale
// that is not positive and finite) from the elements, as encode_block_segment.
template <class D, int P, int R>
__device__ __forceinline__ uint4 encode_bf16_segment(const std::uint32_t (&w)[8], float scale, const NarrowLane& l,
                                                     const ElementCtx& c, std::uint64_t index0) {
    std::uint32_t q[4];
    if constexpr (P == kCvt) {
        // encode_block_segment's kCvt step (no NaN step: nan_codes_alike) on the words.
#pragma unroll
        for (int g = 0; g < 4; ++g) {
            std::uint32_t y[4];
#pragma unroll
            for (int k = 0; k < 4; ++k)
                y[k] = __float_as_uint(__fmul_rn(__uint_as_float(bf16_bits(w, 4 * g + k)), scale));
            q[g] = cvt_two<D>(y[0], y[1]) | (cvt_two<D>(y[2], y[3]) << 16);
        }
        return make_uint4(q[0], q[1], q[2], q[3]);
    } else {
        if constexpr (kMxNarrow<D> && R < 0) {
            if (l.narrow) {
#pragma unroll
                for (int g = 0; g < 4; ++g) q[g] = mx_narrow_bf16_four<D>(w[2 * g], w[2 * g + 1], l.st);
                return make_uint4(q[0], q[1], q[2], q[3]);
            }
        }
        std::uint16_t e[16];
#pragma unroll
        for (int k = 0; k < 16; ++k) e[k] = static_cast<std::uint16_t>(k % 2 ? w[k / 2] >> 16 : w[k / 2] & 0xFFFFu);
        return encode_block_segment<BFloat16, D, P, R>(e, scale, c, index0);
    }
}

// Two E2M1 codes per byte, element 2k in the low nibble (emu::pack_fp4, NibbleOrder::low_first):
// the eight codes of words a and b (bytes c0..c3 and c4..c7, each < 16) become the 32 bits
// c0 | c1 << 4 | .. | c7 << 28. t = a + (a >> 4) has c0 | c1 << 4 in byte 0 and c2 | c3 << 4 in
// byte 2 (c0 >> 4 and c2 >> 4 are 0, and the sums carry nothing: the nibbles do not overlap), and
// one PRMT takes bytes 0 and 2 of both: LEA.HI per word and a PRMT per two words.
__device__ __forceinline__ std::uint32_t pack_words(std::uint32_t a, std::uint32_t b) {
    return __byte_perm(a + (a >> 4), b + (b >> 4), 0x6420);
}

// ---- a lane's amax (row_blocks_kernel, col_blocks_kernel) ----------------------------------
// Max |x| of a lane's kSegs bf16 segments (words as loaded) as float32 bits, NaN ignored (as lib's
// amax_of; common.cuh max_abs), and in nan_in whether one of them is a NaN. Per half, the max of
// h & 0x7FFF (VIMNMX3.U16x2, a third of an instruction per element besides the LOP3 per word).
// |x|'s float32 bits are (h & 0x7FFF) << 16, and non-NaN magnitudes order as their bits, so
// without a NaN (every h & 0x7FFF at most 0x7F80, Inf) this is max_abs's result over the lane's
// inputs; with one the lane takes max_abs per element, which ignores it.
template <int kSegs>
__device__ __forceinline__ std::uint32_t bf16_words_amax(const std::uint32_t (&wd)[kSegs][8], bool& nan_in) {
    std::uint32_t mm = 0;
#pragma unroll
    for (int j = 0; j < kSegs; ++j)
#pragma unroll
        for (int k = 0; k < 8; ++k) mm = __vmaxu2(mm, wd[j][k] & 0x7FFF7FFFu);
    const std::uint32_t mh = max(mm & 0xFFFFu, mm >> 16);
    nan_in = mh > 0x7F80u;
    std::uint32_t m = mh << 16;
    if (nan_in) {
        float mf = 0.0f;
#pragma unroll
        for (int j = 0; j < kSegs; ++j)
#pragma unroll
            for (int k = 0; k < 16; ++k) mf = fmaxf(mf, fabsf(__uint_as_float(bf16_bits(wd[j], k))));
        m = __float_as_uint(mf);
    }
    return m;
}

// Max |x| of a lane's kSegs segments of f32 / f16 elements as float32 bits, NaN ignored (max_abs;
// col_blocks_kernel. row_blocks_kernel folds the same max_abs in as it loads each segment: the
// max of magnitudes with NaN ignored does not depend on the order).
template <class S, int kSegs>
__device__ __forceinline__ std::uint32_t elements_amax(const typename S::storage_t (&e)[kSegs][16]) {
    float mf = 0.0f;
#pragma unroll
    for (int j = 0; j < kSegs; ++j)
#pragma unroll
        for (int k = 0; k < 16; ++k) mf = max_abs<S>(mf, e[j][k]);
    return __float_as_uint(mf);
}

// Whether one of a lane's f32 / f16 elements is a NaN.
template <class S, int kSegs>
__device__ __forceinline__ bool elements_have_nan(const typename S::storage_t (&e)[kSegs][16]) {
    std::uint32_t has_nan = 0;
#pragma unroll
    for (int j = 0; j < kSegs; ++j)
#pragma unroll
        for (int k = 0; k < 16; ++k) has_nan |= is_nan_bits<S>(e[j][k]) ? 1u : 0u;
    return has_nan != 0u;
}

struct RowGeom {
    std::uint32_t rows, cols;
    std::uint32_t block_rows;  // 1 or 16
    std::uint32_t lanes_log2;  // log2(lanes per block) = log2(block_rows) + seg_log2
    std::uint32_t grid_cols;
    std::uint32_t items;  // grid_rows * grid_cols * block_rows (< 2^31)
    // b / grid_cols for b < 2^31 as __umulhi(2 b, div_m) >> div_l (Granlund and Montgomery,
    // "Division by Invariant Integers using Multiplication", PLDI 1994, theorem 4.2 with N = 31:
    // l = ceil(log2 d), m = ceil(2^(31 + l) / d), so 2^(31+l) <= m d < 2^(31+l) + 2^l, and m <
    // 2^32 for d < 2^31): three instructions where the division took about twenty per item.
    std::uint32_t div_m, div_l;
    // log2 of the lanes that share a row of a block (kSegs = 1 only): 1 for 1 x 32 blocks taken as
    // two lanes of 16 (row_blocks_kernel's float32 / float16 FP6 and FP8 launches), else 0.
    std::uint32_t seg_log2;
};

// RowGeom's div_m and div_l for divisor d (1 <= d < 2^31).
inline void set_divisor(RowGeom& g, std::uint32_t d) {
    std::uint32_t l = 0;
    while ((std::uint64_t{1} << l) < d) ++l;
    g.div_m = static_cast<std::uint32_t>(((std::uint64_t{1} << (31 + l)) + d - 1) / d);
    g.div_l = l;
}

struct RowOut {
    std::uint8_t* codes;
    std::uint8_t* scale_codes;
    float* scale;
    float* scale_inv;
};

// Stores the codes of segment [c, c + 16) of row r (its 16 codes in q).
template <bool kPacked>
__device__ __forceinline__ void store_codes(const RowOut& o, const RowGeom& g, bool vec, std::uint32_t r,
                                            std::uint32_t c, const uint4& q) {
    if constexpr (kPacked) {
        const uint2 p = make_uint2(pack_words(q.x, q.y), pack_words(q.z, q.w));
        std::uint8_t* dst = o.codes + static_cast<std::size_t>(r) * (g.cols / 2) + c / 2;
        if (vec) {
            *reinterpret_cast<uint2*>(dst) = p;
        } else {
            const std::uint32_t pw[2] = {p.x, p.y};
#pragma unroll
            for (int k = 0; k < 8; ++k)
                if (c + 2 * k < g.cols) dst[k] = static_cast<std::uint8_t>(pw[k / 4] >> (8 * (k % 4)));
        }
    } else {
        std::uint8_t* dst = o.codes + static_cast<std::size_t>(r) * g.cols + c;
        if (vec) {
            *reinterpret_cast<uint4*>(dst) = q;
        } else {
            const std::uint32_t qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int k = 0; k < 16; ++k)
                if (c + k < g.cols) dst[k] = static_cast<std::uint8_t>(qw[k / 4] >> (8 * (k % 4)));
        }
    }
}

// ---- fake quantisation in one kernel (row_fake_kernel, col_blocks_kernel) -------------------
// fake_quantize_blocks (fake_quantize_blocks.cu) into bf16 is quantize_blocks (row_blocks_kernel
// on the block shapes, formats and paths of kFakePath, all within kFastPath), block_factors_kernel
// where it writes the tensor factor, then dequantize_blocks. Why a kernel that does all three in
// one pass writes the same output and tensor factor bit for bit: per block, it
//  - takes the block's amax, NaN flag, scale and narrow_lane, and its codes (encode_bf16_segment /
//    encode_block_segment with index0 the stream index of the segment's first element, so that
//    stochastic rounding draws the same bits), by the steps of row_blocks_kernel's lane:
//    row_fake_kernel runs the same code (row_blocks_body; the NVFP4 table, Nvfp4Entry, included),
//    col_blocks_kernel holds the block's elements in the order and form such a lane holds them
//    (see there);
//  - writes value(code) times the factor by product_out, the conversion of dequantize_blocks'
//    kernels (dequantize_blocks16_kernel's; dequantize_blocks_kernel's gives the same bits, see
//    product_out), from the tables dequantize_blocks fills for the same format
//    (fill_code_tables<D, BFloat16>), with the factor block_factors_kernel gives where the tensor
//    factor is asked for (block_part: numerics::rule_block_factor of the block's scale_inv and
//    scale byte, as quantize_blocks wrote them), else the block's scale_inv itself;
//  - has thread 0 of CTA 0 write block_factors_kernel's tensor factor, numerics::rule_tensor_factor
//    of the global amax: cuda::amax's, run before the kernel, where the rule reads it (NVFP4, as
//    quantize_row_blocks runs it; the elements' max does not depend on the order they are read
//    in), and 1 for the other rules, whose factor does not read the amax (so the amax the row
//    kernel folds from the blocks is not needed);
// and elements past the tensor's edge are the row kernel's +0 padding and store nothing.
struct ColOut {
    void* out;  // bf16, rows x cols
    bool block_part;
    float* tensor_factor;  // block_part: numerics::rule_tensor_factor, written by thread 0
};

// dequantize_blocks' tables for D's codes into bf16 (fill_code_tables: each code's value as float32
// bits, its own decode in bf16) in shared memory, and the bf16 of a NaN product.
struct Bf16Tables {
    const std::uint32_t* value;
    const BFloat16::storage_t* nan_out;
    BFloat16::storage_t nan_product;
};

template <class D>
__device__ __forceinline__ Bf16Tables bf16_tables() {
    constexpr unsigned kCodes = 1u << D::total_bits;
    __shared__ std::uint32_t value[kCodes];
    __shared__ BFloat16::storage_t nan_out[kCodes];
    fill_code_tables<D, BFloat16>(value, nan_out);
    return {value, nan_out, nan_product_out<BFloat16>()};
}

// The tensor factor of the argument above, from thread 0 of CTA 0 where it is asked for.
__device__ __forceinline__ void write_tensor_factor(const ColOut& o, numerics::ScaleRule r,
                                                    const float* __restrict__ d_global_amax) {
    if (o.tensor_factor && blockIdx.x == 0 && threadIdx.x == 0)
        *o.tensor_factor = numerics::rule_tensor_factor(r, numerics::rule_uses_global_amax(r) ? *d_global_amax : 0.0f);
}

// The block's factor of the argument above: its block part where the tensor factor is asked for,
// else its scale_inv.
__device__ __forceinline__ float block_factor(const ColOut& o, numerics::ScaleRule r, const numerics::BlockScale& bs) {
    return o.block_part ? numerics::rule_block_factor(r, numerics::BlockScale{0.0f, bs.scale_inv, bs.code})
                        : bs.scale_inv;
}

// Stores the fake-quantised segment [c, c + 16) of row r (its 16 codes in q, the block's factor f):
// two 16-byte stores where vec (cols % 16 == 0 and the output 16-byte aligned, so that every
// segment starts on 32 bytes), else one store per element inside the row.
__device__ __forceinline__ void store_bf16(const ColOut& o, const RowGeom& g, bool vec, std::uint32_t r,
                                           std::uint32_t c, const uint4& q, float f, const Bf16Tables& t) {
    using Out = BFloat16::storage_t;
    union {
        uint4 v[2];
        Out e[16];
    } y;
    const std::uint32_t qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
    for (int k = 0; k < 16; ++k) {
        const auto code = static_cast<std::uint8_t>(qw[k / 4] >> (8 * (k % 4)));
        y.e[k] = product_out<BFloat16>(t.value[code], f, t.nan_out[code], t.nan_product);
    }
    Out* dst = static_cast<Out*>(o.out) + static_cast<std::size_t>(r) * g.cols + c;
    if (vec) {
        reinterpret_cast<uint4*>(dst)[0] = y.v[0];
        reinterpret_cast<uint4*>(dst)[1] = y.v[1];
    } else {
#pragma unroll
        for (int k = 0; k < 16; ++k)
            if (c + k < g.cols) dst[k] = y.e[k];
    }
}

// What row_blocks_body writes: the codes (RowOut; packed: two E2M1 codes a byte) and the blocks'
// scales, or the fake-quantised bf16 operand (ColOut).
enum RowStore : int { kStoreCodes, kStorePacked, kStoreBf16 };

// Whether the output takes row_blocks_body's vector stores (with cols % 16 == 0 and the input
// 16-byte aligned): 16-byte codes, 8-byte packed codes, 32-byte bf16 segments (store_bf16).
template <int kStore, class O>
__device__ __forceinline__ bool out_aligned(const O& o) {
    if constexpr (kStore == kStoreBf16)
        return aligned16(o.out);
    else
        return (reinterpret_cast<std::uintptr_t>(o.codes) & (kStore == kStorePacked ? 7u : 15u)) == 0;
}

// Whether a launch of kSegs segments a lane of D from S may split its rows into two lanes
// (RowGeom::seg_log2, quantize_row_blocks' split: 1 x 32 FP6 / FP8 blocks from float32 / float16);
// every other instantiation takes seg_log2 as the compile-time 0 it always is for it, so that the
// issue-bound ones (bf16, E2M1) pay nothing for the step.
template <class S, class D, int kSegs>
constexpr bool kMaySplit = kSegs == 1 && !kBf16Words<S> && !std::is_same_v<D, emu::E2M1>;

// Item s: block b = s >> lanes_log2 (row-major in the block grid), lane w = s & (lanes - 1) of it,
// which holds kSegs segments of 16 elements of the block's row w >> seg_log2: the whole row (1 x 32
// blocks are one lane's, so that the rule and the index arithmetic are paid once per 32 elements),
// or its segment w & (2^seg_log2 - 1) (1 x 32 FP6 / FP8 blocks from float32 / float16: two lanes of
// 16 elements, whose loads are half as far apart; measured faster there). The lanes of a block (its
// block_rows rows, its row's segments) meet in shuffles. Elements past the tensor's edge read as +0
// (which changes no amax) and store nothing. The body of row_blocks_kernel (codes) and
// row_fake_kernel (the bf16 operand, see above), which differ in the kStore parts only.
template <class S, class D, int P, int R, int kStore, int kSegs, class O>
__device__ __forceinline__ void row_blocks_body(const void* __restrict__ in, RowGeom g, ElementCtx ctx,
                                                const std::uint8_t* __restrict__ table, numerics::ScaleParams rule,
                                                const float* __restrict__ d_global_amax, float* amax_out, O o) {
    constexpr bool kFake = kStore == kStoreBf16;
    using T = typename S::storage_t;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    // NVFP4: the block's numbers from its byte, tabulated once (Nvfp4Entry, nvfp4_prologue).
    __shared__ __align__(16) Nvfp4Entry nvfp4_tab[kNvfp4Table<D, kSegs> ? kNvfp4Bytes : 1];
    const Nvfp4Tab nt = nvfp4_prologue<D, R, kNvfp4Table<D, kSegs>>(rule, d_global_amax, ctx, nvfp4_tab);
    Bf16Tables bt;
    if constexpr (kFake) {
        bt = bf16_tables<D>();
        write_tensor_factor(o, rule.rule, d_global_amax);
    }
    const bool vec = g.cols % 16 == 0 && aligned16(in) && out_aligned<kStore>(o);
    const std::uint32_t lanes = 1u << g.lanes_log2;
    const std::uint32_t lane = threadIdx.x & 31;
    const std::uint32_t stride = gridDim.x * blockDim.x;
    const std::uint32_t warp_first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31u;
    std::uint32_t tensor_max = 0;  // amax_out: the blocks' amax bits, as lib's amax_of
    const bool keeps_nan = numerics::rule_amax_keeps_nan(rule.rule);  // torchao's rules
    for (std::uint32_t base = warp_first; base < g.items; base += stride) {
        const std::uint32_t s = base + lane;
        const bool valid = s < g.items;
        const std::uint32_t b = s >> g.lanes_log2, w = s & (lanes - 1u);
        // bi = b / grid_cols (RowGeom::div_m; b < 2^31 on every valid lane, and the others store nothing)
        const std::uint32_t bi = __umulhi(b << 1, g.div_m) >> g.div_l, bj = b - bi * g.grid_cols;
        std::uint32_t row_in_block = w, seg = 0;
        if constexpr (kMaySplit<S, D, kSegs>) {
            row_in_block = w >> g.seg_log2;
            seg = w & ((1u << g.seg_log2) - 1u);
        }
        const std::uint32_t r = bi * g.block_rows + row_in_block;
        const std::uint32_t c0 = (kMaySplit<S, D, kSegs> ? (bj << g.seg_log2) + seg : bj) * (16 * kSegs);
        const bool here = valid && r < g.rows && c0 < g.cols;
        const T* row = static_cast<const T*>(in) + static_cast<std::size_t>(r) * g.cols;
        T e[kSegs][16];              // f32 / f16 inputs
        std::uint32_t wd[kSegs][8];  // bf16 inputs, as loaded (kBf16Words)
        std::uint32_t m;             // max |x| as float32 bits, NaN ignored (as lib's amax_of; common.cuh max_abs)
        bool nan_in = false;         // bf16: an input of the lane is a NaN
        if constexpr (kBf16Words<S>) {
#pragma unroll
            for (int j = 0; j < kSegs; ++j) {
                const std::uint32_t c = c0 + 16 * j;
                if (here && vec && c < g.cols) {
                    const uint4 lo = __ldg(reinterpret_cast<const uint4*>(row + c));
                    const uint4 hi = __ldg(reinterpret_cast<const uint4*>(row + c) + 1);
                    const std::uint32_t v[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
#pragma unroll
                    for (int k = 0; k < 8; ++k) wd[j][k] = v[k];
                } else {
#pragma unroll
                    for (int k = 0; k < 8; ++k) {
                        const std::uint32_t e0 = here && c + 2 * k < g.cols ? row[c + 2 * k] : 0u;
                        const std::uint32_t e1 = here && c + 2 * k + 1 < g.cols ? row[c + 2 * k + 1] : 0u;
                        wd[j][k] = e0 | (e1 << 16);
                    }
                }
            }
            m = bf16_words_amax<kSegs>(wd, nan_in);
        } else {
            float mf = 0.0f;
#pragma unroll
            for (int j = 0; j < kSegs; ++j) {
                const std::uint32_t c = c0 + 16 * j;
                if (here && vec && c < g.cols) {
                    union {
                        uint4 v[Step16<S>::kVecs];
                        T e[16];
                    } u;
#pragma unroll
                    for (int k = 0; k < Step16<S>::kVecs; ++k)
                        u.v[k] = __ldg(reinterpret_cast<const uint4*>(row + c) + k);
#pragma unroll
                    for (int k = 0; k < 16; ++k) e[j][k] = u.e[k];
                } else {
#pragma unroll
                    for (int k = 0; k < 16; ++k) e[j][k] = here && c + k < g.cols ? row[c + k] : T{0};
                }
#pragma unroll
                for (int k = 0; k < 16; ++k) mf = max_abs<S>(mf, e[j][k]);
            }
            m = __float_as_uint(mf);
        }
        for (std::uint32_t d = lanes >> 1; d > 0; d >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
        tensor_max = max(tensor_max, m);
        // A block holding a NaN: its amax is NaN under torchao's rules (numerics::rule_block_amax,
        // as lib's quantize_blocks); the lanes of a 16-row block agree through the shuffles.
        std::uint32_t has_nan = 0;
        if (keeps_nan) {
            if constexpr (kBf16Words<S>)
                has_nan = nan_in ? 1u : 0u;  // is_nan_bits: h & 0x7FFF above 0x7F80
            else
                has_nan = elements_have_nan<S, kSegs>(e) ? 1u : 0u;
            for (std::uint32_t d = lanes >> 1; d > 0; d >>= 1) has_nan |= __shfl_xor_sync(0xFFFFFFFFu, has_nan, d);
        }
        if (!valid) continue;
        const float block_amax = numerics::rule_block_amax(rule.rule, __uint_as_float(m), has_nan != 0u);
        numerics::BlockScale bs;
        NarrowLane bl;
        block_scale_of<D, R>(nt, rule, d_global_amax, block_amax, nan_in, ctx, bs, bl);
        float f = 0.0f;  // kFake: the block's factor
        if constexpr (kFake) {
            f = block_factor(o, rule.rule, bs);
        } else if (w == 0) {
            if (o.scale_codes) o.scale_codes[b] = bs.code;
            if (o.scale) o.scale[b] = bs.scale;
            if (o.scale_inv) o.scale_inv[b] = bs.scale_inv;
        }
#pragma unroll
        for (int j = 0; j < kSegs; ++j) {
            const std::uint32_t c = c0 + 16 * j;
            if (!here || c >= g.cols) continue;
            const std::uint64_t index0 = static_cast<std::uint64_t>(r) * g.cols + c;
            uint4 q;
            if constexpr (kBf16Words<S>)
                q = encode_bf16_segment<D, P, R>(wd[j], bs.scale, bl, ctx, index0);
            else
                q = encode_wide_segment<S, D, P, R, kSegs>(e[j], bs.scale, bl, ctx, index0);
            if constexpr (kFake)
                store_bf16(o, g, vec, r, c, q, f, bt);
            else
                store_codes<kStore == kStorePacked>(o, g, vec, r, c, q);
        }
    }
    if (amax_out) block_amax_atomic(tensor_max, amax_out);  // every thread of the CTA gets here
}

template <class S, class D, int P, int R, bool kPacked, int kSegs>
__global__ void __launch_bounds__(kThreads)
    row_blocks_kernel(const void* __restrict__ in, RowGeom g, ElementCtx ctx, const std::uint8_t* __restrict__ table,
                      numerics::ScaleParams rule, const float* __restrict__ d_global_amax, float* amax_out, RowOut o) {
    row_blocks_body<S, D, P, R, kPacked ? kStorePacked : kStoreCodes, kSegs>(in, g, ctx, table, rule, d_global_amax,
                                                                             amax_out, o);
}

// fake_quantize_blocks into bf16 in one pass: row_blocks_body writing the operand (see above); no
// tensor amax (the factors do not read it where the rule does not read cuda::amax's).
template <class S, class D, int P, int R, int kSegs>
__global__ void __launch_bounds__(kThreads)
    row_fake_kernel(const void* __restrict__ in, RowGeom g, ElementCtx ctx, const std::uint8_t* __restrict__ table,
                    numerics::ScaleParams rule, const float* __restrict__ d_global_amax, ColOut o) {
    row_blocks_body<S, D, P, R, kStoreBf16, kSegs>(in, g, ctx, table, rule, d_global_amax, nullptr, o);
}

// ---- 16 x 16 blocks from bf16: a warp a tile of 16 rows by 256 columns ----------------------
// row_blocks_kernel's mapping gives each lane one row of a block, so that one warp load touches 32
// rows, 32 bytes each; with its arithmetic replaced by a byte shuffle it reached 76.5% of the
// two-pass floor on the H200 (docs/performance.md, cuda/tools/experiments/blocks_io_floor.patch)
// where a plain stream of the same bytes reaches about 100%. Here a warp takes 16 rows (one row of
// blocks) by 256 columns, lane l columns 8 l .. 8 l + 7 of each of the 16 rows: every warp load is
// 512 contiguous bytes of one row, every store 256 (codes) or 128 (packed) contiguous bytes. Lanes
// 2k and 2k + 1 hold block k of the tile (16 rows by 16 columns); a lane's 16 rows are in its
// registers (16 uint4, loaded before any is used), so the block's amax is the lane's max over
// them and one shuffle with its pair (the NaN flag rides in it: a half's magnitude bits above
// 0x7F80). Per block the steps are row_blocks_body's, which give the same codes and scales:
//  - the block's amax: the max of its non-NaN magnitudes, as the shuffles of the 16 row lanes
//    gave it (max_abs does not depend on the order);
//  - the scale: rule_scale's, or the NVFP4 table's entry for rule_nvfp4_byte (Nvfp4Entry);
//  - the codes: row_blocks_body's lane took mx_narrow_bf16_four where its own row held no NaN and
//    else encode_block_segment, which give the same codes (mx_narrow_bf16_four's argument); here
//    every row of a block holding a NaN takes encode_block_segment (the stream indices are the
//    elements' own: r cols + c).
// Elements past the tensor's edge read as +0 (which changes no amax) and store nothing. From bf16
// only, E2M1 only (TE's nvfp4 weights; float32 takes tile16_f32_blocks_kernel below, the other
// 16 x 16 launches keep row_blocks_kernel). H200, fp8kit_cuda_bench 28 20, two rounds
// (docs/performance.md): 72.3, 72.4 -> 81.8, 82.5% of the two-pass floor. A form of this kernel
// shared with float32 (a template over the input type; encode and store steps in a loop over the
// lane's groups) ran slower from bf16 (70.2, 69.9%), and loading the next tile's rows during the
// encode slower still (66.6, 66.7%), so bf16 keeps this one.
constexpr std::uint32_t kBf16TileCols = 256;

struct TileGeom {
    std::uint32_t rows, cols;
    std::uint32_t grid_cols;     // blocks along a row (scale index b = bi grid_cols + bj)
    std::uint32_t tiles_a_row;   // ceil(cols / the tile's columns)
    std::uint32_t tiles;         // ceil(rows / 16) tiles_a_row (< 2^31)
    std::uint32_t div_m, div_l;  // t / tiles_a_row as RowGeom's division
};

// Codes of eight bf16 elements (words w, stream indices index0 ..) at the block's scale, little-endian
// bytes: mx_narrow_bf16_four where l.narrow, else encode_bf16_segment's element steps (on the eight
// and eight +0 that it drops).
template <class D, int P, int R>
__device__ __forceinline__ uint2 encode_bf16_half(const std::uint32_t (&w)[4], float scale, const NarrowLane& l,
                                                  const ElementCtx& c, std::uint64_t index0) {
    if constexpr (kMxNarrow<D> && R < 0) {
        if (l.narrow)
            return make_uint2(mx_narrow_bf16_four<D>(w[0], w[1], l.st), mx_narrow_bf16_four<D>(w[2], w[3], l.st));
    }
    const std::uint32_t w16[8] = {w[0], w[1], w[2], w[3], 0u, 0u, 0u, 0u};
    const NarrowLane none{false, l.st};
    const uint4 q = encode_bf16_segment<D, P, R>(w16, scale, none, c, index0);
    return make_uint2(q.x, q.y);
}

// Stores a lane's 4 kWords codes of row r, columns c .. (q: four codes a word, little-endian;
// inside the tensor where c < cols), packed two a byte or one a byte: one store where vec, else
// byte by byte up to the tensor's edge.
template <bool kPacked, int kWords>
__device__ __forceinline__ void store_tile_codes(const RowOut& o, const TileGeom& g, bool vec, std::uint32_t r,
                                                 std::uint32_t c, const std::uint32_t (&q)[kWords]) {
    static_assert(kWords == 1 || kWords == 2, "a lane's 4 (float32) or 8 (bf16) codes of a row");
    if constexpr (kPacked) {
        using Unit = std::conditional_t<kWords == 2, std::uint32_t, std::uint16_t>;
        const std::uint32_t p = pack_words(q[0], kWords == 2 ? q[kWords - 1] : 0u);
        std::uint8_t* dst = o.codes + static_cast<std::size_t>(r) * (g.cols / 2) + c / 2;
        if (vec) {
            *reinterpret_cast<Unit*>(dst) = static_cast<Unit>(p);
        } else {
#pragma unroll
            for (int k = 0; k < 2 * kWords; ++k)
                if (c + 2 * k < g.cols) dst[k] = static_cast<std::uint8_t>(p >> (8 * k));
        }
    } else {
        std::uint8_t* dst = o.codes + static_cast<std::size_t>(r) * g.cols + c;
        if (vec) {
            if constexpr (kWords == 2)
                *reinterpret_cast<uint2*>(dst) = make_uint2(q[0], q[kWords - 1]);
            else
                *reinterpret_cast<std::uint32_t*>(dst) = q[0];
        } else {
#pragma unroll
            for (int k = 0; k < 4 * kWords; ++k)
                if (c + k < g.cols) dst[k] = static_cast<std::uint8_t>(q[k / 4] >> (8 * (k % 4)));
        }
    }
}

// At most 128 registers (two CTAs a SM): a lane holds 64 words of input.
template <class D, int P, int R, bool kPacked>
__global__ void __launch_bounds__(kThreads, 2)
    tile16_blocks_kernel(const void* __restrict__ in, TileGeom g, ElementCtx ctx,
                         const std::uint8_t* __restrict__ table, numerics::ScaleParams rule,
                         const float* __restrict__ d_global_amax, float* amax_out, RowOut o) {
    using T = BFloat16::storage_t;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    __shared__ __align__(16) Nvfp4Entry nvfp4_tab[kNvfp4Bytes];
    const Nvfp4Tab nt = nvfp4_prologue<D, R>(rule, d_global_amax, ctx, nvfp4_tab);
    constexpr int kStore = kPacked ? kStorePacked : kStoreCodes;
    const bool vec = g.cols % 16 == 0 && aligned16(in) && out_aligned<kStore>(o);
    const std::uint32_t lane = threadIdx.x & 31;
    const std::uint32_t warps = gridDim.x * (blockDim.x / 32);
    const bool keeps_nan = numerics::rule_amax_keeps_nan(rule.rule);
    const T* x = static_cast<const T*>(in);
    std::uint32_t tensor_max = 0;  // amax_out: the blocks' amax bits
    for (std::uint32_t t = (blockIdx.x * blockDim.x + threadIdx.x) >> 5; t < g.tiles; t += warps) {  // warp-uniform
        const std::uint32_t bi = __umulhi(t << 1, g.div_m) >> g.div_l, tc = t - bi * g.tiles_a_row;
        const std::uint32_t c = tc * kBf16TileCols + 8 * lane, r0 = 16 * bi;
        const bool col_in = c < g.cols;
        std::uint32_t wd[16][4];  // row r0 + i: elements c .. c + 7 as loaded (two a word)
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const std::uint32_t r = r0 + i;
            const T* row = x + static_cast<std::size_t>(r) * g.cols;
            const bool in_row = col_in && r < g.rows;
            if (vec) {
                uint4 v = make_uint4(0u, 0u, 0u, 0u);
                if (in_row) v = __ldg(reinterpret_cast<const uint4*>(row + c));
                wd[i][0] = v.x, wd[i][1] = v.y, wd[i][2] = v.z, wd[i][3] = v.w;
            } else {
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    const std::uint32_t e0 = in_row && c + 2 * k < g.cols ? row[c + 2 * k] : 0u;
                    const std::uint32_t e1 = in_row && c + 2 * k + 1 < g.cols ? row[c + 2 * k + 1] : 0u;
                    wd[i][k] = e0 | (e1 << 16);
                }
            }
        }
        // The block's amax (bf16_words_amax over its 16 rows, both lanes of it).
        std::uint32_t mm = 0;
#pragma unroll
        for (int i = 0; i < 16; ++i)
#pragma unroll
            for (int k = 0; k < 4; ++k) mm = __vmaxu2(mm, wd[i][k] & 0x7FFF7FFFu);
        std::uint32_t mh = max(mm & 0xFFFFu, mm >> 16);
        mh = max(mh, __shfl_xor_sync(0xFFFFFFFFu, mh, 1));
        const bool nan_in = mh > 0x7F80u;  // the block holds a NaN (the same on both lanes)
        float mf = 0.0f;
        if (nan_in) {
#pragma unroll
            for (int i = 0; i < 16; ++i)
#pragma unroll
                for (int k = 0; k < 4; ++k) {
                    mf = fmaxf(mf, fabsf(__uint_as_float(wd[i][k] << 16)));
                    mf = fmaxf(mf, fabsf(__uint_as_float(bf16_high(wd[i][k]))));
                }
        }
        const std::uint32_t mfb = max(__float_as_uint(mf), __shfl_xor_sync(0xFFFFFFFFu, __float_as_uint(mf), 1));
        const std::uint32_t m = nan_in ? mfb : mh << 16;
        tensor_max = max(tensor_max, m);
        const std::uint32_t bj = tc * (kBf16TileCols / 16) + (lane >> 1);
        if (bj >= g.grid_cols) continue;  // both lanes of a block outside the tensor
        const float block_amax = numerics::rule_block_amax(rule.rule, __uint_as_float(m), keeps_nan && nan_in);
        numerics::BlockScale bs;
        NarrowLane bl;
        block_scale_of<D, R>(nt, rule, d_global_amax, block_amax, nan_in, ctx, bs, bl);
        if ((lane & 1u) == 0) {
            const std::size_t b = static_cast<std::size_t>(bi) * g.grid_cols + bj;
            if (o.scale_codes) o.scale_codes[b] = bs.code;
            if (o.scale) o.scale[b] = bs.scale;
            if (o.scale_inv) o.scale_inv[b] = bs.scale_inv;
        }
        if (!col_in) continue;
#pragma unroll
        for (int i = 0; i < 16; ++i) {
            const std::uint32_t r = r0 + i;
            if (r >= g.rows) break;
            const uint2 q =
                encode_bf16_half<D, P, R>(wd[i], bs.scale, bl, ctx, static_cast<std::uint64_t>(r) * g.cols + c);
            const std::uint32_t qw[2] = {q.x, q.y};
            store_tile_codes<kPacked>(o, g, vec, r, c, qw);
        }
    }
    if (amax_out) block_amax_atomic(tensor_max, amax_out);  // every thread of the CTA gets here
}

// ---- 16 x 16 E2M1 blocks from float32: a warp a tile of 16 rows by 128 columns -----------------
// tile16_blocks_kernel's mapping for float32 elements: lane l holds columns 4 l .. 4 l + 3 of each
// of the tile's 16 rows (a uint4 a row: every warp load is 512 contiguous bytes of one row), the 4
// adjacent lanes of a block meet in two shuffles for its amax and NaN flag, and the next tile's
// rows load while this one's are encoded (rows 0 .. 7 once their codes are stored, then rows 8 ..
// 15), so that a warp's loads stay in flight through its arithmetic. Per block the steps are
// row_blocks_body's from float32, which give the same codes and scales: the amax is max_abs over
// the block (the order does not matter), with elements_have_nan's flag where the rule keeps NaN
// (torchao's); the scale is rule_scale's or the NVFP4 table's entry; the codes are
// encode_wide_segment's per group of four (mx_narrow_f32_four where the lane allows it, with its
// own NaN test per group, else encode_block_four), at the elements' own stream indices (r cols +
// c). Elements past the tensor's edge read as +0 and store nothing. H200, fp8kit_cuda_bench 28 20,
// two rounds (docs/performance.md): 84.0, 84.5 -> 88.0, 88.2% of the two-pass floor (without the
// next tile's loads in flight: 87.2, 86.8).
constexpr std::uint32_t kF32TileCols = 128;

// Codes of a lane's four float32 elements of one row (bits w, stream indices index0 ..) at the
// block's scale (little-endian bytes).
template <class D, int P, int R>
__device__ __forceinline__ std::uint32_t encode_f32_quarter(const std::uint32_t (&w)[4], float scale,
                                                            const NarrowLane& l, const ElementCtx& c,
                                                            std::uint64_t index0) {
    std::uint32_t q;  // mx_narrow_f32_four's codes where it returns true, else encode_block_four's
    bool done = false;
    if constexpr (kMxNarrow<D> && R < 0) {
        if (l.narrow) done = mx_narrow_f32_four<D>(w, l.st, q);
    }
    Binary32::storage_t e[16] = {};  // encode_block_four's elements (group 0)
#pragma unroll
    for (int k = 0; k < 4; ++k) e[k] = w[k];
    if (!done) q = encode_block_four<Binary32, D, P, R>(e, 0, scale, c, index0);
    return q;
}

// At most 128 registers (two CTAs a SM): a lane holds 64 words of input.
template <class D, int P, int R, bool kPacked>
__global__ void __launch_bounds__(kThreads, 2)
    tile16_f32_blocks_kernel(const void* __restrict__ in, TileGeom g, ElementCtx ctx,
                             const std::uint8_t* __restrict__ table, numerics::ScaleParams rule,
                             const float* __restrict__ d_global_amax, float* amax_out, RowOut o) {
    using T = Binary32::storage_t;
    constexpr std::uint32_t kCols = 4, kLanesABlock = 4;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    __shared__ __align__(16) Nvfp4Entry nvfp4_tab[kNvfp4Bytes];
    const Nvfp4Tab nt = nvfp4_prologue<D, R>(rule, d_global_amax, ctx, nvfp4_tab);
    constexpr int kStore = kPacked ? kStorePacked : kStoreCodes;
    const bool vec = g.cols % 16 == 0 && aligned16(in) && out_aligned<kStore>(o);
    const std::uint32_t lane = threadIdx.x & 31;
    const std::uint32_t warps = gridDim.x * (blockDim.x / 32);
    const bool keeps_nan = numerics::rule_amax_keeps_nan(rule.rule);
    const T* x = static_cast<const T*>(in);
    std::uint32_t tensor_max = 0;  // amax_out: the blocks' amax bits
    // Row r0 + i of the tile at (r0, c): the lane's elements c .. c + 3.
    const auto load_row = [&](std::uint32_t r0, std::uint32_t c, int i, std::uint32_t(&w)[4]) {
        const std::uint32_t r = r0 + i;
        const T* row = x + static_cast<std::size_t>(r) * g.cols;
        const bool in_row = c < g.cols && r < g.rows;
        if (vec) {
            uint4 v = make_uint4(0u, 0u, 0u, 0u);
            if (in_row) v = __ldg(reinterpret_cast<const uint4*>(row + c));
            w[0] = v.x, w[1] = v.y, w[2] = v.z, w[3] = v.w;
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) w[k] = in_row && c + k < g.cols ? row[c + k] : 0u;
        }
    };
    // The tile's row of blocks and its place along the row.
    const auto tile_at = [&](std::uint32_t t, std::uint32_t& bi, std::uint32_t& tc) {
        bi = __umulhi(t << 1, g.div_m) >> g.div_l;
        tc = t - bi * g.tiles_a_row;
    };
    std::uint32_t wd[16][4];  // row r0 + i of the tile: elements c .. c + 3
    const std::uint32_t t0 = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    if (t0 < g.tiles) {
        std::uint32_t bi, tc;
        tile_at(t0, bi, tc);
#pragma unroll
        for (int i = 0; i < 16; ++i) load_row(16 * bi, tc * kF32TileCols + kCols * lane, i, wd[i]);
    }
    for (std::uint32_t t = t0; t < g.tiles; t += warps) {  // warp-uniform
        std::uint32_t bi, tc;
        tile_at(t, bi, tc);
        const std::uint32_t c = tc * kF32TileCols + kCols * lane, r0 = 16 * bi;
        const bool col_in = c < g.cols;
        // The block's amax (max_abs over its 16 rows, all lanes of it) and NaN flag.
        float mf = 0.0f;
        std::uint32_t nan_bits = 0;  // any magnitude above Inf's bits
#pragma unroll
        for (int i = 0; i < 16; ++i)
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                mf = fmaxf(mf, fabsf(__uint_as_float(wd[i][k])));
                if (keeps_nan) nan_bits |= (wd[i][k] & 0x7FFFFFFFu) > 0x7F800000u ? 1u : 0u;
            }
        std::uint32_t m = __float_as_uint(mf);
#pragma unroll
        for (std::uint32_t d = 1; d < kLanesABlock; d <<= 1) {
            m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
            nan_bits |= __shfl_xor_sync(0xFFFFFFFFu, nan_bits, d);
        }
        const bool nan_in = nan_bits != 0u;  // the block holds a NaN (the same on its lanes)
        tensor_max = max(tensor_max, m);
        const std::uint32_t bj = tc * (kF32TileCols / 16) + lane / kLanesABlock;
        const bool block_in = bj < g.grid_cols;  // else every lane of the block is outside the tensor
        const float block_amax = numerics::rule_block_amax(rule.rule, __uint_as_float(m), keeps_nan && nan_in);
        // The narrow steps test each group for a NaN themselves (row_blocks_body's nan_in is false
        // from float32).
        numerics::BlockScale bs;
        NarrowLane bl;
        block_scale_of<D, R>(nt, rule, d_global_amax, block_amax, false, ctx, bs, bl);
        if (block_in && lane % kLanesABlock == 0) {
            const std::size_t b = static_cast<std::size_t>(bi) * g.grid_cols + bj;
            if (o.scale_codes) o.scale_codes[b] = bs.code;
            if (o.scale) o.scale[b] = bs.scale;
            if (o.scale_inv) o.scale_inv[b] = bs.scale_inv;
        }
        std::uint32_t bn = 0, tn = 0;  // the next tile
        const bool next = t + warps < g.tiles;
        if (next) tile_at(t + warps, bn, tn);
#pragma unroll
        for (int h = 0; h < 2; ++h) {  // rows 8 h .. 8 h + 7, then the next tile's same rows
#pragma unroll
            for (int i = 8 * h; i < 8 * h + 8; ++i) {
                const std::uint32_t r = r0 + i;
                if (!col_in || r >= g.rows) continue;  // block_in where col_in
                const std::uint32_t q[1] = {
                    encode_f32_quarter<D, P, R>(wd[i], bs.scale, bl, ctx, static_cast<std::uint64_t>(r) * g.cols + c)};
                store_tile_codes<kPacked>(o, g, vec, r, c, q);
            }
            if (next) {
#pragma unroll
                for (int i = 8 * h; i < 8 * h + 8; ++i) load_row(16 * bn, tn * kF32TileCols + kCols * lane, i, wd[i]);
            }
        }
    }
    if (amax_out) block_amax_atomic(tensor_max, amax_out);  // every thread of the CTA gets here
}

// The geometry of tile16_blocks_kernel (tiles of 16 rows x tile_cols: 256 from bf16) and
// tile16_f32_blocks_kernel (128); false where the tiles' threads reach 2^31.
bool tile_geom(std::size_t rows, std::size_t cols, std::size_t tile_cols, TileGeom& g) {
    const std::size_t tiles_a_row = (cols + tile_cols - 1) / tile_cols, tiles = (rows + 15) / 16 * tiles_a_row;
    if (tiles * 32 >= (std::size_t{1} << 31) || rows >= (std::size_t{1} << 32) || cols >= (std::size_t{1} << 31))
        return false;
    RowGeom d{};
    set_divisor(d, static_cast<std::uint32_t>(tiles_a_row));
    g = TileGeom{static_cast<std::uint32_t>(rows),
                 static_cast<std::uint32_t>(cols),
                 static_cast<std::uint32_t>((cols + 15) / 16),
                 static_cast<std::uint32_t>(tiles_a_row),
                 static_cast<std::uint32_t>(tiles),
                 d.div_m,
                 d.div_l};
    return true;
}

// The instantiations of row_fake_kernel and col_blocks_kernel: f32 and bf16 inputs, and the element
// paths of the NVFP4 and MX recipes fp8kit.torch's block-scaled GEMM takes: E2M1 under every
// rounding the policy reads at run time (nearest-even and the others but stochastic: R < 0) in
// 16-element rows of blocks (kSegs 1: NVFP4's 1 x 16, and for the row kernel TE's 16 x 16 weights)
// and 1 x 32 (MXFP4), stochastic E2M1 in 16-element rows (the nvfp4 preset's gradients), and E4M3
// nearest-even, saturating, canonical NaN in 1 x 32 (kCvt: the mxfp8 and mx-ocp presets' policy).
// Everything else is refused (fake_quantize_blocks_transposed) or takes quantize_blocks and
// dequantize_blocks (fake_quantize_blocks), so that this file's compile time grows by eight kernels
// a kind only: on the 2-core dev machine its sm_90 -O3 build took 36 s of CPU before the column
// kernels and 38-40 s with them; kCvtFix (torchao's E4M3 policy, whose rules the block-scaled
// model does not take) and f16 inputs added about 20 s more.
template <class S, class D, int P, int R, int kSegs>
constexpr bool kFakePath = !std::is_same_v<S, Binary16> && kFastPath<D, P, R> &&
                           (std::is_same_v<D, emu::E2M1>   ? (R < 0 || kSegs == 1)
                            : std::is_same_v<D, emu::E4M3> ? P == kCvt && kSegs == 2
                                                           : false);

// One launch of row_blocks_kernel<S, D, P, R, kPacked, kSegs> with its arguments.
template <class S, class D, int P, int R>
struct RowLaunch {
    unsigned grid;
    std::size_t smem;
    cudaStream_t stream;
    const void* in;
    RowGeom g;
    ElementCtx ctx;
    const std::uint8_t* table;
    numerics::ScaleParams rule;
    const float* d_global_amax;
    float* amax_out;
    RowOut o;

    template <bool kPacked, int kSegs>
    void go() const {
        row_blocks_kernel<S, D, P, R, kPacked, kSegs>
            <<<grid, kThreads, smem, stream>>>(in, g, ctx, table, rule, d_global_amax, amax_out, o);
    }
};

// The cap set_row_blocks_grid_cap sets (0: none).
unsigned g_grid_cap = 0;

// fake_quantize_row_blocks' launches (fake_quantize_blocks_one_kernel_calls).
std::atomic<std::uint64_t> g_row_fake_calls{0};

// Items per thread where several were measured faster (grid_for_path gives one). A thread's first item
// pays the kernel's prologue (the parameters, the vector test, the NVFP4 rules' 1 / global amax
// step) and its last the epilogue (the tensor amax's CTA reduction): in nvcc 13.0's sm_90 code, 72
// of the 432 instructions a bf16 NVFP4 1 x 16 thread of one item issues on its common path (27.0 per
// element; the loop's body is 360, 22.5), 76 of 636 for bf16 MXFP4 (1 x 32: 19.9, body 17.5), and
// from bf16 these kernels are bound by issue, not by bandwidth. With 8 items a thread that is 0.56
// and 0.30 instructions per element.
constexpr std::size_t kItemsPerThread = 8;

// Whether a launch takes several items a thread: the NVFP4 rules (their prologue holds the
// 1 / global amax step) from every input type, and E2M1 from bf16. Measured on the H200 (2^28
// elements, both grids' programs alternately in one call; docs/performance.md): faster there by
// 3-10 %, and slower by 4-7 % for MXFP4 / MXFP6 / MXFP8 from float32 and by about 1 % for MXFP6 /
// MXFP8 from bf16, which keep one item a thread.
bool several_items(const BlockSpec& spec, Wide from) {
    return numerics::rule_uses_global_amax(spec.rule) || (spec.format == Format::e2m1 && from == Wide::bf16);
}

// The grid of row_blocks_kernel on path (P, R): stochastic rounding, and launches that do not take
// several items (several_items), as grid_for_path; the others up to kItemsPerThread items a
// thread, but never fewer CTAs than a wave of 8 a SM (grid_for) where there are items for them, so
// that a tensor of a few waves still fills the device.
template <int P, int R>
unsigned row_blocks_grid(std::size_t items, bool several) {
    constexpr bool kStochastic = P == kSrCvt || P == kSrTable || R == static_cast<int>(emu::Rounding::stochastic);
    unsigned grid = grid_for_path<P, R>(items);
    if (several && !kStochastic) grid = grid_up_to_items(items, kItemsPerThread);
    return g_grid_cap != 0 && grid > g_grid_cap ? g_grid_cap : grid;
}

// The geometry of row_blocks_body for blocks of 1 or 16 rows by 16 or 32 columns and a tensor of
// rows x cols, both nonzero, with two lanes a row of a 1 x 32 block where split (seg_log2 1; the
// launch's kSegs is then 1); false where the item count reaches 2^31 or cols does.
bool row_geom(const BlockSpec& spec, std::size_t rows, std::size_t cols, bool split, RowGeom& g) {
    const std::size_t grid_rows = (rows + spec.block_rows - 1) / spec.block_rows;
    const std::size_t grid_cols = (cols + spec.block_cols - 1) / spec.block_cols;
    const std::uint32_t seg_log2 = split ? 1 : 0;
    const std::uint32_t lanes_log2 = (spec.block_rows == 16 ? 4 : 0) + seg_log2;
    const std::size_t items = (grid_rows * grid_cols) << lanes_log2;
    if (items >= (std::size_t{1} << 31) || rows >= (std::size_t{1} << 32) || cols >= (std::size_t{1} << 31))
        return false;
    g = RowGeom{static_cast<std::uint32_t>(rows),
                static_cast<std::uint32_t>(cols),
                static_cast<std::uint32_t>(spec.block_rows),
                lanes_log2,
                static_cast<std::uint32_t>(grid_cols),
                static_cast<std::uint32_t>(items),
                0,
                0,
                seg_log2};
    set_divisor(g, static_cast<std::uint32_t>(grid_cols));
    return true;
}

}  // namespace

bool quantize_row_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                         std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                         float* d_scale_inv, float* d_global_amax, std::uint64_t seed, cudaStream_t stream) {
    if (!(spec.block_rows == 1 || spec.block_rows == 16) || !(spec.block_cols == 16 || spec.block_cols == 32))
        return false;
    if (rows == 0 || cols == 0) {
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(d_global_amax, 0, sizeof(float), stream));  // amax of nothing: +0
        return true;
    }
    // 1 x 32 blocks of FP6 and FP8 from float32 / float16: two lanes of 16 a block
    // (RowGeom::seg_log2). Measured on the H200 (docs/performance.md): MXFP8 from float32 87.5 ->
    // 93.5% of copy, MXFP6 84 -> 85%, but packed MXFP4 82.8 -> 68.6%, which keeps one lane a
    // block.
    const bool wide = spec.block_cols == 32;
    const bool split = wide && spec.block_rows == 1 && from != Wide::bf16 && spec.format != Format::e2m1;
    RowGeom g;
    if (!row_geom(spec, rows, cols, split, g)) return false;
    const std::size_t items = g.items;
    const int segs = wide && !split ? 2 : 1;  // a lane's segments (kSegs)
    const numerics::ScaleParams rule =
        numerics::make_scale_params(spec.rule, spec.format, spec.epsilon, spec.pow2, spec.value_for_inf, 0);
    const RowOut o{d_codes, d_scale_codes, d_scale, d_scale_inv};
    bool fast = false;
    with_cast_format(spec.format, [&](auto di) {
        with_element_path(spec.format, spec.policy, [&](auto p, auto r) {
            fast = kFastPath<std::decay_t<decltype(di)>, decltype(p)::value, decltype(r)::value>;
        });
        return 0;
    });
    if (!fast) return false;
    // The global amax: a pass of its own before the blocks where the rule reads it (NVFP4),
    // else the blocks' amax folded into it by the kernel (one atomicMax per CTA on zeroed bits).
    float* amax_out = nullptr;
    if (numerics::rule_uses_global_amax(spec.rule)) {
        fp8kit::cuda::amax(from, in, rows * cols, d_global_amax, stream);
    } else {
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(d_global_amax, 0, sizeof(float), stream));
        amax_out = d_global_amax;
    }
    const std::uint8_t* table = element_table(spec.format, spec.policy, stream);
    const ElementCtx ctx{spec.policy, nullptr, seed};
    // 16 x 16 E2M1 blocks from bf16 and float32 (TE's nvfp4 weights): tile16_blocks_kernel and
    // tile16_f32_blocks_kernel, whose loads are coalesced along the rows.
    TileGeom tg{};
    const bool tile = spec.block_rows == 16 && spec.block_cols == 16 && (from == Wide::bf16 || from == Wide::f32) &&
                      spec.format == Format::e2m1 &&
                      tile_geom(rows, cols, from == Wide::bf16 ? kBf16TileCols : kF32TileCols, tg);
    bool launched = false;
    with_input(from, [&](auto si) {
        with_cast_format(spec.format, [&](auto di) {
            // The types by std::decay_t: cudafe++ writes D's uses in this nested lambda as
            // decltype(di), which g++ (12) then took as a reference type in the host pass, so the
            // host launched row_blocks_kernel<S, D&, ...> that the device pass never instantiated
            // (cudaLaunchKernel(0, ...): "invalid device function") and is_same<D, E2M1> was false
            // on the host (packed E2M1 requests took the unpacked kernel).
            using S = std::decay_t<decltype(si)>;
            using D = std::decay_t<decltype(di)>;
            with_element_path(spec.format, spec.policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                if constexpr (kFastPath<D, P, R>) {
                    launched = true;
                    constexpr std::size_t smem = element_smem<D, P>();
                    const unsigned grid = row_blocks_grid<P, R>(items, several_items(spec, from));
                    // Each launch names its kernel with literal template arguments
                    // (tests/gpu/host_launches.sh checks that the device pass compiled each one;
                    // tests/gpu/test_fp4_fp6_kernels.cpp guards the bytes past the packed size).
                    if constexpr (std::is_same_v<D, emu::E2M1> &&
                                  (std::is_same_v<S, Binary32> || std::is_same_v<S, BFloat16>)) {
                        if (tile) {  // a warp a tile of 16 rows x 128 (f32) or 256 (bf16) columns
                            const unsigned tgrid =
                                row_blocks_grid<P, R>(std::size_t{tg.tiles} * 32, several_items(spec, from));
                            if constexpr (std::is_same_v<S, Binary32>) {
                                if (packed)
                                    tile16_f32_blocks_kernel<D, P, R, true><<<tgrid, kThreads, smem, stream>>>(
                                        in, tg, ctx, table, rule, d_global_amax, amax_out, o);
                                else
                                    tile16_f32_blocks_kernel<D, P, R, false><<<tgrid, kThreads, smem, stream>>>(
                                        in, tg, ctx, table, rule, d_global_amax, amax_out, o);
                            } else {
                                if (packed)
                                    tile16_blocks_kernel<D, P, R, true><<<tgrid, kThreads, smem, stream>>>(
                                        in, tg, ctx, table, rule, d_global_amax, amax_out, o);
                                else
                                    tile16_blocks_kernel<D, P, R, false><<<tgrid, kThreads, smem, stream>>>(
                                        in, tg, ctx, table, rule, d_global_amax, amax_out, o);
                            }
                            return;
                        }
                    }
                    const RowLaunch<S, D, P, R> run{grid,  smem, stream,        in,       g, ctx,
                                                    table, rule, d_global_amax, amax_out, o};
                    if constexpr (std::is_same_v<D, emu::E2M1>) {
                        if (packed && segs == 2)
                            run.template go<true, 2>();
                        else if (packed)
                            run.template go<true, 1>();
                        else if (segs == 2)
                            run.template go<false, 2>();
                        else
                            run.template go<false, 1>();
                    } else {
                        if (segs == 2)
                            run.template go<false, 2>();
                        else
                            run.template go<false, 1>();
                    }
                }
            });
            return 0;
        });
    });
    check_launch("row_blocks_kernel");
    return launched;
}

namespace {

// Whether row_fake_kernel and col_blocks_kernel have an instantiation for spec's element path from
// `from` (kFakePath), so that the callers launch nothing, the global amax included, where they
// have none.
bool has_fake_path(const BlockSpec& spec, Wide from) {
    const bool wide = spec.block_cols == 32;
    bool path = false;
    with_input(from, [&](auto si) {
        with_cast_format(spec.format, [&](auto di) {
            using S = std::decay_t<decltype(si)>;
            using D = std::decay_t<decltype(di)>;
            with_element_path(spec.format, spec.policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                path = wide ? kFakePath<S, D, P, R, 2> : kFakePath<S, D, P, R, 1>;
            });
            return 0;
        });
    });
    return path;
}

}  // namespace

bool fake_quantize_row_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                              void* d_out, float* d_tensor_factor, float* d_global_amax, std::uint64_t seed,
                              cudaStream_t stream) {
    const bool shape = (spec.block_rows == 1 && (spec.block_cols == 16 || spec.block_cols == 32)) ||
                       (spec.block_rows == 16 && spec.block_cols == 16);
    if (!shape || spec.columnwise_rht || rows == 0 || cols == 0) return false;
    if (!(spec.format == Format::e2m1 || spec.format == Format::e4m3) || !(from == Wide::f32 || from == Wide::bf16))
        return false;
    RowGeom g;
    if (!row_geom(spec, rows, cols, false, g)) return false;
    const bool wide = spec.block_cols == 32;
    if (!has_fake_path(spec, from)) return false;
    // The global amax where the rule reads it (NVFP4), before the blocks, as quantize_row_blocks.
    if (numerics::rule_uses_global_amax(spec.rule)) fp8kit::cuda::amax(from, in, rows * cols, d_global_amax, stream);
    const numerics::ScaleParams rule =
        numerics::make_scale_params(spec.rule, spec.format, spec.epsilon, spec.pow2, spec.value_for_inf, 0);
    const std::uint8_t* table = element_table(spec.format, spec.policy, stream);
    const ElementCtx ctx{spec.policy, nullptr, seed};
    const ColOut o{d_out, d_tensor_factor != nullptr, d_tensor_factor};
    bool launched = false;
    with_input(from, [&](auto si) {
        with_cast_format(spec.format, [&](auto di) {
            using S = std::decay_t<decltype(si)>;  // std::decay_t: see quantize_row_blocks
            using D = std::decay_t<decltype(di)>;
            with_element_path(spec.format, spec.policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                constexpr std::size_t smem = element_smem<D, P>();
                const unsigned grid = row_blocks_grid<P, R>(g.items, several_items(spec, from));
                // Literal template arguments per launch (tests/gpu/host_launches.sh).
                if constexpr (kFakePath<S, D, P, R, 2>) {
                    if (wide) {
                        launched = true;
                        row_fake_kernel<S, D, P, R, 2>
                            <<<grid, kThreads, smem, stream>>>(in, g, ctx, table, rule, d_global_amax, o);
                    }
                }
                if constexpr (kFakePath<S, D, P, R, 1>) {
                    if (!wide) {
                        launched = true;
                        row_fake_kernel<S, D, P, R, 1>
                            <<<grid, kThreads, smem, stream>>>(in, g, ctx, table, rule, d_global_amax, o);
                    }
                }
            });
            return 0;
        });
    });
    if (!launched) return false;
    check_launch("row_fake_kernel");
    g_row_fake_calls.fetch_add(1, std::memory_order_relaxed);
    return true;
}

namespace {

// ---- fake quantisation of a transposed operand (fake_quantize_blocks_transposed) -----------
// X is rows x cols, row-major; the operand is X^T (cols x rows) under 1 x B blocks (B = 16 * kSegs):
// block bi of X^T's row c is X's rows [B bi, B bi + B) of column c. Item s is that block for
// bi = s / cols, c = s % cols (RowGeom's division with grid_cols = cols), so the lanes of a warp
// take adjacent columns and each of their loads and stores (at stride cols) is coalesced.
// Why the output is (fake_quantize_blocks(X^T))^T bit for bit: the argument above the fused
// kernels (row_fake_kernel), for X^T's blocks, where this kernel holds a block's elements in the
// order and form row_blocks_kernel's lane holds them: element k of segment j is
// X^T[c][B bi + 16 j + k] = X[B bi + 16 j + k][c]; bf16 as the words that lane assembles where it
// cannot take the 16-byte loads; rows past the edge as +0, the row kernel's padding of X^T's
// partial last block. So the amax (bf16_words_amax / elements_amax; the row kernel folds the same
// max_abs in as it loads), the NaN flag and numerics::rule_block_amax are the row kernel's; the
// scale is numerics::rule_scale's with the tensor's numbers (the row kernel's fallback; its NVFP4
// table gives rule_scale's result, Nvfp4Entry); and index0 = c rows + B bi + 16 j is the stream
// index of X^T's element (c, B bi + 16 j) (blocks.hpp: element (r', c') of X^T, whose rows are
// `rows` long, has index r' rows + c').
// The body of col_blocks_kernel: X^T's fake-quantised operand in X's layout.
template <class S, class D, int P, int R, int kSegs>
__device__ __forceinline__ void col_blocks_body(const void* __restrict__ in, RowGeom g, ElementCtx ctx,
                                                const std::uint8_t* __restrict__ table, numerics::ScaleParams rule,
                                                const float* __restrict__ d_global_amax, ColOut o) {
    using T = typename S::storage_t;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    const Bf16Tables bt = bf16_tables<D>();
    numerics::ScaleParams tr = rule;
    if (numerics::rule_uses_global_amax(rule.rule)) numerics::set_global_amax(tr, *d_global_amax);
    write_tensor_factor(o, rule.rule, d_global_amax);
    const bool keeps_nan = numerics::rule_amax_keeps_nan(rule.rule);  // torchao's rules
    const T* x = static_cast<const T*>(in);
    BFloat16::storage_t* out = static_cast<BFloat16::storage_t*>(o.out);
    const std::uint32_t stride = gridDim.x * blockDim.x;
    for (std::uint32_t s = blockIdx.x * blockDim.x + threadIdx.x; s < g.items; s += stride) {
        const std::uint32_t bi = __umulhi(s << 1, g.div_m) >> g.div_l, c = s - bi * g.cols;
        const std::uint32_t r0 = bi * (16 * kSegs);
        T e[kSegs][16];              // f32 / f16 inputs
        std::uint32_t wd[kSegs][8];  // bf16 inputs, as the row kernel's words (kBf16Words)
        std::uint32_t m;
        bool nan_in = false;
        if constexpr (kBf16Words<S>) {  // the words straight from the loads
#pragma unroll
            for (int j = 0; j < kSegs; ++j)
#pragma unroll
                for (int k = 0; k < 8; ++k) {
                    const std::uint32_t r = r0 + 16 * j + 2 * k;
                    const std::uint32_t e0 = r < g.rows ? x[static_cast<std::size_t>(r) * g.cols + c] : 0u;
                    const std::uint32_t e1 = r + 1 < g.rows ? x[static_cast<std::size_t>(r + 1) * g.cols + c] : 0u;
                    wd[j][k] = e0 | (e1 << 16);
                }
            m = bf16_words_amax<kSegs>(wd, nan_in);
        } else {
#pragma unroll
            for (int j = 0; j < kSegs; ++j)
#pragma unroll
                for (int k = 0; k < 16; ++k) {
                    const std::uint32_t r = r0 + 16 * j + k;
                    e[j][k] = r < g.rows ? x[static_cast<std::size_t>(r) * g.cols + c] : T{0};
                }
            m = elements_amax<S, kSegs>(e);
        }
        bool has_nan = false;
        if (keeps_nan) {
            if constexpr (kBf16Words<S>)
                has_nan = nan_in;
            else
                has_nan = elements_have_nan<S, kSegs>(e);
        }
        const float block_amax = numerics::rule_block_amax(rule.rule, __uint_as_float(m), has_nan);
        const numerics::BlockScale bs = numerics::rule_scale(tr, block_amax);
        const NarrowLane bl = narrow_lane<D, R>(nan_in, bs.scale, ctx);
        const float f = block_factor(o, rule.rule, bs);
#pragma unroll
        for (int j = 0; j < kSegs; ++j) {
            const std::uint32_t rj = r0 + 16 * j;
            if (rj >= g.rows) continue;
            const std::uint64_t index0 = static_cast<std::uint64_t>(c) * g.rows + rj;
            uint4 q;
            if constexpr (kBf16Words<S>)
                q = encode_bf16_segment<D, P, R>(wd[j], bs.scale, bl, ctx, index0);
            else
                q = encode_wide_segment<S, D, P, R, kSegs>(e[j], bs.scale, bl, ctx, index0);
            const std::uint32_t qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                const auto code = static_cast<std::uint8_t>(qw[k / 4] >> (8 * (k % 4)));
                if (rj + k < g.rows)
                    out[static_cast<std::size_t>(rj + k) * g.cols + c] =
                        product_out<BFloat16>(bt.value[code], f, bt.nan_out[code], bt.nan_product);
            }
        }
    }
}

template <class S, class D, int P, int R, int kSegs>
__global__ void __launch_bounds__(kThreads)
    col_blocks_kernel(const void* __restrict__ in, RowGeom g, ElementCtx ctx, const std::uint8_t* __restrict__ table,
                      numerics::ScaleParams rule, const float* __restrict__ d_global_amax, ColOut o) {
    col_blocks_body<S, D, P, R, kSegs>(in, g, ctx, table, rule, d_global_amax, o);
}

// ---- TE's column-wise copy with its transform applied in the cast -------------------------------
// quantize_blocks with spec.columnwise_rht (issue 48): the codes and scales of quantize_blocks on
// C = te_rht16_columnwise(X) (cols x rows, random signs), without C being made. rows % 16 == 0, so
// C's 1 x 16 block (c, bi), bi < rows / 16, is X's rows 16 bi .. 16 bi + 15 of column c, whole.
//
// The work of rht_col_blocks_kernel: tiles of 32 columns of X by kRhtTileGroups = 16 groups of 16
// rows, a CTA's each, two blocks a thread: warp w takes groups bi0 + w and bi0 + w + 8 and lane l
// column c0 + l (so each of the warp's loads of a row of X is coalesced), and each thread stages
// its blocks' codes and scale bytes in shared memory; after a barrier the CTA writes C's rows
// c0 .. c0 + 31 from there, 8-byte pieces of each row's run of codes (128 bytes packed, 256 bytes
// not) to adjacent threads, and each row's 16 scale bytes as two 8-byte pieces. (With one block a
// thread and adjacent lanes on adjacent columns as well, adjacent lanes wrote C's rows rows / 2
// bytes apart, 8 bytes each, and one scale byte rows / 16 bytes apart. Two blocks a thread halve
// the tile's own instructions a block, its coordinates, barriers and stores' addresses: with 8
// groups a tile and one block a thread they took about 7 of the 34 instructions an element of the
// bf16 kernel's common path, nvcc 13.0, sm_90.) Tiles go along C's rows first (tile t: groups
// 16 (t % tiles a row) .., columns 32 (t / tiles a row) ..), so consecutive CTAs write adjacent runs
// of the same 32 rows of C. Only which thread takes a block and how its bytes reach memory differ
// from that kernel; every output keeps its bits: rht_block below is its per-block code, and each
// byte lands at the address it stored the byte to (rht_store_tile).
constexpr std::uint32_t kRhtWarps = kThreads / 32, kRhtTileGroups = 2 * kRhtWarps;

// C's block (c, bi): its 16 codes in q (element k in byte k % 4 of word k / 4, as
// encode_*_segment give them) and its BlockScale. Why these are the current path's
// (te_rht16_columnwise into a copy, then quantize_blocks on it: row_blocks_kernel on C's 1 x 16
// blocks, cuda::amax on C first where the rule reads the global amax) bit for bit:
//  - C's block is C[c][16 bi .. 16 bi + 15], which rht16_kernel computes as one group, rht16_round<S>
//    of X's rows 16 bi .. of column c; this calls the same function on the same 16 elements (random
//    signs, as with_rht_columnwise_copy passes), so it holds C's block exactly, in S, as elements
//    (f32) or as the words a row-kernel lane assembles from C's row (bf16: element 2k low, 2k + 1
//    high; rht16_round_bf16_words: rht16_round's sums by the same rht16_sums_span, a pair of them
//    rounded by one cvt.rn.bf16x2.f32, which rounds each half as rht16_round's cvt.rn.bf16.f32);
//  - from there the steps are col_blocks_kernel's, which are the row kernel's on a block held so
//    (the argument above col_blocks_body): amax, NaN flag, rule_block_amax,
//    rule_scale with the tensor's numbers (the row kernel's NVFP4 table gives rule_scale's result,
//    Nvfp4Entry), narrow_lane, and the codes by encode_bf16_segment / encode_wide_segment with
//    index0 = c rows + 16 bi, the stream index of C's element (c, 16 bi) (C's rows are `rows`
//    long), so stochastic rounding draws the copy's bits whichever thread takes the block.
//  - the block's scale and narrow_lane's result come from the NVFP4 table where the rule is one of
//    NVFP4's and the byte below 128, as in row_blocks_body (Nvfp4Entry: rule_scale's result and
//    narrow_lane's for the byte), else from rule_scale and narrow_lane themselves.
// The loads walk a pointer down the column (one address add a row, not the row's 64-bit product).
template <class S, class D, int P, int R>
__device__ __forceinline__ numerics::BlockScale rht_block(const typename S::storage_t* __restrict__ x, const RowGeom& g,
                                                          std::uint32_t c, std::uint32_t bi, const ElementCtx& ctx,
                                                          const numerics::ScaleParams& rule, const Nvfp4Tab& nt,
                                                          const float* d_global_amax, bool keeps_nan, uint4& q) {
    using T = typename S::storage_t;
    T e[1][16];  // X's group, then C's block
    const T* xp = x + static_cast<std::size_t>(16 * bi) * g.cols + c;
#pragma unroll
    for (int k = 0; k < 16; ++k, xp += g.cols) e[0][k] = *xp;
    std::uint32_t wd[1][8];  // bf16: C's block as the row kernel's words
    if constexpr (kBf16Words<S>) {
        std::uint32_t xw[8];  // X's group as words, for its span
#pragma unroll
        for (int k = 0; k < 8; ++k) xw[k] = e[0][2 * k] | (static_cast<std::uint32_t>(e[0][2 * k + 1]) << 16);
        rht16_round_bf16_words([&](int i) { return e[0][i]; }, rht_span_bf16_words(xw), wd[0]);
    } else {
        rht16_round<S>([&](int i) { return e[0][i]; }, true, [&](int j, T y) { e[0][j] = y; });
    }
    std::uint32_t m;
    bool nan_in = false, has_nan = false;
    if constexpr (kBf16Words<S>) {
        m = bf16_words_amax<1>(wd, nan_in);
        has_nan = keeps_nan && nan_in;
    } else {
        m = elements_amax<S, 1>(e);
        if (keeps_nan) has_nan = elements_have_nan<S, 1>(e);
    }
    const float block_amax = numerics::rule_block_amax(rule.rule, __uint_as_float(m), has_nan);
    numerics::BlockScale bs;
    NarrowLane bl;
    block_scale_of<D, R>(nt, rule, d_global_amax, block_amax, nan_in, ctx, bs, bl);
    const std::uint64_t index0 = static_cast<std::uint64_t>(c) * g.rows + 16 * bi;
    if constexpr (kBf16Words<S>)
        q = encode_bf16_segment<D, P, R>(wd[0], bs.scale, bl, ctx, index0);
    else
        q = encode_wide_segment<S, D, P, R, 1>(e[0], bs.scale, bl, ctx, index0);
    return bs;
}

// Stores bytes 0 .. n - 1 of v (little-endian: v.x's first) at dst, n <= 8: one 8-byte store where
// n is 8 and dst 8-byte aligned, else one store a byte (an output pointer that is not, a partial
// run of scale bytes), the same bytes at the same addresses.
__device__ __forceinline__ void store_bytes8(std::uint8_t* dst, uint2 v, std::uint32_t n) {
    if (n == 8 && (reinterpret_cast<std::uintptr_t>(dst) & 7u) == 0) {
        *reinterpret_cast<uint2*>(dst) = v;
        return;
    }
    for (std::uint32_t k = 0; k < n; ++k) dst[k] = static_cast<std::uint8_t>((k < 4 ? v.x : v.y) >> (8 * (k % 4)));
}

// A CTA's staging: each of its 32 rows of C (lane l's column) holds the tile's codes as 8-byte
// units (a block's packed codes, or half of its unpacked ones), then its scale bytes. The odd row
// length in units (kUnits + 1) puts the 16 lanes of each half-warp's 8-byte stores (a warp's: one
// unit in each of 32 rows) in different banks.
template <bool kPacked>
struct RhtStage {
    static constexpr std::uint32_t kUnitsPerBlock = kPacked ? 1 : 2;
    static constexpr std::uint32_t kUnits = kRhtTileGroups * kUnitsPerBlock;
    static constexpr std::uint32_t kScaleUnits = kRhtTileGroups / 8;
    uint2 codes[32][kUnits + 1];
    uint2 scale_codes[32][kScaleUnits];  // byte j of row l: block j of the tile
};
static_assert(kRhtTileGroups % 8 == 0, "a row's scale bytes of a tile are whole 8-byte units");

// Writes the staged tile (columns c0 .., groups bi0 .. bi0 + n - 1) to C's codes and scale bytes.
// Row c of C's codes starts at c rows / 2 (packed) or c rows, so block bi's 8 or 16 bytes start at
// 8 bi or 16 bi in it, as store_codes put them (rows / 16 blocks a row); its scale byte is at
// c (rows / 16) + bi, the row kernel's block index of C's block (c, bi). Thread i stores the 8-byte
// units u = i, i + 256, .. of the tile (row u / kUnits, unit u % kUnits of the row's run):
// adjacent threads write adjacent units of a row; thread i < 64 row i / 2's scale unit i % 2 (its
// bytes of blocks 8 (i % 2) ..). A whole tile (16 groups, 32 columns) with 8-byte
// aligned codes takes plain 8-byte stores (every unit is 8-byte aligned: rows / 2 and 8 bi are
// multiples of 8); an edge tile or unaligned codes take each unit inside the tensor by
// store_bytes8.
template <bool kPacked>
__device__ __forceinline__ void rht_store_tile(const RhtStage<kPacked>& st, const RowOut& o, const RowGeom& g,
                                               std::uint32_t c0, std::uint32_t bi0, std::uint32_t n) {
    using St = RhtStage<kPacked>;
    constexpr std::uint32_t kSteps = 32 * St::kUnits / kThreads, kRowsAStep = kThreads / St::kUnits;
    const std::uint32_t r = threadIdx.x / St::kUnits, k = threadIdx.x % St::kUnits;
    const std::size_t row_bytes = kPacked ? g.rows / 2 : g.rows;
    std::uint8_t* dst = o.codes + (c0 + r) * row_bytes + 8 * (bi0 * St::kUnitsPerBlock + k);
    if (n == kRhtTileGroups && c0 + 32 <= g.cols && (reinterpret_cast<std::uintptr_t>(o.codes) & 7u) == 0) {
#pragma unroll
        for (std::uint32_t i = 0; i < kSteps; ++i)
            *reinterpret_cast<uint2*>(dst + i * kRowsAStep * row_bytes) = st.codes[r + i * kRowsAStep][k];
    } else {
#pragma unroll
        for (std::uint32_t i = 0; i < kSteps; ++i)
            if (c0 + r + i * kRowsAStep < g.cols && k < n * St::kUnitsPerBlock)
                store_bytes8(dst + i * kRowsAStep * row_bytes, st.codes[r + i * kRowsAStep][k], 8);
    }
    const std::uint32_t sr = threadIdx.x / St::kScaleUnits, su = threadIdx.x % St::kScaleUnits;
    if (o.scale_codes && threadIdx.x < 32 * St::kScaleUnits && c0 + sr < g.cols && 8 * su < n)
        store_bytes8(o.scale_codes + static_cast<std::size_t>(c0 + sr) * (g.rows / 16) + bi0 + 8 * su,
                     st.scale_codes[sr][su], min(8u, n - 8 * su));
}

// rht_col_blocks_kernel's work (see above the tiles). gt: X's shape (rows, cols), items = the
// tile count and grid_cols = the tiles along a row of C (RowGeom's division, t / grid_cols).
template <class S, class D, int P, int R, bool kPacked>
__device__ __forceinline__ void rht_col_tiles(const void* __restrict__ in, RowGeom gt, ElementCtx ctx,
                                              const std::uint8_t* __restrict__ table, numerics::ScaleParams rule,
                                              const float* __restrict__ d_global_amax, RowOut o) {
    static_assert(kThreads == 256, "a tile of 16 groups, two a warp");
    using T = typename S::storage_t;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    __shared__ RhtStage<kPacked> st;
    __shared__ __align__(16) Nvfp4Entry nvfp4_tab[kNvfp4Bytes];
    const Nvfp4Tab nt = nvfp4_prologue<D, R>(rule, d_global_amax, ctx, nvfp4_tab);  // as row_blocks_body's
    const bool keeps_nan = numerics::rule_amax_keeps_nan(rule.rule);                // torchao's rules
    const T* x = static_cast<const T*>(in);
    const std::uint32_t lane = threadIdx.x & 31, w = threadIdx.x >> 5;  // the warp's groups: w, w + 8
    const std::uint32_t blocks_a_row = gt.rows / 16;
    for (std::uint32_t t = blockIdx.x; t < gt.items; t += gridDim.x) {  // CTA-uniform: every thread meets the barriers
        const std::uint32_t tc = __umulhi(t << 1, gt.div_m) >> gt.div_l;
        const std::uint32_t bi0 = (t - tc * gt.grid_cols) * kRhtTileGroups, c0 = 32 * tc;
        const std::uint32_t n = min(kRhtTileGroups, blocks_a_row - bi0), c = c0 + lane;
#pragma unroll 1
        for (std::uint32_t j = w; j < n && c < gt.cols; j += kRhtWarps) {
            const std::uint32_t bi = bi0 + j;
            uint4 q;
            const numerics::BlockScale bs =
                rht_block<S, D, P, R>(x, gt, c, bi, ctx, rule, nt, d_global_amax, keeps_nan, q);
            if constexpr (kPacked) {
                st.codes[lane][j] = make_uint2(pack_words(q.x, q.y), pack_words(q.z, q.w));  // as store_codes
            } else {
                st.codes[lane][2 * j] = make_uint2(q.x, q.y);
                st.codes[lane][2 * j + 1] = make_uint2(q.z, q.w);
            }
            reinterpret_cast<std::uint8_t*>(st.scale_codes[lane])[j] = bs.code;
            const std::size_t b = static_cast<std::size_t>(c) * blocks_a_row + bi;  // C's block (c, bi)
            if (o.scale) o.scale[b] = bs.scale;
            if (o.scale_inv) o.scale_inv[b] = bs.scale_inv;
        }
        __syncthreads();
        rht_store_tile<kPacked>(st, o, gt, c0, bi0, n);
        __syncthreads();  // the stores' reads of st before the next tile's writes
    }
}

// Why the stores and *d_global_amax are the current path's:
//  - codes and scales: rht_block (above) for each block and rht_store_tile's addresses;
//  - *d_global_amax: the current path writes C's amax under every rule (cuda::amax of C where the
//    rule reads it; else the row kernel's fold of its blocks' amax, the same max).
//    rht_col_amax_kernel (below) writes it before this kernel from the same blocks of C
//    (rht16_sums again), each block's amax as rht_block's (max_abs, NaN ignored; rht16_amax_bits
//    rounds the largest magnitude once, which gives the largest rounded magnitude), folded by
//    block_amax_atomic onto zeroed bits as cuda::amax's amax_kernel folds its elements: the max of
//    |C|'s non-NaN elements does not depend on the order, so the bits are cuda::amax(C)'s; this
//    kernel then reads it as rule_scale did.
// At most 64 registers (4 CTAs of 256 threads a SM): from bf16 the kernel took 116 (19% occupancy,
// Nsight Compute, H200, 8f6d98a); capped, it keeps a stack frame for the rare ordered-sum groups.
// fp8kit_cuda_bench's rows, 2^28 elements, H200, 2026-11-30 23:26 UTC, uncapped / at most 80 / at
// most 64 registers, two rounds (one block a thread, 2858ff5): bf16 1.201-1.210 / 1.082-1.086 /
// 1.023-1.034 ms, f32 1.165-1.166 / 1.174-1.181 / 1.167-1.184 ms.
template <class S, class D, int P, int R, bool kPacked>
__global__ void __launch_bounds__(kThreads, 4)
    rht_col_blocks_kernel(const void* __restrict__ in, RowGeom gt, ElementCtx ctx,
                          const std::uint8_t* __restrict__ table, numerics::ScaleParams rule,
                          const float* __restrict__ d_global_amax, RowOut o) {
    rht_col_tiles<S, D, P, R, kPacked>(in, gt, ctx, table, rule, d_global_amax, o);
}

// The amax of C = te_rht16_columnwise(X) into *amax_out (zeroed before; see above), C not made.
// Item s = (bi, column run cv) by RowGeom's division by g.grid_cols = cols / kVec: a thread takes
// the kVec adjacent columns kVec cv .. of the rows 16 bi .., and adjacent lanes adjacent runs, so
// each of a warp's loads of a row of X is coalesced. kVec 1: one element a load; kVec 2 (f32) or
// 4 (bf16): one 8-byte load a row for the run (cols % kVec == 0 and X 8-byte aligned, so every run
// is), and bf16's spans two columns at a time (rht_span_bf16_pair), as the words hold them.
// At most 85 registers (3 CTAs a SM): uncapped, the bf16 kernel took 110 (2 CTAs, 22% achieved
// occupancy, 211 us at 53% of DRAM peak; Nsight Compute, H200, 2^28 elements); capped, it keeps a
// stack frame for the ordered-sum groups and a few reloads of the loaded words.
template <class S, int kVec>
__global__ void __launch_bounds__(kThreads, 3)
    rht_col_amax_kernel(const void* __restrict__ in, RowGeom g, float* amax_out) {
    using T = typename S::storage_t;
    static_assert(kVec == 1 || kVec * sizeof(T) == 8, "one 8-byte load a row");
    const T* x = static_cast<const T*>(in);
    std::uint32_t tensor_max = 0;  // the blocks' amax bits
    const std::uint32_t stride = gridDim.x * blockDim.x;
    for (std::uint32_t s = blockIdx.x * blockDim.x + threadIdx.x; s < g.items; s += stride) {
        const std::uint32_t bi = __umulhi(s << 1, g.div_m) >> g.div_l, c = (s - bi * g.grid_cols) * kVec;
        if constexpr (kVec == 1) {
            T e[16];  // X's group: rows 16 bi .. of column c (all inside X: rows % 16 == 0)
#pragma unroll
            for (int k = 0; k < 16; ++k) e[k] = x[static_cast<std::size_t>(16 * bi + k) * g.cols + c];
            tensor_max = max(tensor_max, rht16_amax_bits<S>([&](int i) { return e[i]; }, true));
        } else {
            std::uint32_t lo[16], hi[16];  // rows 16 bi .. of columns c .. c + kVec - 1, 8 bytes a row
#pragma unroll
            for (int k = 0; k < 16; ++k) {
                const uint2 w =
                    __ldg(reinterpret_cast<const uint2*>(x + static_cast<std::size_t>(16 * bi + k) * g.cols + c));
                lo[k] = w.x;
                hi[k] = w.y;
            }
            if constexpr (kVec == 2) {
                tensor_max = max(tensor_max, rht16_amax_bits<S>([&](int i) { return lo[i]; }, true));
                tensor_max = max(tensor_max, rht16_amax_bits<S>([&](int i) { return hi[i]; }, true));
            } else {
                RhtSpan sp[4];
                rht_span_bf16_pair(lo, sp[0], sp[1]);
                rht_span_bf16_pair(hi, sp[2], sp[3]);
                const auto col = [&](const std::uint32_t(&w)[16], int half, const RhtSpan& span) {
                    return rht16_amax_bits_span<S>([&](int i) { return static_cast<T>(w[i] >> (16 * half)); }, span,
                                                   true);
                };
                tensor_max = max(tensor_max, max(col(lo, 0, sp[0]), col(lo, 1, sp[1])));
                tensor_max = max(tensor_max, max(col(hi, 0, sp[2]), col(hi, 1, sp[3])));
            }
        }
    }
    block_amax_atomic(tensor_max, amax_out);  // every thread of the CTA gets here
}
}  // namespace

bool fake_quantize_col_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                              void* d_out, bool block_part, float* d_tensor_factor, float* d_global_amax,
                              std::uint64_t seed, cudaStream_t stream) {
    if (spec.block_rows != 1 || !(spec.block_cols == 16 || spec.block_cols == 32) || spec.columnwise_rht) return false;
    if (!(spec.format == Format::e2m1 || (spec.format == Format::e4m3 && spec.block_cols == 32))) return false;
    const std::size_t grid_rows = (rows + spec.block_cols - 1) / spec.block_cols;
    const std::size_t items = grid_rows * cols;
    if (items >= (std::size_t{1} << 31) || rows >= (std::size_t{1} << 31) || cols >= (std::size_t{1} << 31))
        return false;
    RowGeom g{static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols),  1, 0,
              static_cast<std::uint32_t>(cols), static_cast<std::uint32_t>(items), 0, 0};
    set_divisor(g, static_cast<std::uint32_t>(cols > 0 ? cols : 1));
    const numerics::ScaleParams rule =
        numerics::make_scale_params(spec.rule, spec.format, spec.epsilon, spec.pow2, spec.value_for_inf, 0);
    const std::uint8_t* table = element_table(spec.format, spec.policy, stream);
    const ElementCtx ctx{spec.policy, nullptr, seed};
    const ColOut o{d_out, block_part, block_part ? d_tensor_factor : nullptr};
    const bool wide = spec.block_cols == 32;
    if (!has_fake_path(spec, from)) return false;
    // The global amax of X (X^T's), before the blocks, where the rule reads it (NVFP4).
    if (numerics::rule_uses_global_amax(spec.rule)) fp8kit::cuda::amax(from, in, rows * cols, d_global_amax, stream);
    bool launched = false;
    with_input(from, [&](auto si) {
        with_cast_format(spec.format, [&](auto di) {
            using S = std::decay_t<decltype(si)>;  // std::decay_t: see quantize_row_blocks
            using D = std::decay_t<decltype(di)>;
            with_element_path(spec.format, spec.policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                constexpr std::size_t smem = element_smem<D, P>();
                // At least one CTA, so that an empty tensor's tensor factor is written.
                const unsigned grid = items > 0 ? grid_for_path<P, R>(items) : 1;
                // Literal template arguments per launch (tests/gpu/host_launches.sh).
                if constexpr (kFakePath<S, D, P, R, 2>) {
                    if (wide) {
                        launched = true;
                        col_blocks_kernel<S, D, P, R, 2>
                            <<<grid, kThreads, smem, stream>>>(in, g, ctx, table, rule, d_global_amax, o);
                    }
                }
                if constexpr (kFakePath<S, D, P, R, 1>) {
                    if (!wide) {
                        launched = true;
                        col_blocks_kernel<S, D, P, R, 1>
                            <<<grid, kThreads, smem, stream>>>(in, g, ctx, table, rule, d_global_amax, o);
                    }
                }
            });
            return 0;
        });
    });
    if (!launched) return false;
    check_launch("col_blocks_kernel");
    return true;
}

namespace {

// The instantiations of rht_col_blocks_kernel: the roles of TE's nvfp4 preset with columnwise_rht
// (E2M1 in 1 x 16 blocks, nearest-even and stochastic rounding: kConvert with R -1 and 5), from f32
// and bf16, packed or not (eight kernels, and rht_col_amax_kernel's two). Everything else takes
// the copy (quantize_blocks' with_rht_columnwise_copy).
template <class S, class D, int P>
constexpr bool kRhtPath = (P == kConvert) && std::is_same_v<D, emu::E2M1> &&
                          (std::is_same_v<S, Binary32> || std::is_same_v<S, BFloat16>);

// Runs fn(S{}, D{}, P, R) for the input type, the element format and its path (P, R as
// std::integral_constant, as with_element_path gives them), the types decayed here (see
// quantize_row_blocks).
template <class Fn>
void with_block_types(Wide from, const BlockSpec& spec, Fn&& fn) {
    with_input(from, [&](auto si) {
        with_cast_format(spec.format, [&](auto di) {
            using S = std::decay_t<decltype(si)>;
            using D = std::decay_t<decltype(di)>;
            with_element_path(spec.format, spec.policy, [&](auto p, auto r) { fn(S{}, D{}, p, r); });
            return 0;
        });
    });
}

// quantize_rht_col_blocks' launches (quantize_blocks_fused_rht_calls).
std::atomic<std::uint64_t> g_rht_col_calls{0};

}  // namespace

bool quantize_rht_col_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                             std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                             float* d_scale_inv, float* d_global_amax, std::uint64_t seed, cudaStream_t stream) {
    if (spec.block_rows != 1 || spec.block_cols != 16 || spec.format != Format::e2m1) return false;
    if (!(from == Wide::f32 || from == Wide::bf16) || rows % 16 != 0 || rows == 0 || cols == 0) return false;
    if (!d_codes || !d_global_amax) return false;  // the copy's path refuses these
    const std::size_t items = rows / 16 * cols;
    if (items >= (std::size_t{1} << 31) || rows >= (std::size_t{1} << 31) || cols >= (std::size_t{1} << 31))
        return false;
    RowGeom g{static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols),  1, 0,
              static_cast<std::uint32_t>(cols), static_cast<std::uint32_t>(items), 0, 0};
    set_divisor(g, static_cast<std::uint32_t>(cols));
    // rht_col_blocks_kernel's tiles (rht_col_tiles): kRhtTileGroups groups by 32 columns, the
    // tiles along a row of C first.
    const std::size_t tiles_a_row = (rows / 16 + kRhtTileGroups - 1) / kRhtTileGroups;
    RowGeom gt = g;
    gt.grid_cols = static_cast<std::uint32_t>(tiles_a_row);
    gt.items = static_cast<std::uint32_t>(tiles_a_row * ((cols + 31) / 32));
    set_divisor(gt, gt.grid_cols);
    const numerics::ScaleParams rule =
        numerics::make_scale_params(spec.rule, spec.format, spec.epsilon, spec.pow2, spec.value_for_inf, 0);
    const std::uint8_t* table = element_table(spec.format, spec.policy, stream);
    const ElementCtx ctx{spec.policy, nullptr, seed};
    const RowOut o{d_codes, d_scale_codes, d_scale, d_scale_inv};
    bool launched = false;
    with_block_types(from, spec, [&](auto si, auto di, auto p, auto r) {
        using S = std::decay_t<decltype(si)>;  // std::decay_t: see quantize_row_blocks
        using D = std::decay_t<decltype(di)>;
        constexpr int P = decltype(p)::value, R = decltype(r)::value;
        if constexpr (kRhtPath<S, D, P>) {
            launched = true;
            // C's amax first (every rule: the copy's path writes it under each), then the blocks.
            FP8KIT_CUDA_CHECK(cudaMemsetAsync(d_global_amax, 0, sizeof(float), stream));
            // kVec adjacent columns a thread where every run of them is one aligned 8-byte load.
            constexpr int kVec = 8 / sizeof(typename S::storage_t);
            if (cols % kVec == 0 && (reinterpret_cast<std::uintptr_t>(in) & 7u) == 0) {
                RowGeom gv = g;
                gv.grid_cols = static_cast<std::uint32_t>(cols / kVec);
                gv.items = static_cast<std::uint32_t>(items / kVec);
                set_divisor(gv, gv.grid_cols);
                rht_col_amax_kernel<S, kVec>
                    <<<grid_for_path<kConvert, -1>(gv.items), kThreads, 0, stream>>>(in, gv, d_global_amax);
            } else {
                rht_col_amax_kernel<S, 1>
                    <<<grid_for_path<kConvert, -1>(items), kThreads, 0, stream>>>(in, g, d_global_amax);
            }
            check_launch("rht_col_amax_kernel");
            constexpr std::size_t smem = element_smem<D, P>();
            // A CTA a tile, up to kItemsPerThread tiles a CTA past a wave of 8 CTAs a SM (nearest-even;
            // stochastic rounding as grid_for_path), as row_blocks_kernel's NVFP4 launches: a thread's
            // prologue (set_global_amax's divisions, the table) took 102 of the 825 instructions a bf16
            // thread of one tile issued on the common path (nvcc 13.0, sm_90, scripts/sass_path.py).
            const unsigned grid = row_blocks_grid<P, R>(std::size_t{gt.items} * kThreads, true);
            // Literal template arguments per launch (tests/gpu/host_launches.sh).
            if (packed)
                rht_col_blocks_kernel<S, D, P, R, true>
                    <<<grid, kThreads, smem, stream>>>(in, gt, ctx, table, rule, d_global_amax, o);
            else
                rht_col_blocks_kernel<S, D, P, R, false>
                    <<<grid, kThreads, smem, stream>>>(in, gt, ctx, table, rule, d_global_amax, o);
        }
    });
    if (!launched) return false;
    check_launch("rht_col_blocks_kernel");
    g_rht_col_calls.fetch_add(1, std::memory_order_relaxed);
    return true;
}

}  // namespace fp8kit::cuda::detail

namespace fp8kit::cuda {

unsigned set_row_blocks_grid_cap(unsigned ctas) {
    const unsigned old = detail::g_grid_cap;
    detail::g_grid_cap = ctas;
    return old;
}

std::uint64_t fake_quantize_blocks_one_kernel_calls() {
    return detail::g_row_fake_calls.load(std::memory_order_relaxed);
}

std::uint64_t quantize_blocks_fused_rht_calls() { return detail::g_rht_col_calls.load(std::memory_order_relaxed); }

}  // namespace fp8kit::cuda
