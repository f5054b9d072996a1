// The rule of the CUDA casts' kCvtDir path (cuda/src/element.cuh): emu::convert's code for
// float32 -> E4M3 / E5M2 under toward-zero and nearest-away rounding, and float32 -> E4M3FNUZ /
// E5M2FNUZ under nearest-even, toward-zero and nearest-away, computed by the sm_89+ instruction
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (nearest-even into E4M3 / E5M2, equal to emu::convert under
// {nearest_even, saturate_all, canonical}: profile cuda-satfinite, proved on all 2^32 inputs by
// cuda/tools/exhaustive_check.cu) after an exact step that moves the input onto the format's grid
// (integer operations on its bits; below the normal range one fused multiply-add rounded toward
// zero and one subtraction, which the host computes in integers). Host and device share this code:
// tests/numerics/test_cvt_directed.cpp compares it with emu::convert on the CPU, with emu::convert
// under that policy standing for the instruction.
//
// Why it is exact. Let G be the OCP format with D's exponent and mantissa widths (E4M3 for E4M3 and
// E4M3FNUZ, E5M2 for E5M2 and E5M2FNUZ) and v the value to encode in G: v = y for D = G, and
// v = 2y for the FNUZ formats, whose code c has the value of G's code c halved (bias one larger,
// emu/include/fp8kit/emu/format.hpp) for every c with magnitude up to G's largest finite code.
// Doubling is exact in float32 below 2^127 and commutes with every rounding onto the two grids
// (it maps D's grid onto G's, ties onto ties). For |v| <= G's largest finite value (the domain)
// no rounding overflows (the largest finite value is on the grid) and v is neither NaN nor Inf,
// so emu::convert's code is sign | code of the rounded magnitude, whatever the overflow and NaN
// policy (emu/convert.hpp steps 2, 7). Outside the domain the caller takes another encoder (the
// kernels: the cast table, emu::convert's own results).
//  - Nearest-even: the instruction rounds v itself (no step).
//  - Toward zero / nearest-away: grid_value rounds |v| onto G's grid exactly as emu::convert's
//    step 4 does, giving a float32 value w on the grid, |w| <= G's max finite; the instruction
//    encodes a grid value exactly (nearest-even of an exact value is that value).
//  - The sign: w keeps v's sign bit, also when the magnitude rounds to 0, so the instruction gives
//    -0 (0x80) where emu::convert gives E4M3's / E5M2's negative zero. FNUZ has no negative zero:
//    emu::convert gives 0x00 (zero_code), so fix_codes maps 0x80 to 0x00.
#pragma once

#include <cstdint>
#include <type_traits>

#include "fp8kit/emu/convert.hpp"
#include "fp8kit/emu/format.hpp"
#include "fp8kit/emu/policy.hpp"

namespace fp8kit::numerics::cvt_directed {

// The formats and roundings the rule serves.
template <class D>
FP8KIT_HD constexpr bool is_fnuz_pair() {
    return D::total_bits == 8 && D::encoding == emu::Encoding::fnuz && D::has_subnormals &&
           ((D::exp_bits == 4 && D::man_bits == 3 && D::bias == 8) ||
            (D::exp_bits == 5 && D::man_bits == 2 && D::bias == 16));
}
template <class D>
FP8KIT_HD constexpr bool is_ocp_pair() {
    return std::is_same_v<D, emu::E4M3> || std::is_same_v<D, emu::E5M2>;
}
template <class D>
FP8KIT_HD constexpr bool serves(emu::Rounding r) {
    const bool directed = r == emu::Rounding::toward_zero || r == emu::Rounding::nearest_away;
    if constexpr (is_ocp_pair<D>())
        return directed;
    else if constexpr (is_fnuz_pair<D>())
        return directed || r == emu::Rounding::nearest_even;
    else
        return false;
}

// G: the OCP format the instruction encodes into.
template <class D>
using Grid = std::conditional_t<D::exp_bits == 4, emu::E4M3, emu::E5M2>;

// Float32 bits of G's smallest normal value 2^emin and of its largest finite value.
template <class G>
FP8KIT_HD constexpr std::uint32_t normal_lo_bits() {
    return static_cast<std::uint32_t>(G::emin + 127) << 23;
}
template <class G>
FP8KIT_HD constexpr std::uint32_t max_bits() {
    return (static_cast<std::uint32_t>(G::emax + 127) << 23) |
           (static_cast<std::uint32_t>(G::max_man_at_max_exp) << (23 - G::man_bits));
}
static_assert(max_bits<emu::E4M3>() == 0x43E00000u && max_bits<emu::E5M2>() == 0x47600000u, "448 and 57344");

// Whether float32 bits y lie in the domain: |v| <= G's largest finite value (NaN and Inf do not).
template <class D>
FP8KIT_HD bool in_domain(std::uint32_t y) {
    constexpr std::uint32_t kMax = max_bits<Grid<D>>() - (is_fnuz_pair<D>() ? 0x00800000u : 0u);  // halved
    return (y & 0x7FFFFFFFu) <= kMax;
}

// v's bits for y in the domain: y, or 2y for FNUZ (exponent + 1; a float32 subnormal's magnitude
// bits shifted left, which is exact also where the result becomes normal).
template <class D>
FP8KIT_HD std::uint32_t value_bits(std::uint32_t y) {
    if constexpr (!is_fnuz_pair<D>()) return y;
    const std::uint32_t u = y & 0x7FFFFFFFu;
    return u < 0x00800000u ? (y & 0x80000000u) | (u << 1) : y + 0x00800000u;
}

// The step, per launch: add and keep act on the bits of a value in G's normal range, where G's
// grid is float32's with the low 23 - M mantissa bits cleared (M = G's mantissa bits): truncation
// clears them (add 0); nearest-away adds half a unit (bit 22 - M) first, so that a dropped part of
// at least half carries into the kept bits (into the exponent at a binade's end, which gives
// 2^(e+1), on the grid), as convert's `up = cmp_half >= 0`. Nearest-even leaves v to the
// instruction (add 0, keep all). small_below: |y|'s float32 bits under which v lies below G's
// normal range (v < 2^emin; nearest-even: never, see grid_value).
struct Step {
    std::uint32_t add, keep, small_below;
};
template <class D>
FP8KIT_HD constexpr Step step_of(emu::Rounding r) {
    constexpr int kLow = 23 - Grid<D>::man_bits;
    constexpr std::uint32_t kSmall = normal_lo_bits<Grid<D>>() - (is_fnuz_pair<D>() ? 0x00800000u : 0u);  // v = 2^emin
    if (r == emu::Rounding::nearest_even) return {0u, 0xFFFFFFFFu, 0u};
    return {r == emu::Rounding::nearest_away ? 1u << (kLow - 1) : 0u, ~((1u << kLow) - 1u), kSmall};
}

// t = fl_rz(|v| + c): c = 0 (exact: |v| = s |y| with s = 1 or 2, and doubling below 2^127 is
// exact), or c = 2^emin for |v| < 2^emin, where the sum lies in [2^emin, 2^(emin+1)) and rounding
// toward zero floors it onto that binade's float32 grid, 2^(emin-23): t = 2^emin + floor(|v|).
// The device computes it in one FFMA.RZ (fma.rz.f32 |y|, s, c: the product is exact, so the one
// rounding is the sum's); the host computes the same two cases in integers (IEEE 754-2019 4.3.2:
// roundTowardZero gives the representable value nearest to and no greater in magnitude than the
// exact result).
template <class D>
FP8KIT_HD std::uint32_t sum_rz(std::uint32_t y, bool small) {
    using G = Grid<D>;
#if defined(__CUDA_ARCH__)
    const float c = small ? __uint_as_float(normal_lo_bits<G>()) : 0.0f;
    return __float_as_uint(__fmaf_rz(fabsf(__uint_as_float(y)), is_fnuz_pair<D>() ? 2.0f : 1.0f, c));
#else
    const std::uint32_t x = value_bits<D>(y) & 0x7FFFFFFFu;
    if (!small) return x;
    // x = sig 2^(max(eb, 1) - 150) < 2^emin; in units of 2^(emin-23) that is sig / 2^r with
    // r = emin + 127 - max(eb, 1) >= 1 (r >= 32: below one unit).
    const int eb = static_cast<int>(x >> 23);
    const std::uint32_t sig = eb != 0 ? (x & 0x007FFFFFu) | 0x00800000u : x;
    const int r = G::emin + 127 - (eb > 1 ? eb : 1);
    return normal_lo_bits<G>() + (r < 32 ? sig >> r : 0u);
#endif
}

// g - c, exact: c = 0, or c = 2^emin <= g <= 2^(emin+1) (Sterbenz: the difference of two floats
// within a factor of two is representable). Device: one FADD; host: the same in integers.
template <class D>
FP8KIT_HD std::uint32_t minus_c(std::uint32_t g, bool small) {
    using G = Grid<D>;
#if defined(__CUDA_ARCH__)
    const float c = small ? __uint_as_float(normal_lo_bits<G>()) : 0.0f;
    return __float_as_uint(__fsub_rn(__uint_as_float(g), c));
#else
    if (!small) return g;
    const std::uint32_t n = g - normal_lo_bits<G>();  // g - 2^emin in units of 2^(emin-23), <= 2^23
    if (n == 0) return 0u;
    const int hb = emu::detail::highest_bit(n);
    return (static_cast<std::uint32_t>(G::emin - 23 + hb + 127) << 23) | ((n << (23 - hb)) & 0x007FFFFFu);
#endif
}

// The float32 bits w of a value on G's grid whose code (by the instruction, then fix_codes) is
// emu::convert's code of y, for y in the domain, branch-free:
//  - |v| >= 2^emin (or nearest-even): t = |v|, w = (t + add) & keep with y's sign.
//  - |v| < 2^emin (toward zero, nearest-away): G's grid there is the multiples of q = 2^(emin-M).
//    t = 2^emin + floor_g(|v|) (sum_rz, g = 2^(emin-23)) lies in G's binade emin, where its grid is
//    q; for nested grids g | h | q and c a multiple of q, floor_q(c + floor_g(x) + h) =
//    c + floor_q(x + h), so (t + add) & keep is 2^emin plus |v| rounded onto q (h = 0: toward
//    zero; h = q/2: nearest-away, up to 2^(emin+1) = 2^emin + 2^emin, which is on the grid).
//    Subtracting 2^emin (exact) leaves |v| rounded; y's sign goes on last, so a negative value
//    that rounds to zero gives -0 (E4M3 / E5M2: 0x80, as emu::convert's zero_code; FNUZ:
//    fix_codes). Nearest-even is not taken through this case: flooring first can turn a value
//    just above a tie into the tie.
template <class D>
FP8KIT_HD std::uint32_t grid_value(std::uint32_t y, Step st) {
    const bool small = (y & 0x7FFFFFFFu) < st.small_below;
    const std::uint32_t g = (sum_rz<D>(y, small) + st.add) & st.keep;
    return minus_c<D>(g, small) | (y & 0x80000000u);
}

// The codes the instruction gave for four grid values (code k in bits 8k..8k+7) as D's codes:
// E4M3 / E5M2 unchanged; FNUZ has no negative zero (0x80 is its NaN) and emu::convert gives a
// zero result 0x00 (zero_code), so every byte 0x80 becomes 0x00. b = x ^ 0x80808080 is zero in
// those bytes; ((b & 0x7F7F7F7F) + 0x7F7F7F7F) | b has bit 7 of a byte set iff that byte of b is
// nonzero (the per-byte sums stay below 0x100, so nothing carries into the next byte).
template <class D>
FP8KIT_HD std::uint32_t fix_codes(std::uint32_t x) {
    if constexpr (!is_fnuz_pair<D>()) return x;
    const std::uint32_t b = x ^ 0x80808080u;
    const std::uint32_t nonzero = (((b & 0x7F7F7F7Fu) + 0x7F7F7F7Fu) | b) & 0x80808080u;
    return x & (nonzero | 0x7F7F7F7Fu);
}

}  // namespace fp8kit::numerics::cvt_directed
