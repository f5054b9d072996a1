// Every statistic against a per-element brute-force computation that shares nothing with the
// implementation but the reference conversion (emu::encode): values in long double / __float128,
// exponents with frexp, overflow against the literal thresholds of the issue.
#include <catch2/catch.hpp>

#include <omp.h>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "float_bits.hpp"

using namespace fp8kit;

namespace {

using fp8kit_test::bits;
using fp8kit_test::from_bits;
using fp8kit_test::kInf;
using fp8kit_test::kNaN;

constexpr Policy kSat{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
constexpr Policy kNosat{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_all_ones};

struct Ref {
    std::uint64_t numel = 0, zeros = 0, nan = 0, inf = 0, underflow = 0, subnormal = 0, overflow = 0, te_overflow = 0,
                  nz_x = 0, nz_q = 0;
    long double amax = 0, min_nonzero = 0, sum_x2 = 0, sum_err2 = 0;
    std::vector<std::uint64_t> hist = std::vector<std::uint64_t>(kExpHistBins, 0);
};

// The overflow thresholds for nearest-even, written out: E4M3 overflows above 464 (the
// midpoint 464 between 448 and 480 ties to 448, whose mantissa 110 is even); E5M2 at 61440 and
// above (the midpoint between 57344 and 65536 ties up, 57344's mantissa 11 is odd).
bool rne_overflow(Format f, long double s) {
    const long double a = std::fabs(s);
    if (f == Format::e4m3) return a > 464.0L;
    return a >= 61440.0L;
}

// Brute force over `x` (given as exact long double values plus the float32 scaled value).
Ref brute(const std::vector<long double>& xs, const std::vector<float>& ss, Format f, float scale_inv,
          const Policy& pol, std::uint64_t seed = 0) {
    Ref r;
    const FormatInfo fi = format_info(f);
    bool have_nz = false;
    for (std::size_t i = 0; i < xs.size(); ++i) {
        const long double x = xs[i];
        const float s = ss[i];
        const std::uint32_t rnd = pol.rounding == Rounding::stochastic ? emu::stochastic_bits(seed, i) : 0;
        const std::uint8_t q = emu::encode(f, Wide::f32, bits(s), pol, rnd);
        const long double dq = decode_value(f, q);
        ++r.numel;
        r.nz_x += (x != 0 || std::isnan(x));
        r.nz_q += (dq != 0 || std::isnan(dq));
        // histogram via frexp: |s| = m * 2^e with m in [0.5, 1) -> floor(log2|s|) = e - 1
        if (s == 0)
            ++r.hist[kExpHistZeroBin];
        else if (!std::isfinite(s))
            ++r.hist[kExpHistNonfiniteBin];
        else {
            int e;
            std::frexp(s, &e);
            ++r.hist[exp_hist_bin(e - 1)];
        }
        const long double te_thr = static_cast<long double>(static_cast<float>(fi.max_finite) * scale_inv);
        if (std::isnan(x)) {
            ++r.nan;
            continue;
        }
        if (std::isinf(x)) {
            ++r.inf;
            r.te_overflow += 1;
            continue;
        }
        if (std::fabs(x) > te_thr) ++r.te_overflow;
        if (x == 0)
            ++r.zeros;
        else {
            if (dq == 0) ++r.underflow;
            if (dq != 0 && std::fabs(dq) < fi.min_normal && std::isfinite(dq)) ++r.subnormal;
            if (!have_nz || std::fabs(x) < r.min_nonzero) r.min_nonzero = std::fabs(x);
            have_nz = true;
        }
        r.amax = std::max(r.amax, std::fabs(x));
        if (pol.rounding == Rounding::nearest_even) {
            r.overflow += rne_overflow(f, s) || std::isinf(s);
        } else {
            const Policy nosat{pol.rounding, Overflow::no_saturate, pol.nan};
            const auto c = classify(f, emu::encode(f, Wide::f32, bits(s), nosat, rnd));
            r.overflow += c == CodeClass::nan || c == CodeClass::infinity;
        }
        r.sum_x2 += x * x;
        const long double xh = dq * static_cast<long double>(scale_inv);
        r.sum_err2 += std::isfinite(xh) ? (x - xh) * (x - xh) : std::numeric_limits<long double>::infinity();
    }
    return r;
}

// Sums: the implementation adds binary64 terms in chunk order, the reference long double terms
// in index order, so they may differ in the last bits; 1e-12 relative covers that for these sizes.
void check_against(const QuantStats& st, const Ref& r) {
    CHECK(st.numel == r.numel);
    CHECK(st.zeros == r.zeros);
    CHECK(st.nan == r.nan);
    CHECK(st.inf == r.inf);
    CHECK(st.underflow == r.underflow);
    CHECK(st.subnormal == r.subnormal);
    CHECK(st.overflow == r.overflow);
    CHECK(st.te_overflow == r.te_overflow);
    CHECK(st.te_underflow == static_cast<std::int64_t>(r.nz_x) - static_cast<std::int64_t>(r.nz_q));
    CHECK(st.amax == static_cast<double>(r.amax));
    CHECK(st.min_nonzero == static_cast<double>(r.min_nonzero));
    for (std::size_t b = 0; b < kExpHistBins; ++b) {
        INFO("bin " << b);
        CHECK(st.exp_hist[b] == r.hist[b]);
    }
    if (std::isinf(r.sum_err2))
        CHECK(std::isinf(st.sum_err2));
    else
        CHECK(st.sum_err2 == Approx(static_cast<double>(r.sum_err2)).epsilon(1e-12).margin(0));
    CHECK(st.sum_x2 == Approx(static_cast<double>(r.sum_x2)).epsilon(1e-12).margin(0));
}

// Adversarial float32 values for a given format and scale: ties between codes, the overflow
// boundaries, FP8 subnormals and their halfway points, float32 subnormals, specials.
std::vector<float> adversarial(float scale) {
    std::vector<float> v = {0.0f,     -0.0f,        kNaN,          -kNaN,   kInf, -kInf, FLT_MAX,
                            -FLT_MAX, from_bits(1), -from_bits(1), FLT_MIN, 1.0f, -1.0f};
    const float targets[] = {448,      464,        480,      240,      57344,     61440,      65536,
                             1.0625f,  1.1875f,    0.0625f,  0x1p-9f,  0x1p-10f,  0x1.8p-10f, 0x1p-16f,
                             0x1p-17f, 0x1.8p-17f, 0x1p-15f, 0x1p-14f, 0x1.4p-7f, 0x1.2p-7f,  0x1.1p-7f};
    for (float t : targets) {
        for (float y : {t, std::nextafter(t, 0.0f), std::nextafter(t, kInf)}) {
            v.push_back(y / scale);  // scale is a power of two in these tests, so exact
            v.push_back(-y / scale);
        }
    }
    return v;
}

std::vector<float> random_floats(std::size_t n, std::uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    std::uniform_int_distribution<int> e(-30, 12);
    std::vector<float> v(n);
    for (auto& x : v) x = std::ldexp(nd(rng), e(rng));
    return v;
}

QuantStats stats_f32(const std::vector<float>& v, const QuantConfig& c) {
    return compute_stats(v.data(), Wide::f32, v.size(), c);
}

Ref brute_f32(const std::vector<float>& v, Format f, float scale, const Policy& p, std::uint64_t seed = 0) {
    std::vector<long double> xs(v.begin(), v.end());
    std::vector<float> ss;
    for (float x : v) ss.push_back(x * scale);
    return brute(xs, ss, f, 1.0f / scale, p, seed);
}

// binary16 from its fields: (-1)^s * 2^(e-15) * 1.m, subnormals 2^-14 * 0.m.
long double f16_value(std::uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const long double sign = (h & 0x8000) ? -1.0L : 1.0L;
    if (e == 31) return m ? std::numeric_limits<long double>::quiet_NaN() : sign * HUGE_VALL;
    if (e == 0) return sign * std::ldexp(static_cast<long double>(m), -24);
    return sign * std::ldexp(static_cast<long double>(m + 1024), e - 25);
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("statistics equal a brute-force computation on adversarial float32", "[lib][stats]") {
    for (Format f : {Format::e4m3, Format::e5m2}) {
        for (float scale : {1.0f, 0x1p-4f, 0x1p6f}) {
            for (Policy p : {kSat, kNosat}) {
                INFO(name(f) << " scale " << scale << " overflow " << name(p.overflow));
                const auto v = adversarial(scale);
                check_against(stats_f32(v, {f, scale, p}), brute_f32(v, f, scale, p));
            }
        }
    }
}

TEST_CASE("statistics equal a brute-force computation on random float32 (several chunks)", "[lib][stats]") {
    auto v = random_floats(200000, 7);
    v[12345] = kNaN;
    v[54321] = -kInf;
    v[100] = 0.0f;
    for (Format f : {Format::e4m3, Format::e5m2}) {
        const float scale = 3.0f;  // not a power of two: fl32(x * 3) rounds
        INFO(name(f));
        check_against(stats_f32(v, {f, scale, kSat}), brute_f32(v, f, scale, kSat));
    }
}

TEST_CASE("directed and stochastic rounding overflow counts", "[lib][stats]") {
    auto v = adversarial(1.0f);
    const auto r = random_floats(5000, 3);
    v.insert(v.end(), r.begin(), r.end());
    for (Rounding ro : {Rounding::toward_zero, Rounding::toward_positive, Rounding::toward_negative,
                        Rounding::nearest_away, Rounding::stochastic}) {
        INFO(name(ro));
        const Policy p{ro, Overflow::saturate_all, NanEncoding::canonical};
        QuantConfig c{Format::e4m3, 1.0f, p};
        c.seed = 99;
        check_against(stats_f32(v, c), brute_f32(v, Format::e4m3, 1.0f, p, 99));
    }
}

TEST_CASE("f64, f16 and bf16 inputs", "[lib][stats]") {
    SECTION("f64: fl32(x * scale) rounded once from the exact product") {
        std::vector<double> xs = {
            1.0, -2.5, 0.0, std::nan(""), 1e300, 1e-300, 448.0, 464.0, std::nextafter(464.0, 1000.0), 61440.0};
        // x = 1 + 2^-24 + 2^-40 times scale 1: the binary64 value is above the float32 midpoint
        // 1 + 2^-24 so it rounds up; x*3 cases put the product next to a midpoint.
        xs.push_back(1.0 + 0x1p-24 + 0x1p-40);
        xs.push_back(1.0 + 0x1p-24);
        std::mt19937_64 rng(5);
        std::uniform_real_distribution<double> ud(-600.0, 600.0);
        for (int i = 0; i < 20000; ++i) xs.push_back(ud(rng));
        // Products that land exactly on a float32 midpoint in binary64 but not exactly:
        // x = (1 + 2^-24 + 2^-60) / 3 rounded to binary64, times 3.
        for (int k = 0; k < 200; ++k) xs.push_back((1.0 + 0x1p-24 + std::ldexp(1.0, -50 - k % 10)) / 3.0);
        for (float scale : {1.0f, 3.0f}) {
            std::vector<long double> lx(xs.begin(), xs.end());
            std::vector<float> ss;
            for (double x : xs)
                ss.push_back(static_cast<float>(static_cast<__float128>(x) * static_cast<__float128>(scale)));
            const QuantStats st = compute_stats(xs.data(), Wide::f64, xs.size(), {Format::e4m3, scale, kSat});
            check_against(st, brute(lx, ss, Format::e4m3, 1.0f / scale, kSat));
        }
    }
    SECTION("f16 and bf16: all 65536 patterns") {
        std::vector<std::uint16_t> all(65536);
        for (int i = 0; i < 65536; ++i) all[i] = static_cast<std::uint16_t>(i);
        for (Wide w : {Wide::f16, Wide::bf16}) {
            INFO(name(w));
            std::vector<long double> lx;
            std::vector<float> ss;
            for (std::uint16_t h : all) {
                float x;
                if (w == Wide::bf16)
                    x = from_bits(static_cast<std::uint32_t>(h) << 16);
                else
                    x = static_cast<float>(f16_value(h));
                lx.push_back(x);
                ss.push_back(x * 0.25f);
            }
            const QuantStats st = compute_stats(all.data(), w, all.size(), {Format::e5m2, 0.25f, kNosat});
            check_against(st, brute(lx, ss, Format::e5m2, 4.0f, kNosat));
        }
    }
}

TEST_CASE("derived statistics: mse, sqnr, dynamic range, edge cases", "[lib][stats]") {
    // Hand-worked: x = {1, 3} cast to E4M3 with scale 1 is exact: error 0 -> sqnr +Inf, mse 0.
    std::vector<float> exact = {1.0f, 3.0f};
    auto st = stats_f32(exact, {Format::e4m3, 1.0f, kSat});
    CHECK(st.mse() == 0.0);
    CHECK(std::isinf(st.sqnr_db()));
    CHECK(st.sqnr_db() > 0);
    CHECK(st.dynamic_range_binades() == Approx(std::log2(3.0)).epsilon(1e-15));
    // x = {1.0625}: E4M3 spacing at 1 is 0.125; 1.0625 is a tie and goes to even (1.0):
    // error 0.0625, sum x^2 = 1.12890625, sum err^2 = 0.00390625 -> 10 log10(289) dB.
    std::vector<float> tie = {1.0625f};
    st = stats_f32(tie, {Format::e4m3, 1.0f, kSat});
    CHECK(st.sum_err2 == 0.00390625);
    CHECK(st.sqnr_db() == Approx(10.0 * std::log10(289.0)).epsilon(1e-14));
    CHECK(st.mse() == 0.00390625);
    // All zero: error 0 -> +Inf; only NaN: mse NaN, dynamic range 0.
    std::vector<float> zeros(10, 0.0f);
    st = stats_f32(zeros, {Format::e4m3, 1.0f, kSat});
    CHECK(std::isinf(st.sqnr_db()));
    CHECK(st.dynamic_range_binades() == 0.0);
    std::vector<float> nans(3, kNaN);
    st = stats_f32(nans, {Format::e4m3, 1.0f, kSat});
    CHECK(std::isnan(st.mse()));
    CHECK(st.exp_hist[kExpHistNonfiniteBin] == 3);
    // Everything underflows: x tiny, error = x -> sqnr exactly 0 dB.
    std::vector<float> tiny(4, 1e-30f);
    st = stats_f32(tiny, {Format::e4m3, 1.0f, kSat});
    CHECK(st.underflow == 4);
    CHECK(st.sqnr_db() == 0.0);
    // Bad scales are refused.
    CHECK_THROWS_AS(stats_f32(exact, {Format::e4m3, 0.0f, kSat}), std::invalid_argument);
    CHECK_THROWS_AS(stats_f32(exact, {Format::e4m3, kInf, kSat}), std::invalid_argument);
    CHECK_THROWS_AS(stats_f32(exact, {Format::e4m3, kNaN, kSat}), std::invalid_argument);
    // Empty input.
    st = compute_stats(nullptr, Wide::f32, 0, {Format::e4m3, 1.0f, kSat});
    CHECK(st.numel == 0);
}

TEST_CASE("amax_of: NaN ignored, Inf kept, f64 rounded once", "[lib][stats]") {
    std::vector<float> v = {1.0f, kNaN, -3.0f, 2.0f};
    CHECK(amax_of(v.data(), Wide::f32, v.size()) == 3.0f);
    v.push_back(-kInf);
    CHECK(std::isinf(amax_of(v.data(), Wide::f32, v.size())));
    std::vector<float> only_nan = {kNaN, kNaN};
    CHECK(amax_of(only_nan.data(), Wide::f32, 2) == 0.0f);
    CHECK(amax_of(nullptr, Wide::f32, 0) == 0.0f);
    std::vector<double> d = {1.0 + 0x1p-30, -0.5};
    CHECK(amax_of(d.data(), Wide::f64, 2) == 1.0f);
    std::vector<double> big = {1e300};
    CHECK(std::isinf(amax_of(big.data(), Wide::f64, 1)));
    std::vector<std::uint16_t> bf = {0x4040, 0xC080, 0x7FC0};  // 3, -4, NaN
    CHECK(amax_of(bf.data(), Wide::bf16, 3) == 4.0f);
}

TEST_CASE("bitwise identical results for 1, 2 and 8 threads, and merge of chunk-aligned halves", "[lib][stats]") {
    auto v = random_floats((std::size_t{1} << 16) * 5 + 777, 11);
    v[3] = kNaN;
    v[70000] = kInf;
    const QuantConfig c{Format::e4m3, 7.0f, kSat};
    std::vector<QuantStats> runs;
    const int saved = omp_get_max_threads();
    for (int t : {1, 2, 8}) {
        omp_set_num_threads(t);
        runs.push_back(stats_f32(v, c));
    }
    omp_set_num_threads(saved);
    for (std::size_t i = 1; i < runs.size(); ++i) {
        const auto& a = runs[0];
        const auto& b = runs[i];
        CHECK(same_bits(a.sum_x2, b.sum_x2));
        CHECK(same_bits(a.sum_err2, b.sum_err2));
        CHECK(same_bits(a.amax, b.amax));
        CHECK(same_bits(a.min_nonzero, b.min_nonzero));
        CHECK(a.exp_hist == b.exp_hist);
        CHECK(a.underflow == b.underflow);
        CHECK(a.subnormal == b.subnormal);
        CHECK(a.overflow == b.overflow);
    }
    // Splitting and merging: counts, extrema and histogram exact; the sums are regrouped
    // ((a+b)+(c+d) instead of ((a+b)+c)+d), so they agree to rounding only.
    const std::size_t half = std::size_t{1} << 17;
    QuantStats m = compute_stats(v.data(), Wide::f32, half, c);
    m.merge(compute_stats(v.data() + half, Wide::f32, v.size() - half, c));
    CHECK(m.sum_x2 == Approx(runs[0].sum_x2).epsilon(1e-13));
    CHECK(m.sum_err2 == Approx(runs[0].sum_err2).epsilon(1e-13));
    CHECK(same_bits(m.amax, runs[0].amax));
    CHECK(same_bits(m.min_nonzero, runs[0].min_nonzero));
    CHECK(m.overflow == runs[0].overflow);
    CHECK(m.numel == runs[0].numel);
    CHECK(m.exp_hist == runs[0].exp_hist);
}

TEST_CASE("block statistics against a per-tile brute force", "[lib][stats]") {
    const std::size_t rows = 130, cols = 300;  // partial tiles in both directions
    auto v = random_floats(rows * cols, 21);
    v[5 * cols + 7] = kNaN;
    for (std::size_t c = 0; c < cols; ++c) v[77 * cols + c] = 0.0f;  // an all-zero row
    for (const char* preset : {"te-block", "deepseek-v3", "mxfp8", "mx-ocp", "torchao-rowwise"}) {
        for (Role role : {Role::activation, Role::weight}) {
            INFO(preset << " " << name(role));
            const RecipeSpec r = parse_recipe(preset);
            const BlockRecipe br = block_recipe(r, role, cols);
            const BlockStats bs = compute_block_stats(v.data(), Wide::f32, rows, cols, br);
            const std::size_t bh = static_cast<std::size_t>(br.block_rows),
                              bw = static_cast<std::size_t>(br.block_cols);
            const std::size_t gr = (rows + bh - 1) / bh, gc = (cols + bw - 1) / bw;
            REQUIRE(bs.blocks == gr * gc);
            std::uint64_t under = 0, sub = 0, over = 0, numel = 0;
            double dr_max = 0;
            for (std::size_t bi = 0; bi < gr; ++bi)
                for (std::size_t bj = 0; bj < gc; ++bj) {
                    std::vector<float> tile;
                    for (std::size_t i = bi * bh; i < std::min(rows, bi * bh + bh); ++i)
                        for (std::size_t j = bj * bw; j < std::min(cols, bj * bw + bw); ++j)
                            tile.push_back(v[i * cols + j]);
                    float am = 0;
                    for (float x : tile)
                        if (std::fabs(x) > am) am = std::fabs(x);
                    const ScalePair sp = recipe_scale(r, role, am);
                    CHECK(bits(bs.scale_inv[bi * gc + bj]) == bits(sp.scale_inv));
                    std::vector<long double> lx(tile.begin(), tile.end());
                    std::vector<float> ss;
                    for (float x : tile) ss.push_back(x * sp.scale);
                    const Ref t = brute(lx, ss, br.format, sp.scale_inv, br.policy);
                    under += t.underflow;
                    sub += t.subnormal;
                    over += t.overflow;
                    numel += t.numel;
                    if (t.min_nonzero > 0)
                        dr_max = std::max(dr_max, static_cast<double>(std::log2(t.amax) - std::log2(t.min_nonzero)));
                }
            CHECK(bs.total.numel == numel);
            CHECK(bs.total.underflow == under);
            CHECK(bs.total.subnormal == sub);
            CHECK(bs.total.overflow == over);
            CHECK(bs.dr_max == Approx(dr_max).epsilon(1e-12));
        }
    }
    CHECK_THROWS_AS(block_recipe(parse_recipe("te-delayed"), Role::activation, cols), std::invalid_argument);

    // Tiles are reduced in tile order: the same bits for 1 and 8 threads.
    const BlockRecipe br = block_recipe(parse_recipe("te-block"), Role::activation, cols);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    const BlockStats a = compute_block_stats(v.data(), Wide::f32, rows, cols, br);
    omp_set_num_threads(8);
    const BlockStats b = compute_block_stats(v.data(), Wide::f32, rows, cols, br);
    omp_set_num_threads(saved);
    CHECK(same_bits(a.total.sum_err2, b.total.sum_err2));
    CHECK(same_bits(a.total.sum_x2, b.total.sum_x2));
    CHECK(same_bits(a.dr_mean, b.dr_mean));
    CHECK(a.scale_inv == b.scale_inv);
}

namespace {

void check_identical(const QuantStats& a, const QuantStats& b) {
    CHECK(a.numel == b.numel);
    CHECK(a.zeros == b.zeros);
    CHECK(a.nan == b.nan);
    CHECK(a.inf == b.inf);
    CHECK(a.underflow == b.underflow);
    CHECK(a.subnormal == b.subnormal);
    CHECK(a.overflow == b.overflow);
    CHECK(a.te_underflow == b.te_underflow);
    CHECK(a.te_overflow == b.te_overflow);
    CHECK(same_bits(a.amax, b.amax));
    CHECK(same_bits(a.min_nonzero, b.min_nonzero));
    CHECK(same_bits(a.sum_x2, b.sum_x2));
    CHECK(same_bits(a.sum_err2, b.sum_err2));
    CHECK(a.exp_hist == b.exp_hist);
}

// compute_stats under the fast loop and under the general one.
template <class T>
void check_paths(const std::vector<T>& v, Wide w, const QuantConfig& c) {
    set_stats_path(StatsPath::fast);
    const QuantStats fast = compute_stats(v.data(), w, v.size(), c);
    set_stats_path(StatsPath::general);
    const QuantStats general = compute_stats(v.data(), w, v.size(), c);
    set_stats_path(StatsPath::fast);
    check_identical(fast, general);
}

}  // namespace

// The fast loop (AVX-512) adds its sums in the same lanes and order as the general loop, so every
// number, sums included, must be bit for bit the same. Both are also checked against the brute
// force above (the default path is the fast one where the CPU has AVX-512).
TEST_CASE("fast and general statistics loops give identical bits", "[lib][stats]") {
    const char* loop = stats_loop(Format::e4m3, Wide::f32, kSat);
    if (std::string(loop) != "avx512")
        WARN("this CPU has no AVX-512: the fast loop is not used here, both runs take the general loop");
    auto v = random_floats(200003, 11);  // several chunks and a ragged tail
    const auto adv = adversarial(1.0f);
    for (std::size_t i = 0; i < adv.size(); ++i) v[i * 997] = adv[i];
    for (std::size_t i = 0; i < 3000; ++i) v[150000 + i] = from_bits(static_cast<std::uint32_t>(i * 2654435761u));
    std::vector<std::uint16_t> all16(65536 * 2 + 5);
    for (std::size_t i = 0; i < all16.size(); ++i) all16[i] = static_cast<std::uint16_t>(i * 40503u);
    const Rounding roundings[] = {Rounding::nearest_even, Rounding::nearest_away, Rounding::toward_zero,
                                  Rounding::toward_positive, Rounding::toward_negative};
    const Overflow overflows[] = {Overflow::saturate_all, Overflow::saturate_finite, Overflow::no_saturate};
    const NanEncoding nans[] = {NanEncoding::canonical, NanEncoding::signed_all_ones, NanEncoding::signed_quiet};
    for (Format f : {Format::e4m3, Format::e5m2}) {
        for (Rounding ro : roundings) {
            for (Overflow ov : overflows) {
                for (NanEncoding ne : nans) {
                    const Policy p{ro, ov, ne};
                    // 3: fl32 products round; 2^-120: float32-subnormal scaled values; 2^100: overflow.
                    for (float scale : {1.0f, 3.0f, 0x1p-120f, 0x1p100f}) {
                        INFO(name(f) << " " << name(ro) << " " << name(ov) << " " << name(ne) << " scale " << scale);
                        check_paths(v, Wide::f32, {f, scale, p});
                        check_paths(all16, Wide::bf16, {f, scale, p});
                        check_paths(all16, Wide::f16, {f, scale, p});
                    }
                }
            }
        }
    }
    // Short arrays: every tail length of the 16-wide kernel.
    for (std::size_t n = 0; n <= 40; ++n) {
        INFO("n = " << n);
        const std::vector<float> s(v.begin() + 1000, v.begin() + 1000 + static_cast<std::ptrdiff_t>(n));
        check_paths(s, Wide::f32, {Format::e4m3, 3.0f, kSat});
    }
    // Block statistics take the same loops on row pieces (MX: 32 elements). An Inf in a block
    // gives mx-ocp's floor rule scale_inv +Inf there: such blocks take element_step itself
    // (the fast loop's x^ table times +Inf made NaN error terms where element_step gives +Inf).
    std::vector<float> w = v;
    w[5 * 300 + 40] = std::numeric_limits<float>::infinity();
    for (const char* preset : {"mxfp8", "mx-ocp"}) {
        INFO(preset);
        const BlockRecipe br = block_recipe(parse_recipe(preset), Role::activation, 300);
        set_stats_path(StatsPath::fast);
        const BlockStats a = compute_block_stats(w.data(), Wide::f32, 600, 300, br);
        set_stats_path(StatsPath::general);
        const BlockStats b = compute_block_stats(w.data(), Wide::f32, 600, 300, br);
        set_stats_path(StatsPath::fast);
        check_identical(a.total, b.total);
        REQUIRE(a.scale_inv.size() == b.scale_inv.size());  // bits: an Inf block's scale_inv may be NaN
        CHECK(std::memcmp(a.scale_inv.data(), b.scale_inv.data(), a.scale_inv.size() * sizeof(float)) == 0);
        CHECK_FALSE(std::isnan(a.total.sum_err2));
    }
}

// bfloat16 / float16 arrays of 2^21 or more elements are counted by bit pattern (statistics.cpp,
// half_stats: counts, extremes and histogram from a count per pattern, the two sums per element in
// the element loops' lanes). Every one of the 65536 patterns occurs 32 times, in scrambled order
// with a ragged tail, under scales that round (3, 0.3), keep values (1), make float32-subnormal
// scaled values (2^-120: underflow, subnormal codes), overflow past FLT_MAX (2^100: Inf scaled
// values) and NaN/Inf patterns of the input itself: every number, sums included, must be the bits
// of the general element loop's (and of the fast loop on the float32 widening), at 1 and 3 threads.
TEST_CASE("bf16 and f16 arrays counted by pattern equal the element loop", "[lib][stats]") {
    if (std::string(stats_loop(Format::e4m3, Wide::bf16, kSat)) != "avx512")
        WARN("this CPU has no AVX-512: the pattern path is not used here, both runs take the general loop");
    const std::size_t n = (std::size_t{1} << 21) + 37;
    std::vector<std::uint16_t> h(n);
    for (std::size_t i = 0; i < n; ++i) h[i] = static_cast<std::uint16_t>(i * 40503u);
    const Policy toward_zero{Rounding::toward_zero, Overflow::saturate_finite, NanEncoding::canonical};
    const std::pair<Format, Policy> rules[] = {
        {Format::e4m3, kSat}, {Format::e5m2, kNosat}, {Format::e4m3, toward_zero}};
    for (Wide w : {Wide::bf16, Wide::f16}) {
        std::vector<float> wide(n);
        for (std::size_t i = 0; i < n; ++i)
            wide[i] = w == Wide::bf16 ? from_bits(static_cast<std::uint32_t>(h[i]) << 16)
                                      : static_cast<float>(f16_value(h[i]));
        for (const auto& [f, pol] : rules) {
            for (float scale : {1.0f, 3.0f, 0.3f, 0x1p-120f, 0x1p100f}) {
                INFO(name(w) << " " << name(f) << " " << name(pol.rounding) << " scale " << scale);
                const QuantConfig c{f, scale, pol};
                set_stats_path(StatsPath::fast);
                const QuantStats half = compute_stats(h.data(), w, n, c);
                const QuantStats f32 = compute_stats(wide.data(), Wide::f32, n, c);
                set_stats_path(StatsPath::general);
                const QuantStats general = compute_stats(h.data(), w, n, c);
                set_stats_path(StatsPath::fast);
                check_identical(half, general);
                check_identical(half, f32);
            }
        }
        const int threads = omp_get_max_threads();
        omp_set_num_threads(3);
        const QuantStats three = compute_stats(h.data(), w, n, {Format::e4m3, 3.0f, kSat});
        omp_set_num_threads(1);
        const QuantStats one = compute_stats(h.data(), w, n, {Format::e4m3, 3.0f, kSat});
        omp_set_num_threads(threads);
        check_identical(three, one);
        CHECK(one.nan > 0);  // the patterns include NaN and Inf inputs
        CHECK(one.inf > 0);
    }
}
