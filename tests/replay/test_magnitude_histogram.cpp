// The one-pass histogram against compute_stats (which casts every element) for many scales.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fp8kit/stats/magnitude_histogram.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "float_bits.hpp"

using namespace fp8kit;

namespace {

using fp8kit_test::bits;

// Log-uniform magnitudes over ~60 binades, both signs, with zeros, Inf, NaN, float32 subnormals
// and values sitting exactly on FP8 rounding boundaries for power-of-two scales (ties).
std::vector<std::uint32_t> make_f32(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::uniform_real_distribution<double> ex(-40.0, 20.0);
    std::vector<std::uint32_t> v;
    for (std::size_t i = 0; i < n; ++i) {
        const auto r = g() % 1000;
        float x;
        if (r == 0)
            x = 0.0f;
        else if (r == 1)
            x = INFINITY;
        else if (r == 2)
            x = NAN;
        else if (r == 3)
            x = std::ldexp(static_cast<float>(g() % 1024 + 1), -149);  // subnormal
        else if (r < 60)
            x = std::ldexp(static_cast<float>(16 + g() % 16) + 0.5f, static_cast<int>(g() % 40) - 30);  // ties
        else
            x = static_cast<float>(std::exp2(ex(g)));
        if (g() & 1) x = -x;
        v.push_back(bits(x));
    }
    return v;
}

std::vector<std::uint16_t> to_bf16(const std::vector<std::uint32_t>& v) {
    std::vector<std::uint16_t> o;
    for (auto u : v) o.push_back(static_cast<std::uint16_t>(u >> 16));  // truncation: any bf16 will do
    return o;
}

constexpr Policy kSat{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
constexpr Policy kNoSat{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_all_ones};

void check(const MagnitudeHistogram& h, const void* data, Wide w, std::size_t n, Format f, float scale, const Policy& p,
           bool pow2) {
    const float scale_inv = 1.0f / scale;
    const auto fast = h.evaluate(f, scale, scale_inv, p);
    const auto ref = compute_stats(data, w, n, QuantConfig{f, scale, p, scale_inv, 0});
    INFO("format " << name(f) << " scale " << scale << " (bits 0x" << std::hex << bits(scale) << std::dec << ")");
    REQUIRE(fast.numel == ref.numel);
    REQUIRE(fast.zeros == ref.zeros);
    REQUIRE(fast.nan == ref.nan);
    REQUIRE(fast.inf == ref.inf);
    REQUIRE(fast.amax == ref.amax);
    if (pow2) {
        REQUIRE(fast.ambiguous == 0);  // the header's claim: power-of-two scales are exact
        REQUIRE(fast.underflow == ref.underflow);
        REQUIRE(fast.subnormal == ref.subnormal);
        REQUIRE(fast.overflow == ref.overflow);
    } else {
        const auto within = [](std::uint64_t est, std::uint64_t unc, std::uint64_t truth) {
            return (est > truth ? est - truth : truth - est) <= unc;
        };
        REQUIRE(within(fast.underflow, fast.underflow_uncertain, ref.underflow));
        REQUIRE(within(fast.subnormal, fast.subnormal_uncertain, ref.subnormal));
        REQUIRE(within(fast.overflow, fast.overflow_uncertain, ref.overflow));
    }
    // Sums: compute_stats adds n terms in index order in binary64, so it may differ from the
    // exact value by n * 2^-53 relative; the histogram states its own rounding bound.
    const double ref_round = static_cast<double>(n) * 0x1p-53;
    REQUIRE(std::fabs(fast.sum_x2 - ref.sum_x2) <= 2 * ref_round * ref.sum_x2 + (n + 8) * 0x1p-53 * fast.sum_x2);
    if (std::isinf(ref.sum_err2)) {
        REQUIRE(std::isinf(fast.sum_err2_hi));
        return;
    }
    REQUIRE(std::isfinite(fast.sum_err2));
    const double slack = fast.err2_rounding + ref_round * ref.sum_err2;
    REQUIRE(ref.sum_err2 >= fast.sum_err2_lo - slack);
    REQUIRE(ref.sum_err2 <= fast.sum_err2_hi + slack);
    if (pow2) REQUIRE(std::fabs(fast.sum_err2 - ref.sum_err2) <= slack);
}

}  // namespace

TEST_CASE("histogram: power-of-two scales give exactly compute_stats's counts", "[replay][histogram]") {
    const auto data = make_f32(200000, 1);
    MagnitudeHistogram h;
    h.add(data.data(), Wide::f32, data.size());
    for (Format f : {Format::e4m3, Format::e5m2, Format::e4m3fnuz, Format::e5m2fnuz})
        for (int k = -40; k <= 40; k += 3)
            for (const Policy& p : {kSat, kNoSat})
                check(h, data.data(), Wide::f32, data.size(), f, std::ldexp(1.0f, k), p, true);
}

TEST_CASE("histogram: other scales stay within the stated bounds", "[replay][histogram]") {
    const auto data = make_f32(200000, 2);
    MagnitudeHistogram h;
    h.add(data.data(), Wide::f32, data.size());
    std::mt19937_64 g(3);
    std::uniform_real_distribution<double> ex(-30.0, 30.0);
    double worst_db = 0;
    for (Format f : {Format::e4m3, Format::e5m2})
        for (int i = 0; i < 40; ++i) {
            const float scale = static_cast<float>(std::exp2(ex(g)));
            check(h, data.data(), Wide::f32, data.size(), f, scale, kSat, false);
            const auto r = h.evaluate(f, scale, 1.0f / scale, kSat);
            worst_db = std::max(worst_db, r.sqnr_db_hi() - r.sqnr_db_lo());
        }
    // The bound is useful, not just valid: the SQNR is pinned to a small fraction of a dB.
    CHECK(worst_db < 0.2);
}

TEST_CASE("histogram: bf16 and f16 inputs", "[replay][histogram]") {
    const auto b = to_bf16(make_f32(50000, 4));
    MagnitudeHistogram hb;
    hb.add(b.data(), Wide::bf16, b.size());
    std::vector<std::uint16_t> hf;
    std::mt19937_64 g(5);
    for (int i = 0; i < 50000; ++i) hf.push_back(static_cast<std::uint16_t>(g()));  // every f16 pattern class
    MagnitudeHistogram hh;
    hh.add(hf.data(), Wide::f16, hf.size());
    for (int k = -10; k <= 10; k += 5) {
        check(hb, b.data(), Wide::bf16, b.size(), Format::e4m3, std::ldexp(1.0f, k), kSat, true);
        check(hh, hf.data(), Wide::f16, hf.size(), Format::e5m2, std::ldexp(1.0f, k), kSat, true);
        check(hh, hf.data(), Wide::f16, hf.size(), Format::e4m3, 448.0f / 3.1f * std::ldexp(1.0f, k), kSat, false);
    }
}

TEST_CASE("histogram: refuses what it cannot do exactly", "[replay][histogram]") {
    MagnitudeHistogram h;
    const double d = 1.0;
    REQUIRE_THROWS_AS(h.add(&d, Wide::f64, 1), std::invalid_argument);
    const Policy up{Rounding::toward_positive, Overflow::saturate_all, NanEncoding::canonical};
    REQUIRE_THROWS_AS(h.evaluate(Format::e4m3, 1.0f, 1.0f, up), std::invalid_argument);
    REQUIRE_THROWS_AS(h.evaluate(Format::e4m3, 0.0f, 1.0f, kSat), std::invalid_argument);
}

TEST_CASE("histogram: a repeated value counts as its copies (fill-value runs)", "[replay][histogram]") {
    // add_repeated(v, k) against add() of k copies: counts bit for bit; the sums (k * u in one
    // rounding against k roundings) agree exactly here because k is a power of two and u * 2^j
    // stays exact, so the evaluated sums are compared for equality too.
    const std::uint32_t k = 1u << 12;
    for (float v : {0.0f, -0.0f, 0.3f, -1e-30f, 448.5f, 1e30f, INFINITY, NAN, std::ldexp(1.0f, -140)}) {
        std::vector<std::uint32_t> copies(k, bits(v));
        MagnitudeHistogram a, b;
        a.add_repeated(&copies[0], Wide::f32, k);
        a.add(copies.data(), Wide::f32, 5);  // a repeated run then ordinary elements
        b.add(copies.data(), Wide::f32, k);
        b.add(copies.data(), Wide::f32, 5);
        a.finish();
        b.finish();
        INFO("value " << v);
        REQUIRE(a.numel() == k + 5);
        REQUIRE(bits(a.te_amax()) == bits(b.te_amax()));
        for (float scale : {1.0f, 0.0078125f, 1024.0f}) {
            const auto ra = a.evaluate(Format::e4m3, scale, 1.0f / scale, kSat);
            const auto rb = b.evaluate(Format::e4m3, scale, 1.0f / scale, kSat);
            REQUIRE(ra.numel == rb.numel);
            REQUIRE(ra.zeros == rb.zeros);
            REQUIRE(ra.nan == rb.nan);
            REQUIRE(ra.inf == rb.inf);
            REQUIRE(ra.underflow == rb.underflow);
            REQUIRE(ra.subnormal == rb.subnormal);
            REQUIRE(ra.overflow == rb.overflow);
            REQUIRE(ra.sum_x2 == rb.sum_x2);
            REQUIRE(ra.sum_err2 == rb.sum_err2);
        }
    }
    MagnitudeHistogram h;
    const std::uint16_t one = 0x3F80;                          // bf16 1.0
    h.add_repeated(&one, Wide::bf16, std::uint64_t(1) << 40);  // O(1) whatever the count
    h.finish();
    REQUIRE(h.numel() == std::uint64_t(1) << 40);
    REQUIRE(h.evaluate(Format::e4m3, 1.0f, 1.0f, kSat).underflow == 0);
}
