// The rule of the CUDA casts' kCvtDir path (cuda/src/element.cuh): emu::convert's code for
// float32 -> E4M3 / E5M2 under toward-zero and nearest-away rounding, and float32 -> E4M3FNUZ /
// E5M2FNUZ under nearest-even, toward-zero and nearest-away, computed by the sm_89+ instruction
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (nearest-even into E4M3 / E5M2, equal to emu::convert under
// {nearest_even, saturate_all, canonical}: profile cuda-satfinite, proved on all 2^32 inputs by
// cuda/tools/exhaustive_check.cu) after an exact integer step on the input's bits. Host and device
// share this code: tests/numerics/test_cvt_directed.cpp compares it with emu::convert on the CPU,
// with emu::convert under that policy standing for the instruction.
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
//  - Toward zero / nearest-away: grid_bits rounds |v| onto G's grid exactly as emu::convert's
//    step 4 does, giving a float32 value w on the grid, |w| <= G's max finite; the instruction
//    encodes a grid value exactly (nearest-even of an exact value is that value).
//  - The sign: w keeps v's sign bit, also when the magnitude rounds to 0, so the instruction gives
//    -0 (0x80) where emu::convert gives E4M3's / E5M2's negative zero. FNUZ has no negative zero:
//    emu::convert gives 0x00 (zero_code), so fix_code maps 0x80 to 0x00.
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

// |v| rounded onto G's grid under r (toward_zero, nearest_away; nearest_even: v unchanged), as
// float32 bits with v's sign; |v| <= G's largest finite value.
//  - |v| >= 2^emin: G's grid there is float32's with the low 23 - M mantissa bits cleared (M = G's
//    mantissa bits). Truncation clears them; nearest-away adds half a unit (bit 22 - M) first: a
//    dropped part of at least half carries into the kept bits (into the exponent at a binade's
//    end, which is 2^(e+1), on the grid), as convert's `up = cmp_half >= 0`.
//  - |v| < 2^emin: the grid is the multiples of q = 2^(emin - M). |v| = sig 2^(max(eb, 1) - 150)
//    (eb the biased exponent), so |v| / q = sig / 2^s with s = emin - M + 150 - max(eb, 1) >= 24 - M.
//    k = floor(|v| / q), or floor(|v| / q + 1/2) for nearest-away (s >= 32: sig < 2^24 <= 2^(s-1),
//    k = 0 either way); k <= 2^M, and k q is a normal float32 (q >= 2^-16).
template <class G>
FP8KIT_HD std::uint32_t grid_bits(std::uint32_t v, emu::Rounding r) {
    if (r == emu::Rounding::nearest_even) return v;
    constexpr int M = G::man_bits, kLow = 23 - M;
    const bool away = r == emu::Rounding::nearest_away;
    const std::uint32_t sign = v & 0x80000000u, u = v & 0x7FFFFFFFu;
    if (u >= normal_lo_bits<G>()) return sign | ((u + (away ? 1u << (kLow - 1) : 0u)) & ~((1u << kLow) - 1u));
    const int eb = static_cast<int>(u >> 23);
    const std::uint32_t sig = eb != 0 ? (u & 0x007FFFFFu) | 0x00800000u : u;
    const int s = G::emin - M + 150 - (eb > 1 ? eb : 1);
    const std::uint32_t k = s < 32 ? (sig + (away ? 1u << (s - 1) : 0u)) >> s : 0u;
    if (k == 0) return sign;
    const int hb = emu::detail::highest_bit(k);  // k q = 2^(emin - M + hb) (k / 2^hb)
    return sign | (static_cast<std::uint32_t>(G::emin - M + hb + 127) << 23) | ((k << (23 - hb)) & 0x007FFFFFu);
}

// The code the instruction's code c (of grid_bits' value) stands for in D.
template <class D>
FP8KIT_HD std::uint32_t fix_code(std::uint32_t c) {
    if constexpr (is_fnuz_pair<D>()) return c == 0x80u ? 0u : c;
    return c;
}

// The common case, per element: |v| in [2^emin, max finite], where grid_bits is one add and one
// AND on y's own bits (FNUZ: the add also doubles, +2^23 on the exponent; y is then a float32
// normal). Step{add, keep} per launch; in_common tests y in one LEA-able compare:
// (y << 1) - (lo << 1) <= (hi - lo) << 1 with lo, hi the bounds in y's bits (the sign shifted out).
struct Step {
    std::uint32_t add, keep;
};
template <class D>
FP8KIT_HD constexpr Step common_step(emu::Rounding r) {
    constexpr int kLow = 23 - Grid<D>::man_bits;
    const std::uint32_t dbl = is_fnuz_pair<D>() ? 0x00800000u : 0u;
    if (r == emu::Rounding::nearest_even) return {dbl, 0xFFFFFFFFu};
    const std::uint32_t half = r == emu::Rounding::nearest_away ? 1u << (kLow - 1) : 0u;
    return {dbl + half, ~((1u << kLow) - 1u)};
}
template <class D>
FP8KIT_HD constexpr std::uint32_t common_lo2() {  // lo << 1
    return (normal_lo_bits<Grid<D>>() - (is_fnuz_pair<D>() ? 0x00800000u : 0u)) << 1;
}
template <class D>
FP8KIT_HD constexpr std::uint32_t common_span2() {  // (hi - lo) << 1
    return (max_bits<Grid<D>>() - normal_lo_bits<Grid<D>>()) << 1;
}
// (y << 1) - lo2, compared (max over a group) with common_span2.
template <class D>
FP8KIT_HD std::uint32_t common_offset(std::uint32_t y) {
    return (y << 1) - common_lo2<D>();
}
template <class D>
FP8KIT_HD std::uint32_t common_bits(std::uint32_t y, Step st) {
    return (y + st.add) & st.keep;
}

}  // namespace fp8kit::numerics::cvt_directed
