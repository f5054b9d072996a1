// The reference GEMM's models against computations that share no code with them: `exact` against
// __float128 sums (113-bit significand: every sum below is exact in it, and GCC's conversion to
// float rounds once, to nearest-even), `fp32` against a plain float loop, and the aligned model
// on cases worked out by hand from its definition (docs/gemm.md).
#include <catch2/catch.hpp>

#include <omp.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/gemm.hpp"
#include "float_bits.hpp"

using namespace fp8kit;
using namespace fp8kit::gemm;

namespace {

using fp8kit_test::bits;

float f32(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, sizeof f);
    return f;
}
double value(Format f, std::uint8_t c) {
    const std::uint64_t b = emu::decode(f, Wide::f64, c);
    double d;
    std::memcpy(&d, &b, sizeof d);
    return d;
}
std::uint8_t code(Format f, float v) { return emu::encode(f, Wide::f32, bits(v), emu::kDecodePolicy); }

struct Case {
    std::vector<std::uint8_t> a, b;
    std::vector<float> sa{1.0f}, sb{1.0f};
    GemmRequest rq;
    Case(std::size_t m, std::size_t n, std::size_t k, Format fa, Format fb) : a(m * k), b(n * k) {
        rq.a = {nullptr, m, fa, ScaleKind::tensor, nullptr, 1};
        rq.b = {nullptr, n, fb, ScaleKind::tensor, nullptr, 1};
        rq.k = k;
    }
    GemmRequest& request() {
        rq.a.codes = a.data();
        rq.b.codes = b.data();
        rq.a.scales = sa.data();
        rq.b.scales = sb.data();
        rq.a.scale_count = sa.size();
        rq.b.scale_count = sb.size();
        return rq;
    }
};

// Random finite codes of `f` (NaN/Inf excluded), with many small and large magnitudes.
void fill(std::vector<std::uint8_t>& v, Format f, std::mt19937& rng) {
    std::uniform_int_distribution<int> d(0, 255);
    for (auto& c : v) {
        do c = static_cast<std::uint8_t>(d(rng));
        while (!std::isfinite(value(f, c)));
    }
}

AccumModel model(const char* s) { return parse_model(s); }
std::vector<std::uint32_t> mm(const GemmRequest& r, const AccumModel& m) { return fp8kit::gemm::gemm(r, m); }

}  // namespace

TEST_CASE("gemm exact equals a __float128 sum rounded once", "[gemm]") {
    std::mt19937 rng(7);
    for (auto [fa, fb] :
         {std::pair{Format::e4m3, Format::e4m3}, {Format::e4m3, Format::e5m2}, {Format::e5m2, Format::e5m2}}) {
        for (std::size_t k : {1u, 17u, 300u, 4096u}) {
            Case c(3, 4, k, fa, fb);
            fill(c.a, fa, rng);
            fill(c.b, fb, rng);
            c.sa = {0.7f};    // any float32 ...
            c.sb = {0.125f};  // ... times a power of two: still exact in 113 bits
            const auto d = mm(c.request(), model("exact"));
            for (std::size_t i = 0; i < 3; ++i)
                for (std::size_t j = 0; j < 4; ++j) {
                    __float128 s = 0;
                    for (std::size_t q = 0; q < k; ++q)
                        s += static_cast<__float128>(value(fa, c.a[i * k + q])) * value(fb, c.b[j * k + q]);
                    const float want =
                        static_cast<float>(s * static_cast<__float128>(0.7f) * static_cast<__float128>(0.125f));
                    INFO("k " << k << " i " << i << " j " << j);
                    REQUIRE(d[i * 4 + j] == bits(want));
                }
        }
    }
}

TEST_CASE("gemm exact rounds once where binary64 sums would not", "[gemm]") {
    // 2^17 * 2^14 (E5M2 57344 = 1.75 * 2^15 squared, near 2^31.6) and 2^-32 (the smallest
    // product): a binary64 sum loses the small product; the exact sum keeps it, and it decides a
    // rounding only through the sticky bit, so the float32 result is the same here, but the
    // 1-ulp case below shows the tie broken by it.
    Case c(1, 1, 3, Format::e5m2, Format::e5m2);
    const std::uint8_t one = code(Format::e5m2, 1.0f), tiny = 0x01;  // 2^-16
    // 1 + 2^-24 (tie between 1 and 1 + 2^-23 in float32) + 2^-32: exact rounds up.
    c.a = {one, code(Format::e5m2, std::ldexp(1.0f, -12)), tiny};
    c.b = {one, code(Format::e5m2, std::ldexp(1.0f, -12)), tiny};
    const auto d = mm(c.request(), model("exact"));
    REQUIRE(d[0] == bits(std::nextafter(1.0f, 2.0f)));
    REQUIRE(mm(c.request(), model("fp32"))[0] == bits(1.0f));  // float32 sums drop it
}

TEST_CASE("gemm fp32 equals a float32 loop in k order, any thread count", "[gemm]") {
    std::mt19937 rng(11);
    Case c(9, 5, 777, Format::e4m3, Format::e5m2);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e5m2, rng);
    c.sa = {3.0f};
    c.sb = {0.1f};
    omp_set_num_threads(1);
    const auto one = mm(c.request(), model("fp32"));
    omp_set_num_threads(2);
    for (const char* m : {"exact", "fp32", "sm90", "sm90-fast", "deepseek-128", "h100tc"}) {
        // Identical for any thread count.
        omp_set_num_threads(1);
        const auto d1 = mm(c.request(), model(m));
        omp_set_num_threads(3);
        REQUIRE(mm(c.request(), model(m)) == d1);
    }
    for (std::size_t i = 0; i < 9; ++i)
        for (std::size_t j = 0; j < 5; ++j) {
            volatile float acc = 0;  // volatile: one float32 add per step, as written
            for (std::size_t q = 0; q < 777; ++q)
                acc = acc + static_cast<float>(value(Format::e4m3, c.a[i * 777 + q])) *
                                static_cast<float>(value(Format::e5m2, c.b[j * 777 + q]));
            volatile float s = 3.0f * 0.1f;
            volatile float want = s * acc;
            REQUIRE(one[i * 5 + j] == bits(want));
        }
}

TEST_CASE("gemm aligned model: truncation in the alignment, by hand", "[gemm]") {
    Case c(1, 1, 2, Format::e4m3, Format::e4m3);
    // Products 2^16 and 2^-6: aligned to 2^16 with 14 bits kept, the unit is 2^(16 + 1 - 14) = 2^3,
    // so 2^-6 truncates to 0 (exact: 65536.015625).
    c.a = {code(Format::e4m3, 256.0f), code(Format::e4m3, 1.0f)};
    c.b = {code(Format::e4m3, 256.0f), code(Format::e4m3, 0.015625f)};
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == 65536.0f);
    REQUIRE(f32(mm(c.request(), model("exact"))[0]) == 65536.015625f);
    // 2^16 and 12 (1.5 * 2^3): unit 2^3, 12 -> 8 when truncated, 16 with nearest-even (1.5 -> 2).
    c.b[1] = code(Format::e4m3, 12.0f);
    c.a[1] = code(Format::e4m3, 1.0f);
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == 65536.0f + 8.0f);
    REQUIRE(f32(mm(c.request(), model("aligned:align=rne"))[0]) == 65536.0f + 16.0f);
    // Sticky: 12 keeps 8 plus half a unit (4): 65548 exactly, representable in float32.
    REQUIRE(f32(mm(c.request(), model("aligned:sticky=1,sum_bits=0"))[0]) == 65536.0f + 12.0f);
    // -12: truncation toward zero keeps -8; floor (a right shift in two's complement) keeps -16.
    c.a[1] = code(Format::e4m3, -1.0f);
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == 65536.0f - 8.0f);
    REQUIRE(f32(mm(c.request(), model("aligned:align=floor"))[0]) == 65536.0f - 16.0f);
    c.a[1] = code(Format::e4m3, 1.0f);
    // 15 bits: the unit is 2^2 and 12 is kept whole.
    REQUIRE(f32(mm(c.request(), model("aligned:bits=15,sum_bits=0"))[0]) == 65536.0f + 12.0f);
}

TEST_CASE("gemm aligned model: nominal exponents (ea + eb) set the alignment, as measured on the H100", "[gemm]") {
    // Products 1.5 * 1.5 = 2.25 (nominal exponent 0, actual 1), -1, -1.25 and 2^-6 * 2^-7 = 2^-13
    // (2^-7 is an E4M3 subnormal). Nominal: E = 0, unit 2^-13, the small product survives and
    // the sum is 2^-13. Actual (h100tc): E = 1, unit 2^-12, it is truncated away: 0.
    Case c(1, 1, 4, Format::e4m3, Format::e4m3);
    c.a = {code(Format::e4m3, 1.5f), code(Format::e4m3, -1.0f), code(Format::e4m3, -1.25f),
           code(Format::e4m3, 0.015625f)};
    c.b = {code(Format::e4m3, 1.5f), code(Format::e4m3, 1.0f), code(Format::e4m3, 1.0f),
           code(Format::e4m3, 0.0078125f)};
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == std::ldexp(1.0f, -13));
    REQUIRE(f32(mm(c.request(), model("h100tc"))[0]) == 0.0f);
    // The step's sum keeps 14 significant bits: 65536 + 65536 + 8.
    c.a = {code(Format::e4m3, 256.0f), code(Format::e4m3, 256.0f), code(Format::e4m3, 0.5f), 0};
    c.b = {code(Format::e4m3, 256.0f), code(Format::e4m3, 256.0f), code(Format::e4m3, 1.0f), 0};
    // 8 is kept by the alignment (unit 2^(16 - 13) = 8); the sum 131080 (leading bit 2^17)
    // keeps 14 bits, unit 16: 131072.
    c.a[2] = code(Format::e4m3, 8.0f);
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == 131072.0f);
    REQUIRE(f32(mm(c.request(), model("aligned:sum_bits=0"))[0]) == 131080.0f);
}

TEST_CASE("gemm aligned model: the accumulator is aligned with each group, promotion restores it", "[gemm]") {
    // K = 64, group 32: first group 32 x 2^12 = 2^17 exactly; second group: products 1.0 against an
    // accumulator of 2^17: unit 2^(17 + 1 - 14) = 2^4, so each 1.0 truncates to 0: 131072.
    Case c(1, 1, 64, Format::e4m3, Format::e4m3);
    for (int q = 0; q < 64; ++q) {
        c.a[q] = code(Format::e4m3, q < 32 ? 64.0f : 1.0f);
        c.b[q] = code(Format::e4m3, q < 32 ? 64.0f : 1.0f);
    }
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == 131072.0f);
    // Promotion every 32: the second group starts from 0 (32 exactly) and is added in float32.
    REQUIRE(f32(mm(c.request(), model("aligned:promote=32"))[0]) == 131072.0f + 32.0f);
    REQUIRE(f32(mm(c.request(), model("exact"))[0]) == 131072.0f + 32.0f);
    // Group 64: all 64 products in one step with the accumulator 0: largest 2^12, unit 2^-1, exact.
    REQUIRE(f32(mm(c.request(), model("aligned:group=64"))[0]) == 131072.0f + 32.0f);
}

TEST_CASE("gemm aligned model: the step's sum is rounded to float32 as step= says", "[gemm]") {
    // E5M2 products 2^15 * 2^15 = 2^30 and 192 * 1 (1.5 float32 ulps at 2^30, ulp 2^7); 40 bits
    // kept in the alignment lose nothing, so only the step's rounding acts: toward zero 2^30 + 128,
    // nearest-even 2^30 + 256.
    Case c(1, 1, 2, Format::e5m2, Format::e5m2);
    c.a = {code(Format::e5m2, 32768.0f), code(Format::e5m2, 192.0f)};
    c.b = {code(Format::e5m2, 32768.0f), code(Format::e5m2, 1.0f)};
    REQUIRE(f32(mm(c.request(), model("aligned:bits=40,sum_bits=0,step=rz"))[0]) == 1073741824.0f + 128.0f);
    REQUIRE(f32(mm(c.request(), model("aligned:bits=40,sum_bits=0,step=rne"))[0]) == 1073741824.0f + 256.0f);
    // 14 bits: unit 2^(30 + 1 - 14) = 2^17, and 192 is gone before the step rounds.
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == 1073741824.0f);
}

TEST_CASE("gemm block scales and rowwise scales", "[gemm]") {
    std::mt19937 rng(5);
    Case c(3, 130, 260, Format::e4m3, Format::e4m3);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e4m3, rng);
    c.rq.a.scale_kind = c.rq.b.scale_kind = ScaleKind::block;
    c.sa.assign(3 * 3, 0.0f);
    c.sb.assign(2 * 3, 0.0f);
    for (auto& s : c.sa) s = std::ldexp(1.0f, static_cast<int>(rng() % 7) - 3);
    for (auto& s : c.sb) s = std::ldexp(1.0f, static_cast<int>(rng() % 7) - 3);
    const auto d = mm(c.request(), model("exact"));
    for (std::size_t i = 0; i < 3; ++i)
        for (std::size_t j = 0; j < 130; ++j) {
            __float128 s = 0;
            for (std::size_t q = 0; q < 260; ++q)
                s += static_cast<__float128>(value(Format::e4m3, c.a[i * 260 + q])) *
                     value(Format::e4m3, c.b[j * 260 + q]) * c.sa[i * 3 + q / 128] * c.sb[(j / 128) * 3 + q / 128];
            REQUIRE(d[i * 130 + j] == bits(static_cast<float>(s)));
        }
    c.rq.a.scale_kind = ScaleKind::row;
    REQUIRE_THROWS_AS(mm(c.request(), model("exact")), std::invalid_argument);  // A rowwise, B blocks
    c.rq.b.scale_kind = ScaleKind::row;
    c.sa.assign(3, 2.0f);
    c.sb.assign(129, 1.0f);  // one short
    REQUIRE_THROWS_WITH(mm(c.request(), model("exact")), Catch::Contains("scale-b"));
}

TEST_CASE("gemm models: names, parameters, and refusals", "[gemm]") {
    REQUIRE(describe(parse_model("aligned:group=16,bits=13,promote=64")) ==
            "aligned:group=16,bits=13,exp=nominal,sum_bits=14,promote=64,align=trunc,sticky=0,step=rz,scale=epilogue,"
            "splitk=0,fma=1");
    REQUIRE_THROWS_WITH(parse_model("sm80"), Catch::Contains("sm80"));
    REQUIRE_THROWS_WITH(parse_model("aligned:promote=48"), Catch::Contains("multiple of group"));
    REQUIRE_THROWS_WITH(parse_model("aligned:bits=x"), Catch::Contains("bits='x'"));
    Case c(1, 1, 1, Format::e8m0, Format::e4m3);
    REQUIRE_THROWS_WITH(mm(c.request(), model("exact")), Catch::Contains("e8m0"));
}

TEST_CASE("gemm compare names the model an output was made with", "[gemm]") {
    std::mt19937 rng(3);
    Case c(6, 6, 512, Format::e4m3, Format::e5m2);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e5m2, rng);
    for (const char* m : {"exact", "fp32", "sm90", "sm90-fast", "deepseek-128", "h100tc"}) {
        const auto d = mm(c.request(), model(m));
        const GemmComparison r = compare(c.request(), d);
        INFO(m << "\n" << r.summary());
        // Models that coincide on this input are listed in order; the first must be m or one
        // that gives the same bits.
        REQUIRE(mm(c.request(), model(r.matched.c_str())) == d);
        REQUIRE(r.bound_violations == 0);
    }
    auto d = mm(c.request(), model("sm90-fast"));
    d[7] ^= 1;  // one bit off
    const GemmComparison r = compare(c.request(), d);
    REQUIRE(r.matched.empty());
    REQUIRE(r.closest == "sm90-fast");
    REQUIRE(r.models[3].mismatches == 1);
}

TEST_CASE("gemm compare counts non-finite elements in the bound", "[gemm]") {
    std::mt19937 rng(5);
    Case c(4, 4, 256, Format::e4m3, Format::e4m3);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e4m3, rng);
    const auto good = mm(c.request(), model("sm90"));
    REQUIRE(compare(c.request(), good).bound_violations == 0);
    const std::uint32_t inf = 0x7f800000u, ninf = 0xff800000u, nan = 0x7fc00000u;
    for (const std::uint32_t bad : {inf, ninf, nan}) {
        auto d = good;
        d[5] = bad;  // planted in an sm90 output whose exact value is finite
        const GemmComparison r = compare(c.request(), d);
        INFO(r.summary());
        CHECK(r.bound_violations == 1);
        CHECK(r.nonfinite_violations == 1);
        CHECK_THAT(r.summary(), Catch::Contains("1 elements outside the " + r.closest + " bound (1 of them"));
        CHECK_THAT(r.json(), Catch::Contains("\"nonfinite_violations\":1"));
    }
    // Two planted: both counted, and the finite error measure still reads the finite ones.
    auto d = good;
    d[0] = inf;
    d[15] = nan;
    CHECK(compare(c.request(), d).bound_violations == 2);
}

TEST_CASE("gemm split-K: each range accumulated alone, partials added in float32 in k order", "[gemm]") {
    // Hand-worked from the definition (docs/gemm.md "Split-K"): a product 2^16 at k = 0 and a
    // product 2^-1 at k = 256. One accumulator (sm90-fast) truncates the small one away (unit
    // 2^(16 + 1 - 14) = 8); with ranges of 256 products the second range's partial 0.5 is added
    // to 65536 in float32, which keeps it.
    Case c(1, 1, 512, Format::e4m3, Format::e4m3);
    c.a[0] = code(Format::e4m3, 256.0f);
    c.b[0] = code(Format::e4m3, 256.0f);
    c.a[256] = code(Format::e4m3, std::ldexp(1.0f, -9));
    c.b[256] = code(Format::e4m3, 256.0f);
    REQUIRE(f32(mm(c.request(), model("sm90-fast"))[0]) == 65536.0f);
    REQUIRE(f32(mm(c.request(), model("sm90-fast-splitk:256"))[0]) == 65536.5f);
    REQUIRE(f32(mm(c.request(), model("sm90-fast-splitk:384"))[0]) == 65536.0f);  // k = 256 in the first range
    // The reduction adds in k order, in float32. Ranges of 128: two ranges of 128 products of 2^16
    // (2^23 each), then 1 and 1: 2^24 + 1 is a tie that rounds to even (2^24), twice, where the
    // exact sum is 2^24 + 2.
    Case u(1, 1, 512, Format::e4m3, Format::e4m3);
    for (int q = 0; q < 256; ++q) u.a[q] = u.b[q] = code(Format::e4m3, 256.0f);
    u.a[256] = u.b[256] = code(Format::e4m3, 1.0f);
    u.a[384] = u.b[384] = code(Format::e4m3, 1.0f);
    REQUIRE(f32(mm(u.request(), model("aligned:promote=128,splitk=128"))[0]) == 16777216.0f);
    REQUIRE(f32(mm(u.request(), model("exact"))[0]) == 16777218.0f);
    // Scales apply once, in the epilogue, after the reduction.
    c.sa = {0.5f};
    c.sb = {3.0f};
    REQUIRE(f32(mm(c.request(), model("sm90-fast-splitk:256"))[0]) == 1.5f * 65536.5f);
}

TEST_CASE("gemm split sizes: cuBLASLt's ceil(tiles / S) tiles per split, each size once", "[gemm]") {
    // 64 tiles (K = 8192): S = 2, 3, 4, ... give 32, 22, 16, 13, 11, ... tiles.
    const std::vector<int> s = split_sizes(8192, 64);
    REQUIRE(s.front() == 32 * 128);
    REQUIRE(s[1] == 22 * 128);  // S = 3, measured on the H200 (docs/gemm.md)
    REQUIRE(s.back() == 128);
    for (std::size_t q = 1; q < s.size(); ++q) REQUIRE(s[q] < s[q - 1]);
    REQUIRE(split_sizes(128, 64).empty());  // one tile: nothing to split
    REQUIRE_THROWS_WITH(parse_model("sm90-splitk:200"), Catch::Contains("multiple of 128"));
    REQUIRE(parse_model("sm90-fast-splitk:2816").split_k == 2816);
}

TEST_CASE("gemm compare finds the split size of a split-K output", "[gemm]") {
    std::mt19937 rng(17);
    Case c(4, 3, 8192, Format::e4m3, Format::e5m2);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e5m2, rng);
    for (const char* m : {"sm90-fast-splitk:2816", "sm90-splitk:3072"}) {
        const auto d = mm(c.request(), model(m));
        const GemmComparison r = compare(c.request(), d);
        INFO(m << "\n" << r.summary());
        REQUIRE(mm(c.request(), model(r.matched.c_str())) == d);
        REQUIRE(r.bound_violations == 0);
    }
    const GemmComparison r = compare(c.request(), mm(c.request(), model("sm90-fast-splitk:2816")));
    REQUIRE(r.matched == "sm90-fast-splitk:2816");
}

TEST_CASE("gemm block scales: a scaled promotion is one fused multiply-add", "[gemm]") {
    // Two 128-blocks: block 0 gives 1 (scales 1), block 1 gives c = 1.125 x 1.125 with scale
    // s = fl32(sa * sb) = 1 + 2^-23. s * c has 30 significant bits, so fma(s, c, 1) (measured on
    // cuBLASLt's block-scaled kernel, docs/gemm.md) and fl32(1 + fl32(s * c)) differ. Both are
    // computed here in binary64, where s * c and 1 + s * c are exact, then rounded once to float.
    Case d(1, 1, 256, Format::e4m3, Format::e4m3);
    d.rq.a.scale_kind = d.rq.b.scale_kind = ScaleKind::block;
    d.a[0] = d.b[0] = code(Format::e4m3, 1.0f);
    d.a[128] = d.b[128] = code(Format::e4m3, 1.125f);
    const float s = 1.0f + std::ldexp(1.0f, -23);
    d.sa = {1.0f, s};
    d.sb = {1.0f, 1.0f};
    const double prod = static_cast<double>(s) * 1.265625;
    const float fused = static_cast<float>(1.0 + prod);
    const float separate = 1.0f + static_cast<float>(prod);
    REQUIRE(fused != separate);  // the case tells the two apart
    REQUIRE(f32(mm(d.request(), model("sm90"))[0]) == fused);
    REQUIRE(f32(mm(d.request(), model("aligned:promote=128,fma=0"))[0]) == separate);
}

TEST_CASE("gemm binary64 sums round to the exact model where they are exact", "[gemm]") {
    // E4M3 products span under 2^36 with 8-bit significands, so 256 of them add exactly in
    // binary64: the sum rounded once is the exact model's output, bit for bit. Scales are powers
    // of two, so the scaled sums stay exact too.
    std::mt19937 rng(11);
    Case c(5, 7, 256, Format::e4m3, Format::e4m3);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e4m3, rng);
    c.sa = {0.25f};
    c.sb = {8.0f};
    const Binary64Sums s = binary64_sums(c.request());
    const auto exact = mm(c.request(), model("exact"));
    REQUIRE(s.sum.size() == exact.size());
    for (std::size_t e = 0; e < exact.size(); ++e) {
        INFO("element " << e);
        float x;
        std::memcpy(&x, &exact[e], 4);
        REQUIRE(static_cast<float>(s.sum[e]) == x);
        REQUIRE(s.magnitude[e] >= std::fabs(s.sum[e]));
    }
    // Block scales: each 128-run scaled by its own pair.
    Case blk(3, 130, 300, Format::e4m3, Format::e4m3);
    fill(blk.a, Format::e4m3, rng);
    fill(blk.b, Format::e4m3, rng);
    blk.rq.a.scale_kind = blk.rq.b.scale_kind = ScaleKind::block;
    blk.sa.assign(3 * 3, 0.5f);
    blk.sb.assign(2 * 3, 2.0f);
    blk.sa[4] = 4.0f;
    const Binary64Sums sb = binary64_sums(blk.request());
    const auto eb = mm(blk.request(), model("exact"));
    for (std::size_t e = 0; e < eb.size(); ++e) {
        float x;
        std::memcpy(&x, &eb[e], 4);
        REQUIRE(static_cast<float>(sb.sum[e]) == x);
    }
}

namespace {

// A stand-in GPU engine that runs lib's CPU functions: compare()'s dispatch through GemmDevice,
// counted, without a GPU (tests/gpu compares the real engine with lib).
int g_engine_runs = 0, g_engine_sums = 0;
const GemmEngine kCpuBackedEngine{"test-engine",
                                  [](const AccumModel& m, std::string* why) {
                                      if (m.kind != AccumKind::exact) return true;
                                      if (why) *why = "no exact model here";
                                      return false;
                                  },
                                  [](const GemmRequest& rq, const AccumModel& m) {
                                      ++g_engine_runs;
                                      return fp8kit::gemm::gemm(rq, m);
                                  },
                                  [](const GemmRequest& rq) {
                                      ++g_engine_sums;
                                      return binary64_sums(rq);
                                  }};

}  // namespace

TEST_CASE("gemm compare on a GPU engine: the engine's models, exact on the CPU, or left out above the limit",
          "[gemm]") {
    std::mt19937 rng(7);
    Case c(6, 5, 512, Format::e4m3, Format::e5m2);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e5m2, rng);
    auto d = mm(c.request(), model("sm90"));
    d[3] ^= 4;
    const GemmComparison cpu = compare(c.request(), d);
    GemmDevice dev;
    dev.gpu = &kCpuBackedEngine;
    g_engine_runs = g_engine_sums = 0;
    const GemmComparison gpu = compare(c.request(), d, dev);
    CHECK(g_engine_runs >= 5);  // every named model but exact, and the split-K searches
    CHECK(g_engine_sums == 1);
    CHECK(gpu.device == "test-engine");
    CHECK(gpu.exact_from == "exact");  // small enough for the CPU's exact model
    REQUIRE(gpu.models.size() == cpu.models.size());
    for (std::size_t q = 0; q < cpu.models.size(); ++q) {
        CHECK(gpu.models[q].model == cpu.models[q].model);
        CHECK(gpu.models[q].mismatches == cpu.models[q].mismatches);
    }
    CHECK(gpu.closest == cpu.closest);
    CHECK(gpu.max_abs_error == cpu.max_abs_error);
    CHECK(gpu.bound_violations == cpu.bound_violations);
    // Above the limit: exact is left out and named, the error is against the binary64 sum.
    dev.cpu_model_work_limit = 0;
    const GemmComparison big = compare(c.request(), d, dev);
    INFO(big.summary());
    REQUIRE(big.not_run.size() == 1);
    CHECK(big.not_run[0].first == "exact");
    CHECK(big.exact_from == "binary64");
    CHECK(big.models.size() + 1 == cpu.models.size());
    CHECK(big.closest == cpu.closest);
    CHECK(big.bound_violations == cpu.bound_violations);
    CHECK_THAT(big.summary(), Catch::Contains("exact         not run: M x N x K = 1.536e+04"));
    CHECK_THAT(big.json(), Catch::Contains("\"exact_from\":\"binary64\""));
    // A command that computes one model refuses the one the GPU lacks, saying why.
    REQUIRE_THROWS_WITH(dev.require(model("exact")), "no exact model here");
    REQUIRE_NOTHROW(dev.require(model("sm90")));
    REQUIRE_NOTHROW(GemmDevice{}.require(model("exact")));
}

TEST_CASE("gemm device: cpu and auto need no engine; cuda without one names why", "[gemm]") {
    CHECK(select_gemm_device(Device::cpu).gpu == nullptr);
    CHECK(select_gemm_device(Device::auto_select).gpu == nullptr);
    if (!registered_gemm_engine() && !registered_stats_engine())
        REQUIRE_THROWS_AS(select_gemm_device(Device::cuda), DeviceError);
}

// The CPU model computes a row's outputs in tiles of columns from operands decoded per panel of
// B (lib/src/gemm/panel.hpp); every element must still be the function of its own row, column
// and scales alone: each element of D equals the 1 x 1 GEMM of its row of A and row of B.
// N = 40 spans two panels of 32 columns, the second with padding; K = 300 ends inside a
// 128-block and a 32-product step; one row of A and one of B hold NaN / Inf codes.
TEST_CASE("gemm each element equals the 1 x 1 GEMM of its row and column, for every scale kind", "[gemm]") {
    const std::size_t M = 5, N = 40, K = 300, kb = (K + 127) / 128;
    std::mt19937 rng(49);
    Case c(M, N, K, Format::e4m3, Format::e5m2);
    fill(c.a, Format::e4m3, rng);
    fill(c.b, Format::e5m2, rng);
    c.a[2 * K + 7] = 0x7F;     // E4M3 NaN
    c.b[33 * K + 250] = 0x7C;  // E5M2 +Inf
    std::uniform_real_distribution<float> scale(0.25f, 4.0f);
    const std::vector<const char*> models = {"exact",
                                             "fp32",
                                             "sm90",
                                             "sm90-fast",
                                             "deepseek-128",
                                             "h100tc",
                                             "sm90-splitk:128",
                                             "sm90-fast-splitk:256",
                                             "aligned:align=rne,sticky=1"};
    for (const ScaleKind kind : {ScaleKind::tensor, ScaleKind::row, ScaleKind::block}) {
        c.rq.a.scale_kind = c.rq.b.scale_kind = kind;
        c.sa.resize(scale_count_for(kind, false, M, K));
        c.sb.resize(scale_count_for(kind, true, N, K));
        for (auto& s : c.sa) s = scale(rng);
        for (auto& s : c.sb) s = scale(rng);
        for (const char* name : models) {
            const AccumModel m = model(name);
            const auto d = mm(c.request(), m);
            for (std::size_t i = 0; i < M; ++i)
                for (std::size_t j = 0; j < N; ++j) {
                    Case one(1, 1, K, Format::e4m3, Format::e5m2);
                    std::copy(c.a.begin() + i * K, c.a.begin() + (i + 1) * K, one.a.begin());
                    std::copy(c.b.begin() + j * K, c.b.begin() + (j + 1) * K, one.b.begin());
                    one.rq.a.scale_kind = one.rq.b.scale_kind = kind;
                    // The scales of row i of A and of row j of B (its 128-row block's, for blocks).
                    const std::size_t sa0 = kind == ScaleKind::tensor ? 0 : kind == ScaleKind::row ? i : i * kb;
                    const std::size_t sb0 = kind == ScaleKind::tensor ? 0 : kind == ScaleKind::row ? j : j / 128 * kb;
                    const std::size_t per = kind == ScaleKind::block ? kb : 1;
                    one.sa.assign(c.sa.begin() + sa0, c.sa.begin() + sa0 + per);
                    one.sb.assign(c.sb.begin() + sb0, c.sb.begin() + sb0 + per);
                    INFO(name << " row " << i << " column " << j);
                    REQUIRE(mm(one.request(), m)[0] == d[i * N + j]);
                }
        }
    }
}
