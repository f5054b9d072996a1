// The per-element statistics step, the histogram binning and the code classes of
// numerics/element_stats.hpp against hand-worked E4M3/E5M2 cases (docs/statistics.md defines
// each number), and the MX code-0 regression through lib's mxfp8 preset.
#include <catch2/catch.hpp>

#include "float_bits.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fp8kit/numerics/element_stats.hpp"
#include "fp8kit/stats/statistics.hpp"

using namespace fp8kit::numerics;
using fp8kit::emu::NanEncoding;
using fp8kit::emu::Overflow;
using fp8kit::emu::Policy;
using fp8kit::emu::Rounding;

namespace {

using fp8kit_test::bits;
using fp8kit_test::from_bits;
const Policy kRne{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};

// The step for x cast to E4M3 with scale 1: s = x, q and its decoded value from emu.
Element step_e4m3(float x, const ElementConsts& c) {
    const std::uint8_t q = fp8kit::emu::encode(Format::e4m3, fp8kit::emu::Wide::f32, bits(x), kRne, 0);
    const double dec =
        from_bits(static_cast<std::uint32_t>(fp8kit::emu::decode(Format::e4m3, fp8kit::emu::Wide::f32, q)));
    return element_step(x, code_kind(Format::e4m3, q), dec, c, [&] { return overflows(c, bits(x)); });
}

}  // namespace

TEST_CASE("histogram bins from the bits", "[numerics][stats]") {
    CHECK(kHistogramBins == 279);
    CHECK(histogram_bin(bits(0.0f)) == 0);
    CHECK(histogram_bin(bits(-0.0f)) == 0);
    CHECK(histogram_bin(bits(1.0f)) == 150);   // floor(log2 1) = 0 -> 1 + 0 + 149
    CHECK(histogram_bin(bits(-3.0f)) == 151);  // floor(log2 3) = 1
    CHECK(histogram_bin(1u) == 1);             // 2^-149
    CHECK(histogram_bin(0x00400000u) == 23);   // 2^-127, a subnormal: 1 + (-127 + 149)
    CHECK(histogram_bin(0x7F7FFFFFu) == 277);  // FLT_MAX: exponent 127
    CHECK(histogram_bin(0x7F800000u) == 278);  // Inf
    CHECK(histogram_bin(0xFFC00000u) == 278);  // NaN
    CHECK(histogram_exponent(150) == 0);
    CHECK(histogram_bin_of_exponent(-149) == 1);
}

TEST_CASE("code kinds of the formats", "[numerics][stats]") {
    CHECK(code_kind(Format::e4m3, 0x00) == CodeKind::zero);
    CHECK(code_kind(Format::e4m3, 0x80) == CodeKind::zero);       // -0
    CHECK(code_kind(Format::e4m3, 0x01) == CodeKind::subnormal);  // 2^-9
    CHECK(code_kind(Format::e4m3, 0x07) == CodeKind::subnormal);
    CHECK(code_kind(Format::e4m3, 0x08) == CodeKind::normal);   // 2^-6
    CHECK(code_kind(Format::e4m3, 0x7E) == CodeKind::normal);   // 448
    CHECK(code_kind(Format::e4m3, 0x7F) == CodeKind::special);  // NaN
    CHECK(code_kind(Format::e5m2, 0x03) == CodeKind::subnormal);
    CHECK(code_kind(Format::e5m2, 0x04) == CodeKind::normal);
    CHECK(code_kind(Format::e5m2, 0x7C) == CodeKind::special);      // Inf
    CHECK(code_kind(Format::e4m3fnuz, 0x80) == CodeKind::special);  // the fnuz NaN
    CHECK(code_kind(Format::e8m0, 0x00) == CodeKind::normal);       // 2^-127: E8M0 has no subnormals
    CHECK(code_kind(Format::e8m0, 0xFF) == CodeKind::special);
}

TEST_CASE("overflow limits under each rounding", "[numerics][stats]") {
    // E4M3 max 448 = 1.110b * 2^8; the next step would be 480. Nearest-even: the midpoint 464
    // ties to 448 (even mantissa 110), so 464 is the largest value that does not overflow.
    CHECK(overflow_limit(Format::e4m3, kRne, false) == bits(464.0f));
    CHECK(overflow_limit(Format::e4m3, kRne, true) == bits(464.0f));
    // Toward zero: everything below 480 truncates to 448.
    const Policy rz{Rounding::toward_zero, Overflow::saturate_all, NanEncoding::canonical};
    CHECK(overflow_limit(Format::e4m3, rz, false) == bits(480.0f) - 1);
    // E5M2 max 57344 = 1.11b * 2^15, step 8192: the midpoint 61440 ties away from the odd
    // mantissa 11, i.e. up: overflow. The limit is the float below 61440.
    CHECK(overflow_limit(Format::e5m2, kRne, false) == bits(61440.0f) - 1);
}

TEST_CASE("element step: every count of one element", "[numerics][stats]") {
    const ElementConsts c = element_consts(Format::e4m3, kRne, 1.0f);
    CHECK(c.te_threshold == 448.0f);
    Element e = step_e4m3(0.0f, c);
    CHECK((e.finite && e.zero && !e.nonzero_x && !e.nonzero_q && !e.underflow && e.x2 == 0 && e.err2 == 0));
    e = step_e4m3(1e-10f, c);  // far below 2^-10 (half the smallest subnormal): code 0
    CHECK((e.underflow && !e.subnormal && e.nonzero_x && !e.nonzero_q && !e.zero));
    CHECK(e.err2 == static_cast<double>(1e-10f) * static_cast<double>(1e-10f));
    e = step_e4m3(0.00390625f, c);  // 2^-8: a subnormal code, exact
    CHECK((e.subnormal && !e.underflow && e.err2 == 0.0));
    e = step_e4m3(1.0625f, c);  // between 1 and 1.125, a tie: to even 1.0, error 1/16
    CHECK((!e.subnormal && !e.underflow && e.err2 == 0.00390625 && e.x2 == 1.0625 * 1.0625));
    e = step_e4m3(460.0f, c);  // rounds to 448: no overflow, but |x| > 448 is TE's overflow
    CHECK((!e.overflow && e.te_overflow));
    e = step_e4m3(-500.0f, c);  // past 464: overflow (saturated to -448), TE overflow too
    CHECK((e.overflow && e.te_overflow && e.finite && e.abs_x == 500.0));
    e = step_e4m3(std::numeric_limits<float>::infinity(), c);
    CHECK((e.inf && !e.finite && e.te_overflow && !e.overflow && e.nonzero_x));
    e = step_e4m3(std::numeric_limits<float>::quiet_NaN(), c);
    CHECK((e.nan && !e.finite && !e.te_overflow && e.nonzero_x && e.nonzero_q));
    // A scale moves the TE threshold: scale_inv 2 -> 896.
    ElementConsts c2 = c;
    rescale(c2, 2.0f);
    CHECK(c2.te_threshold == 896.0f);
    CHECK(c2.scale_inv == 2.0);
    // A finite x whose code is NaN (no-saturate overflow) has an infinite error term.
    const Policy nosat{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::canonical};
    const ElementConsts cn = element_consts(Format::e4m3, nosat, 1.0f);
    const double nan_dec = std::numeric_limits<double>::quiet_NaN();
    e = element_step(1000.0f, CodeKind::special, nan_dec, cn, [&] { return overflows(cn, bits(1000.0f)); });
    CHECK((e.overflow && std::isinf(e.err2)));
}

TEST_CASE("merge: counts add, extremes combine, sums add", "[numerics][stats]") {
    StatsScalars a, b;
    a.numel = 3;
    a.zeros = 1;
    a.amax = 2;
    a.min_nonzero = 0.5;
    a.sum_x2 = 1;
    a.te_underflow = -1;
    b.numel = 4;
    b.nan = 2;
    b.amax = 7;
    b.min_nonzero = 0;
    b.sum_x2 = 2;
    b.te_underflow = 3;
    merge(a, b);
    CHECK((a.numel == 7 && a.zeros == 1 && a.nan == 2 && a.amax == 7 && a.min_nonzero == 0.5 && a.sum_x2 == 3 &&
           a.te_underflow == 2));
    StatsScalars c;
    c.min_nonzero = 0.25;
    merge(a, c);
    CHECK(a.min_nonzero == 0.25);
}

// The divergence of issue 13: a 1x32 block of 1e-38 under TE's MXFP8 rule has E8M0 code 0; TE
// casts it with exp2f_rcp(0) = 1, so every element (1e-38, far below E4M3's 2^-10 half-subnormal)
// becomes code 0. The old GPU kernel used 2^127 and gave 0x3e (1e-38 * 2^127 = 1.70 -> 1.75).
TEST_CASE("MX code 0 casts with scale 1 through lib's mxfp8 preset", "[numerics][stats][mx]") {
    std::vector<float> x(32, 1e-38f);
    const fp8kit::RecipeSpec r = fp8kit::parse_recipe("mxfp8");
    const fp8kit::BlockRecipe br = fp8kit::block_recipe(r, Role::activation, x.size());
    const fp8kit::BlockStats b = fp8kit::compute_block_stats(x.data(), fp8kit::Wide::f32, 1, x.size(), br);
    REQUIRE(b.scale_inv.size() == 1);
    CHECK(bits(b.scale_inv[0]) == 0x00400000u);  // 2^-127: code 0
    CHECK(b.total.underflow == 32);              // cast with 1: all flush to zero
    CHECK(b.total.exp_hist[static_cast<std::size_t>(histogram_bin(bits(1e-38f)))] == 32);  // s = x
    // The OCP floor preset (mx-ocp) keeps 2^127 for code 0: 1e-38 * 2^127 = 1.70 -> no underflow.
    const fp8kit::BlockRecipe bo = fp8kit::block_recipe(fp8kit::parse_recipe("mx-ocp"), Role::activation, x.size());
    const fp8kit::BlockStats o = fp8kit::compute_block_stats(x.data(), fp8kit::Wide::f32, 1, x.size(), bo);
    CHECK(bits(o.scale_inv[0]) == 0x00400000u);
    CHECK(o.total.underflow == 0);
    // mxfp8's recipe_scale agrees: scale 1, scale_inv 2^-127.
    const auto p = fp8kit::recipe_scale(r, Role::activation, 1e-38f);
    CHECK(bits(p.scale) == bits(1.0f));
    CHECK(bits(p.scale_inv) == 0x00400000u);
}
