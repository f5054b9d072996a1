// validate() on the outputs of deliberately wrong "kernels" written independently in naive.hpp:
// every class must be reported, with the right counts, and the policy search must name the rule
// the kernel follows.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "fp8kit/validate.hpp"
#include "naive.hpp"

using namespace fp8kit;

namespace {

const Policy kCudaSat{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
const Policy kTorch{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_all_ones};
const Policy kMlDtypes{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet};

float f32(std::uint32_t b) { return naive::f32(b); }

// Random normal-range values, every E4M3 and E5M2 midpoint with near neighbours, and specials.
std::vector<float> inputs() {
    std::vector<float> x;
    std::mt19937_64 rng(42);
    for (int i = 0; i < 60000; ++i) {
        const std::uint64_t r = rng();
        const std::uint32_t exp = 127 - 14 + static_cast<std::uint32_t>(r % 25);  // 2^-14 .. 2^10
        x.push_back(f32(static_cast<std::uint32_t>((r >> 8) & 0x807FFFFFu) | (exp << 23)));
    }
    for (naive::Fmt f : {naive::Fmt::e4m3, naive::Fmt::e5m2}) {
        const int top = naive::max_code(f);
        for (int c = 0; c < top; ++c) {
            const double mid = (naive::value(f, c) + naive::value(f, c + 1)) / 2;
            for (double rel : {0.0, 0x1p-12, -0x1p-12, 0x1p-9, -0x1p-9, 0x1p-20}) {
                x.push_back(static_cast<float>(mid * (1 + rel)));
                x.push_back(static_cast<float>(-mid * (1 + rel)));
            }
        }
    }
    for (float s : {NAN, -NAN, INFINITY, -INFINITY, 1e6f, -1e6f, 500.0f, -470.0f, 464.0f, 448.0f, 61440.0f, -61439.0f,
                    0.0f, -0.0f, 0x1p-10f, -0x1p-11f, 0x1p-130f})
        x.push_back(s);
    return x;
}

std::vector<std::uint8_t> run_kernel(const std::vector<float>& x, const naive::Kernel& k) {
    std::vector<std::uint8_t> out;
    for (float v : x) out.push_back(naive::convert(k, v));
    return out;
}

template <class Fn>
std::vector<std::uint8_t> run_kernel(const std::vector<float>& x, const naive::Kernel& k, Fn pre) {
    std::vector<std::uint8_t> out;
    for (float v : x) out.push_back(naive::convert(k, pre(v)));
    return out;
}

ValidateReport check(const std::vector<float>& x, const std::vector<std::uint8_t>& codes, Format to, Policy p,
                     Scaling s = {}) {
    ValidateRequest rq{Wide::f32, x.data(), codes.data(), x.size(), to, p, s};
    return validate(rq);
}

std::uint64_t differing(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
    return n;
}

bool has_policy(const ValidateReport& r, Policy p) {
    return std::any_of(r.consistent_policies.begin(), r.consistent_policies.end(), [&](const Policy& q) {
        return q.rounding == p.rounding && q.overflow == p.overflow && q.nan == p.nan;
    });
}

bool has_profile(const ValidateReport& r, const std::string& name) {
    return std::find(r.consistent_profiles.begin(), r.consistent_profiles.end(), name) != r.consistent_profiles.end();
}

// All mismatches in one class, and the count the test computed itself.
void only_class(const ValidateReport& r, MismatchClass c, std::uint64_t expected) {
    INFO(r.summary());
    REQUIRE(expected > 0);
    CHECK(r.mismatches == expected);
    CHECK(r[c].count == expected);
    CHECK(r[c].examples.size() == std::min<std::uint64_t>(5, expected));
}

}  // namespace

TEST_CASE("validate: a correct kernel is bit-exact and its profile is found", "[validate]") {
    const auto x = inputs();
    const naive::Kernel sat{};  // nearest-even, saturating, NaN 0x7F
    const auto r = check(x, run_kernel(x, sat), Format::e4m3, kCudaSat);
    INFO(r.summary());
    CHECK(r.exact());
    CHECK(r.matches == x.size());
    CHECK(has_policy(r, kCudaSat));
    CHECK(has_profile(r, "cuda-satfinite"));
    CHECK_FALSE(has_profile(r, "torch"));
    CHECK(r.consistent_policies.size() == 1);  // the inputs hold ties, overflow, Inf and NaN of both signs

    naive::Kernel ml{naive::Fmt::e5m2, naive::Round::even, false, true, true, false};
    const auto r5 = check(x, run_kernel(x, ml), Format::e5m2, kMlDtypes);
    INFO(r5.summary());
    CHECK(r5.exact());
    CHECK(has_profile(r5, "ml_dtypes"));
    CHECK(describe_consistency(r5).find("profile ml_dtypes") != std::string::npos);
}

TEST_CASE("validate: ties away from zero are 'tie' and the policy nearest-away is named", "[validate]") {
    const auto x = inputs();
    naive::Kernel away{};
    away.round = naive::Round::away;
    const auto good = run_kernel(x, naive::Kernel{});
    const auto bad = run_kernel(x, away);
    const auto r = check(x, bad, Format::e4m3, kCudaSat);
    only_class(r, MismatchClass::tie, differing(good, bad));
    CHECK(has_policy(r, {Rounding::nearest_away, Overflow::saturate_all, NanEncoding::canonical}));
    CHECK(r.consistent_policies.size() == 1);
    CHECK(describe_consistency(r) == "equals nearest-away, saturate-all, NaN canonical");
    // Examples are the lowest differing indices, with both codes.
    const auto& ex = r[MismatchClass::tie].examples;
    std::size_t first = 0;
    while (good[first] == bad[first]) ++first;
    REQUIRE(!ex.empty());
    CHECK(ex[0].index == first);
    CHECK(ex[0].expected == good[first]);
    CHECK(ex[0].actual == bad[first]);
    CHECK(ex[0].input_bits == naive::bits(x[first]));
    CHECK(std::fabs(ex[0].scaled - ex[0].expected_value) == std::fabs(ex[0].scaled - ex[0].actual_value));
}

TEST_CASE("validate: truncation is 'direction' (and 'tie' at ties) and the policy toward-zero is named", "[validate]") {
    const auto x = inputs();
    naive::Kernel trunc{};
    trunc.round = naive::Round::trunc;
    const auto good = run_kernel(x, naive::Kernel{});
    const auto bad = run_kernel(x, trunc);
    const auto r = check(x, bad, Format::e4m3, kCudaSat);
    // At an exact tie that nearest-even rounds up, truncation picked the other neighbour of a
    // tie: that is the 'tie' class by definition; everywhere else it is 'direction'.
    std::uint64_t ties = 0;
    for (std::size_t i = 0; i < x.size(); ++i) ties += good[i] != bad[i] && naive::is_tie(naive::Fmt::e4m3, x[i]);
    INFO(r.summary());
    REQUIRE(ties > 0);
    CHECK(r.mismatches == differing(good, bad));
    CHECK(r[MismatchClass::tie].count == ties);
    CHECK(r[MismatchClass::direction].count == differing(good, bad) - ties);
    CHECK(has_policy(r, {Rounding::toward_zero, Overflow::saturate_all, NanEncoding::canonical}));
    CHECK(describe_consistency(r).find("toward-zero, saturate-all, NaN canonical") != std::string::npos);
}

TEST_CASE("validate: flushed subnormal results are 'flush-to-zero'", "[validate]") {
    const auto x = inputs();
    naive::Kernel ftz{};
    ftz.flush_subnormals = true;
    const auto good = run_kernel(x, naive::Kernel{});
    const auto bad = run_kernel(x, ftz);
    const auto r = check(x, bad, Format::e4m3, kCudaSat);
    only_class(r, MismatchClass::flush_to_zero, differing(good, bad));
    CHECK(r.consistent_policies.empty());
    CHECK(describe_consistency(r).find("no single policy") != std::string::npos);
}

TEST_CASE("validate: subnormal inputs treated as zero are 'flush-to-zero'", "[validate]") {
    // float32 subnormals times 2^127 land in E4M3's normal range; a DAZ kernel reads them as 0.
    std::vector<float> x;
    std::mt19937 rng(7);
    for (int i = 0; i < 5000; ++i) x.push_back(f32((rng() & 0x807FFFFFu) | (i % 2 ? 0x00800000u : 0u)));
    Scaling s;
    s.mode = ScaleMode::scale;
    s.value = 0x1p127f;
    std::vector<std::uint8_t> good, bad;
    for (float v : x) {
        good.push_back(naive::convert(naive::Kernel{}, v * s.value));
        const bool sub = std::fpclassify(v) == FP_SUBNORMAL;
        bad.push_back(naive::convert(naive::Kernel{}, (sub ? std::copysign(0.0f, v) : v) * s.value));
    }
    REQUIRE(check(x, good, Format::e4m3, kCudaSat, s).exact());
    only_class(check(x, bad, Format::e4m3, kCudaSat, s), MismatchClass::flush_to_zero, differing(good, bad));
}

TEST_CASE("validate: rounding through float16 or bfloat16 first is 'double-rounding'", "[validate]") {
    const auto x = inputs();
    const auto good = run_kernel(x, naive::Kernel{});
    SECTION("float16") {
        const auto bad = run_kernel(x, naive::Kernel{}, naive::via_f16);
        const auto r = check(x, bad, Format::e4m3, kCudaSat);
        only_class(r, MismatchClass::double_rounding, differing(good, bad));
        CHECK(r.consistent_policies.empty());
    }
    SECTION("bfloat16") {
        const auto bad = run_kernel(x, naive::Kernel{}, naive::via_bf16);
        only_class(check(x, bad, Format::e4m3, kCudaSat), MismatchClass::double_rounding, differing(good, bad));
    }
}

TEST_CASE("validate: saturating vs not is 'overflow' and the other profile is named", "[validate]") {
    const auto x = inputs();
    naive::Kernel nosat{};
    nosat.saturate = false;
    const auto sat_codes = run_kernel(x, naive::Kernel{});
    const auto nosat_codes = run_kernel(x, nosat);
    SECTION("reference saturates, kernel does not") {
        const auto r = check(x, nosat_codes, Format::e4m3, kCudaSat);
        only_class(r, MismatchClass::overflow, differing(sat_codes, nosat_codes));
        CHECK(has_profile(r, "cuda-nosat"));
        CHECK(has_policy(r, {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::canonical}));
    }
    SECTION("reference is torch (no saturation), kernel saturates") {
        naive::Kernel sat_signed{};
        sat_signed.nan_signed = true;
        nosat.nan_signed = true;
        const auto good = run_kernel(x, nosat), bad = run_kernel(x, sat_signed);
        const auto r = check(x, bad, Format::e4m3, kTorch);
        only_class(r, MismatchClass::overflow, differing(good, bad));
        CHECK(has_policy(r, {Rounding::nearest_even, Overflow::saturate_all, NanEncoding::signed_all_ones}));
    }
}

TEST_CASE("validate: a canonicalised NaN is 'nan-encoding'", "[validate]") {
    const auto x = inputs();
    SECTION("e4m3: torch keeps the NaN's sign, the kernel writes 0x7F") {
        naive::Kernel torch{}, canon{};
        torch.saturate = canon.saturate = false;
        torch.nan_signed = true;
        const auto good = run_kernel(x, torch), bad = run_kernel(x, canon);
        const auto r = check(x, bad, Format::e4m3, kTorch);
        only_class(r, MismatchClass::nan_encoding, differing(good, bad));
        CHECK(has_profile(r, "cuda-nosat"));
    }
    SECTION("e5m2: ml_dtypes writes quiet NaNs 0x7E/0xFE, the kernel 0x7F") {
        naive::Kernel ml{naive::Fmt::e5m2, naive::Round::even, false, true, true, false};
        naive::Kernel canon{naive::Fmt::e5m2, naive::Round::even, false, false, false, false};
        const auto good = run_kernel(x, ml), bad = run_kernel(x, canon);
        const auto r = check(x, bad, Format::e5m2, kMlDtypes);
        only_class(r, MismatchClass::nan_encoding, differing(good, bad));
        CHECK(has_policy(r, {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::canonical}));
    }
}

namespace {

// Values whose quotient by S lands within a few float32 ulps of an E4M3 midpoint, where x / S and
// x * fl32(1/S) can round to different codes.
std::vector<float> near_scaled_midpoints(float s) {
    std::vector<float> x;
    for (int c = 0; c < 0x7E; ++c) {
        const double mid = (naive::value(naive::Fmt::e4m3, c) + naive::value(naive::Fmt::e4m3, c + 1)) / 2;
        float v = static_cast<float>(mid * s);
        for (int k = 0; k < 40; ++k) v = std::nextafter(v, 0.0f);
        for (int k = 0; k < 81; ++k, v = std::nextafter(v, INFINITY)) {
            x.push_back(v);
            x.push_back(-v);
        }
    }
    return x;
}

}  // namespace

TEST_CASE("validate: x / scale_inv instead of x * (1/scale_inv) is 'scale'", "[validate]") {
    const float sinv = 3.0f;  // 1/3 is inexact in float32
    const auto x = near_scaled_midpoints(sinv);
    Scaling s;
    s.mode = ScaleMode::scale_inv;
    s.value = sinv;
    const float recip = 1.0f / sinv;
    const auto good = run_kernel(x, naive::Kernel{}, [&](float v) { return v * recip; });
    const auto bad = run_kernel(x, naive::Kernel{}, [&](float v) { return v / sinv; });
    REQUIRE(check(x, good, Format::e4m3, kCudaSat, s).exact());
    const auto r = check(x, bad, Format::e4m3, kCudaSat, s);
    only_class(r, MismatchClass::scale, differing(good, bad));
    CHECK(r[MismatchClass::scale].examples[0].scale == 3.0);
}

TEST_CASE("validate: block scales, 1x128 and mx32", "[validate]") {
    const std::size_t rows = 6, cols = 300;  // ragged last block on purpose
    std::vector<float> x(rows * cols);
    std::mt19937 rng(3);
    for (auto& v : x) v = std::ldexp(static_cast<float>(rng() % 100000) / 1000.0f - 50.0f, static_cast<int>(rng() % 5));
    SECTION("1x128 float32 scale_inv: dividing instead of multiplying by the reciprocal") {
        const std::size_t per_row = 3;
        std::vector<float> scales;
        for (std::size_t i = 0; i < rows * per_row; ++i) scales.push_back(0.3f + 0.17f * static_cast<float>(i));
        Scaling s{ScaleMode::scale_inv, BlockLayout::b1x128, 1.0f, scales.data(), scales.size(), rows, cols};
        // Every element a few float32 ulps from an E4M3 midpoint times its block's scale.
        for (std::size_t i = 0; i < x.size(); ++i) {
            const int c = static_cast<int>(i % 0x7E);
            const double mid = (naive::value(naive::Fmt::e4m3, c) + naive::value(naive::Fmt::e4m3, c + 1)) / 2;
            float v = static_cast<float>(mid * scales[(i / cols) * per_row + (i % cols) / 128]);
            for (std::size_t k = 0; k < i % 7; ++k) v = std::nextafter(v, INFINITY);
            for (std::size_t k = 0; k < 3; ++k) v = std::nextafter(v, 0.0f);
            x[i] = (i % 2) ? -v : v;
        }
        std::vector<std::uint8_t> good, bad;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const float sc = scales[(i / cols) * per_row + (i % cols) / 128];
            good.push_back(naive::convert(naive::Kernel{}, x[i] * (1.0f / sc)));
            bad.push_back(naive::convert(naive::Kernel{}, x[i] / sc));
        }
        REQUIRE(check(x, good, Format::e4m3, kCudaSat, s).exact());
        const auto r = check(x, bad, Format::e4m3, kCudaSat, s);
        only_class(r, MismatchClass::scale, differing(good, bad));
        // A kernel that indexes the blocks column-major gets the wrong scale: 'other' or 'scale'
        // are both wrong answers to "exact?", which is what matters here.
        std::vector<std::uint8_t> transposed;
        for (std::size_t i = 0; i < x.size(); ++i) {
            const std::size_t b = (i / cols) + rows * ((i % cols) / 128);
            transposed.push_back(naive::convert(naive::Kernel{}, x[i] * (1.0f / scales[b % scales.size()])));
        }
        CHECK_FALSE(check(x, transposed, Format::e4m3, kCudaSat, s).exact());
    }
    SECTION("mx32 with E8M0 (power-of-two) scales: division equals multiplication, bit-exact") {
        std::vector<float> scales;
        for (std::size_t i = 0; i < rows * 10; ++i) scales.push_back(std::ldexp(1.0f, static_cast<int>(i % 7) - 3));
        Scaling s{ScaleMode::scale_inv, BlockLayout::mx32, 1.0f, scales.data(), scales.size(), rows, cols};
        std::vector<std::uint8_t> codes;
        for (std::size_t i = 0; i < x.size(); ++i)
            codes.push_back(naive::convert(naive::Kernel{}, x[i] / scales[(i / cols) * 10 + (i % cols) / 32]));
        CHECK(check(x, codes, Format::e4m3, kCudaSat, s).exact());
        Scaling wrong = s;
        wrong.block_count = 5;
        CHECK_THROWS_AS(check(x, codes, Format::e4m3, kCudaSat, wrong), std::invalid_argument);
    }
}

TEST_CASE("validate: the same report for any thread count", "[validate]") {
    const auto x = inputs();
    naive::Kernel away{};
    away.round = naive::Round::away;
    away.saturate = false;
    const auto bad = run_kernel(x, away);
    const int before = omp_get_max_threads();
    std::vector<std::string> reports;
    for (int t : {1, 2, 3, 7}) {
        omp_set_num_threads(t);
        reports.push_back(check(x, bad, Format::e4m3, kCudaSat).json());
    }
    omp_set_num_threads(before);
    for (const auto& r : reports) CHECK(r == reports[0]);
}

TEST_CASE("validate: impossible requests are refused", "[validate]") {
    const std::vector<float> x{1.0f};
    const std::vector<std::uint8_t> c{0x38};
    CHECK_THROWS_AS(check(x, c, Format::e4m3, {Rounding::stochastic, Overflow::saturate_all, NanEncoding::canonical}),
                    std::invalid_argument);
    ValidateRequest rq{Wide::f32, nullptr, c.data(), 1, Format::e4m3, kCudaSat, {}};
    CHECK_THROWS_AS(validate(rq), std::invalid_argument);
    rq.n = 0;
    CHECK(validate(rq).exact());
}

TEST_CASE("validate: large inputs (code tables) give the same classes and policies", "[validate]") {
    // Three copies of the inputs: past the size where validate() switches to code tables.
    const auto one = inputs();
    std::vector<float> x;
    for (int c = 0; c < 3; ++c) x.insert(x.end(), one.begin(), one.end());
    REQUIRE(x.size() >= (std::size_t{1} << 17));
    const auto good = run_kernel(x, naive::Kernel{});
    naive::Kernel away{}, trunc{}, nosat{};
    away.round = naive::Round::away;
    trunc.round = naive::Round::trunc;
    nosat.saturate = false;

    const auto exact = check(x, good, Format::e4m3, kCudaSat);
    CHECK(exact.exact());
    CHECK(exact.consistent_policies.size() == 1);
    CHECK(has_profile(exact, "cuda-satfinite"));

    const auto bad_away = run_kernel(x, away);
    const auto ra = check(x, bad_away, Format::e4m3, kCudaSat);
    only_class(ra, MismatchClass::tie, differing(good, bad_away));
    CHECK(describe_consistency(ra) == "equals nearest-away, saturate-all, NaN canonical");

    const auto bad_trunc = run_kernel(x, trunc);
    const auto rt = check(x, bad_trunc, Format::e4m3, kCudaSat);
    CHECK(rt.mismatches == differing(good, bad_trunc));
    CHECK(rt[MismatchClass::tie].count + rt[MismatchClass::direction].count == rt.mismatches);
    CHECK(has_policy(rt, {Rounding::toward_zero, Overflow::saturate_all, NanEncoding::canonical}));

    const auto bad_nosat = run_kernel(x, nosat);
    const auto rn = check(x, bad_nosat, Format::e4m3, kCudaSat);
    only_class(rn, MismatchClass::overflow, differing(good, bad_nosat));
    CHECK(has_profile(rn, "cuda-nosat"));
    CHECK(rn.consistent_policies.size() == 1);

    const auto bad_f16 = run_kernel(x, naive::Kernel{}, naive::via_f16);
    const auto rd = check(x, bad_f16, Format::e4m3, kCudaSat);
    only_class(rd, MismatchClass::double_rounding, differing(good, bad_f16));
    CHECK(rd.consistent_policies.empty());
}

TEST_CASE("validate: float16 and bfloat16 inputs with a scale, every bit pattern", "[validate]") {
    const float sinv = 3.0f;
    Scaling s;
    s.mode = ScaleMode::scale_inv;
    s.value = sinv;
    for (Wide w : {Wide::f16, Wide::bf16}) {
        std::vector<std::uint16_t> bits(65536);
        std::vector<std::uint8_t> good, bad;
        for (std::uint32_t b = 0; b < 65536; ++b) {
            bits[b] = static_cast<std::uint16_t>(b);
            float xf;
            if (w == Wide::bf16) {
                xf = naive::f32(b << 16);
            } else {
                xf = naive::from_f16(static_cast<std::uint16_t>(b));
            }
            good.push_back(naive::convert(naive::Kernel{}, xf * (1.0f / sinv)));
            bad.push_back(naive::convert(naive::Kernel{}, xf / sinv));
        }
        ValidateRequest rq{w, bits.data(), good.data(), bits.size(), Format::e4m3, kCudaSat, s};
        const auto r = validate(rq);
        INFO(name(w) << "\n" << r.summary());
        CHECK(r.exact());
        CHECK(has_profile(r, "cuda-satfinite"));
        rq.codes = bad.data();
        const auto rb = validate(rq);
        INFO(rb.summary());
        CHECK(rb.mismatches == differing(good, bad));
        CHECK(rb[MismatchClass::scale].count == rb.mismatches);
    }
}
