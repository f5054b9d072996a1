// cuda::statistics_async (scale from a device amax through the recipe's rule, result in a device
// record) against lib: the scale equals fp8kit::recipe_scale(recipe, role, amax) bit for bit,
// the statistics equal fp8kit::compute_stats under that scale (counts, extremes and histogram
// exact; the binary64 sums to 1e-9 relative, the documented order tolerance of the statistics
// kernel), and equal cuda::statistics bit for bit, sums included (the same kernel on the same
// record). Sampling (every k-th block of 16 elements) equals compute_stats of exactly those
// elements, gathered here on the host.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/cuda/statistics_async.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/recipes/scale_params.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "float_bits.hpp"

namespace cu = fp8kit::cuda;
using fp8kit::Format;
using fp8kit::Policy;
using fp8kit::Wide;

namespace {

using fp8kit_test::bits;

struct DevBuf {
    void* p;
    explicit DevBuf(std::size_t b) : p(cu::device_alloc(b + 16)) {}
    ~DevBuf() { cu::device_free(p); }
    DevBuf(const DevBuf&) = delete;
    DevBuf& operator=(const DevBuf&) = delete;
};

// Normal values over many binades with a NaN, zero or huge (finite) value now and then (and +-Inf
// when with_inf: then amax is Inf), as `w` bits (round to nearest even from float32 for f16/bf16).
std::vector<unsigned char> tensor(Wide w, std::size_t n, std::uint32_t seed, bool with_inf = false) {
    std::mt19937 g(seed);
    std::normal_distribution<float> nd(0.0f, 1.0f);
    const float huge = w == Wide::f16 ? 6e4f : 1e30f;  // finite in w (f16's largest is 65504)
    const float rare[] = {0.0f, -0.0f, NAN, with_inf ? INFINITY : 1e3f, with_inf ? -INFINITY : -2.0f, huge, -3e-41f};
    std::vector<unsigned char> out(n * fp8kit::wide_size(w));
    const Policy rne{fp8kit::emu::Rounding::nearest_even, fp8kit::emu::Overflow::no_saturate,
                     fp8kit::emu::NanEncoding::signed_quiet_payload};
    fp8kit::emu::with_wide(w, [&](auto dst) {
        using D = decltype(dst);
        for (std::size_t i = 0; i < n; ++i) {
            const float x = g() % 2048 == 0 ? rare[g() % 7] : nd(g) * std::ldexp(1.0f, static_cast<int>(g() % 24) - 12);
            const auto v =
                static_cast<typename D::storage_t>(fp8kit::emu::convert<fp8kit::emu::Binary32, D>(bits(x), rne));
            std::memcpy(out.data() + i * sizeof v, &v, sizeof v);
        }
        return 0;
    });
    return out;
}

// A zeroed record, as statistics_async needs.
void zero(const DevBuf& rec) { cu::device_memset(rec.p, 0, sizeof(cu::StatsRecord)); }

cu::StatsRecord read_record(const void* d) {
    cu::StatsRecord r;
    cu::copy_to_host(&r, d, sizeof r);
    return r;
}

void check_equal(const fp8kit::QuantStats& got, const fp8kit::QuantStats& want, bool exact_sums) {
    CHECK(got.numel == want.numel);
    CHECK(got.zeros == want.zeros);
    CHECK(got.nan == want.nan);
    CHECK(got.inf == want.inf);
    CHECK(got.underflow == want.underflow);
    CHECK(got.subnormal == want.subnormal);
    CHECK(got.overflow == want.overflow);
    CHECK(got.te_underflow == want.te_underflow);
    CHECK(got.te_overflow == want.te_overflow);
    CHECK(bits(got.amax) == bits(want.amax));
    CHECK(bits(got.min_nonzero) == bits(want.min_nonzero));
    CHECK(std::equal(got.exp_hist.begin(), got.exp_hist.end(), want.exp_hist.begin(), want.exp_hist.end()));
    if (exact_sums) {
        CHECK(std::memcmp(&got.sum_x2, &want.sum_x2, 8) == 0);
        CHECK(std::memcmp(&got.sum_err2, &want.sum_err2, 8) == 0);
    } else {
        CHECK(got.sum_x2 == Approx(want.sum_x2).epsilon(1e-9));
        if (std::isinf(want.sum_err2))
            CHECK(std::memcmp(&got.sum_err2, &want.sum_err2, 8) == 0);  // +Inf terms
        else
            CHECK(got.sum_err2 == Approx(want.sum_err2).epsilon(1e-9));
    }
}

// The tensorwise presets whose rule has a statistics kernel (not the NVFP4 rules).
std::vector<fp8kit::RecipeSpec> tensorwise_presets() {
    std::vector<fp8kit::RecipeSpec> v;
    for (const auto& name : fp8kit::recipe_presets()) {
        const auto r = fp8kit::parse_recipe(name);
        if (r.input.granularity == fp8kit::Granularity::tensor && cu::has_kernels(r.input.format) &&
            cu::has_kernels(r.grad.format) && !fp8kit::numerics::rule_uses_global_amax(r.rule))
            v.push_back(r);
    }
    return v;
}

}  // namespace

TEST_CASE("statistics_async: the recipe's scale from a device amax, compute_stats's numbers", "[gpu]") {
    const auto recipes = tensorwise_presets();
    REQUIRE(recipes.size() >= 3);  // te-current, torchao-tensorwise, msamp at least
    const std::size_t n = 200003;
    for (Wide w : {Wide::f32, Wide::bf16, Wide::f16}) {
        const auto host = tensor(w, n, 5 + static_cast<int>(w));
        DevBuf din(host.size()), damax(4), drec(sizeof(cu::StatsRecord)), ws(cu::statistics_workspace_bytes());
        cu::copy_to_device(din.p, host.data(), host.size());
        cu::amax(w, din.p, n, static_cast<float*>(damax.p));
        float amax = 0;
        cu::copy_to_host(&amax, damax.p, 4);
        for (const auto& r : recipes)
            for (fp8kit::Role role : {fp8kit::Role::activation, fp8kit::Role::weight, fp8kit::Role::gradient}) {
                INFO(r.name << " role " << fp8kit::slot_name(role) << " " << fp8kit::name(w));
                const Format f = r.role(role).format;
                const fp8kit::ScalePair sp = fp8kit::recipe_scale(r, role, amax);
                zero(drec);
                cu::statistics_async(f, w, din.p, n, r.policy, fp8kit::recipe_scale_params(r, role),
                                     static_cast<const float*>(damax.p), static_cast<cu::StatsRecord*>(drec.p), ws.p, 1,
                                     3);
                const cu::StatsRecord rec = read_record(drec.p);
                CHECK(bits(rec.scale) == bits(sp.scale));
                CHECK(bits(rec.scale_inv) == bits(sp.scale_inv));
                const auto got = cu::stats_of_record(rec);
                const fp8kit::QuantConfig cfg{f, sp.scale, r.policy, sp.scale_inv, 3};
                check_equal(got, fp8kit::compute_stats(host.data(), w, n, cfg), false);
                check_equal(got, cu::statistics(f, w, din.p, n, r.policy, sp.scale, sp.scale_inv, 3), true);
            }
    }
}

TEST_CASE("statistics_async with sample k: compute_stats of every k-th block of 16 elements", "[gpu]") {
    const auto r = fp8kit::parse_recipe("te-current");
    const std::size_t n = 100000 + 7;
    for (Wide w : {Wide::f32, Wide::bf16}) {
        const std::size_t es = fp8kit::wide_size(w);
        const auto host = tensor(w, n, 17);
        DevBuf din(host.size() + 16), damax(4), drec(sizeof(cu::StatsRecord)), ws(cu::statistics_workspace_bytes());
        cu::copy_to_device(din.p, host.data(), host.size());
        // offset 0 (vector loads) and one element in (the unaligned element loop)
        for (std::size_t off : {std::size_t{0}, std::size_t{1}})
            for (std::uint32_t k : {1u, 2u, 7u, 64u, 100000u}) {
                INFO(fp8kit::name(w) << " offset " << off << " sample " << k);
                const unsigned char* h = host.data() + off * es;
                const void* d = static_cast<const char*>(din.p) + off * es;
                const std::size_t m = n - off;
                cu::amax(w, d, m, static_cast<float*>(damax.p));
                float amax = 0;
                cu::copy_to_host(&amax, damax.p, 4);
                const fp8kit::ScalePair sp = fp8kit::recipe_scale(r, fp8kit::Role::activation, amax);
                std::vector<unsigned char> kept;
                for (std::size_t i = 0; i < m; ++i)
                    if ((i / 16) % k == 0) kept.insert(kept.end(), h + i * es, h + (i + 1) * es);
                const std::size_t kn = kept.size() / es;
                CHECK(cu::sampled_count(m, k) == kn);
                zero(drec);
                cu::statistics_async(
                    r.input.format, w, d, m, r.policy, fp8kit::recipe_scale_params(r, fp8kit::Role::activation),
                    static_cast<const float*>(damax.p), static_cast<cu::StatsRecord*>(drec.p), ws.p, k);
                const cu::StatsRecord rec = read_record(drec.p);
                CHECK(rec.sample == k);
                const fp8kit::QuantConfig cfg{r.input.format, sp.scale, r.policy, sp.scale_inv, 0};
                check_equal(cu::stats_of_record(rec), fp8kit::compute_stats(kept.data(), w, kn, cfg), false);
            }
    }
}

TEST_CASE("statistics_async: bad arguments throw with the function's name", "[gpu]") {
    const auto r = fp8kit::parse_recipe("te-current");
    const auto rule = fp8kit::recipe_scale_params(r, fp8kit::Role::activation);
    DevBuf d(64), rec(sizeof(cu::StatsRecord)), ws(cu::statistics_workspace_bytes());
    auto* out = static_cast<cu::StatsRecord*>(rec.p);
    const auto* amax = static_cast<const float*>(d.p);
    REQUIRE_THROWS_WITH(cu::statistics_async(Format::e4m3, Wide::f32, d.p, 4, r.policy, rule, amax, out, ws.p, 0),
                        Catch::Contains("statistics_async") && Catch::Contains("sample"));
    REQUIRE_THROWS_WITH(cu::statistics_async(Format::e5m2, Wide::f32, d.p, 4, r.policy, rule, amax, out, ws.p),
                        Catch::Contains("statistics_async") && Catch::Contains("format"));
    REQUIRE_THROWS_WITH(cu::statistics_async(Format::e4m3, Wide::f32, d.p, 4, r.policy, rule, nullptr, out, ws.p),
                        Catch::Contains("statistics_async"));
    REQUIRE_THROWS_WITH(cu::statistics_async(Format::e4m3, Wide::f32, d.p, 4, r.policy, rule, amax, out, nullptr),
                        Catch::Contains("statistics_async"));
    // A record whose scale is not usable (here: zeroed) is refused when read, as statistics()
    // refuses such a scale.
    cu::StatsRecord zero{};
    REQUIRE_THROWS_WITH(cu::stats_of_record(zero), Catch::Contains("finite and > 0"));
}

// An amax of +Inf: torchao's rule gives scale fmax / Inf = 0, which statistics() and
// compute_stats refuse; the device record says so (scale_ok 0, the rule's scale kept) and reading
// it throws the same way. te's rule at an Inf amax keeps a usable scale (TE's compute_scale_from_amax):
// whatever recipe_scale gives, the device must give too, usable or not.
TEST_CASE("statistics_async at an Inf amax: the rule's scale, refused when not usable", "[gpu]") {
    const std::size_t n = 50001;
    const auto host = tensor(Wide::f32, n, 23, true);
    DevBuf din(host.size()), damax(4), drec(sizeof(cu::StatsRecord)), ws(cu::statistics_workspace_bytes());
    cu::copy_to_device(din.p, host.data(), host.size());
    cu::amax(Wide::f32, din.p, n, static_cast<float*>(damax.p));
    float amax = 0;
    cu::copy_to_host(&amax, damax.p, 4);
    REQUIRE(std::isinf(amax));
    for (const auto& r : tensorwise_presets()) {
        INFO(r.name);
        const fp8kit::ScalePair sp = fp8kit::recipe_scale(r, fp8kit::Role::activation, amax);
        zero(drec);
        cu::statistics_async(r.input.format, Wide::f32, din.p, n, r.policy,
                             fp8kit::recipe_scale_params(r, fp8kit::Role::activation),
                             static_cast<const float*>(damax.p), static_cast<cu::StatsRecord*>(drec.p), ws.p);
        const cu::StatsRecord rec = read_record(drec.p);
        CHECK(bits(rec.scale) == bits(sp.scale));
        CHECK(bits(rec.scale_inv) == bits(sp.scale_inv));
        const bool usable = sp.scale > 0 && std::isfinite(sp.scale) && sp.scale_inv > 0 && std::isfinite(sp.scale_inv);
        CHECK(rec.scale_ok == (usable ? 1u : 0u));
        if (usable) {
            const fp8kit::QuantConfig cfg{r.input.format, sp.scale, r.policy, sp.scale_inv, 0};
            check_equal(cu::stats_of_record(rec), fp8kit::compute_stats(host.data(), Wide::f32, n, cfg), false);
        } else {
            CHECK_THROWS_WITH(cu::stats_of_record(rec), Catch::Contains("finite and > 0"));
        }
    }
}

// statistics_async_multi: the statistics of several plans of one tensor in one call equal
// statistics_async of each plan alone (counts, extremes, histogram and scale exact; sums to
// 1e-9), also where TE's and torchao's plans are computed once (their scales agree at this amax)
// and where they are not (an Inf amax: TE keeps a usable scale, torchao's is 0 and refused).
TEST_CASE("statistics_async_multi equals statistics_async plan by plan", "[gpu]") {
    const auto recipes = tensorwise_presets();
    const std::size_t n = 150001;
    for (bool with_inf : {false, true})
        for (Wide w : {Wide::f32, Wide::bf16}) {
            const auto host = tensor(w, n, 31 + static_cast<int>(w), with_inf);
            DevBuf din(host.size()), damax(4), ws(cu::statistics_workspace_bytes());
            cu::copy_to_device(din.p, host.data(), host.size());
            cu::amax(w, din.p, n, static_cast<float*>(damax.p));
            for (fp8kit::Role role : {fp8kit::Role::activation, fp8kit::Role::gradient}) {
                std::vector<cu::StatsPlan> plans;
                for (const auto& r : recipes)
                    plans.push_back({r.role(role).format, w, r.policy, fp8kit::recipe_scale_params(r, role)});
                const std::size_t k = plans.size(), rb = sizeof(cu::StatsRecord);
                DevBuf multi(k * rb), one(rb);
                cu::device_memset(multi.p, 0, k * rb);
                cu::statistics_async_multi(plans.data(), k, din.p, n, static_cast<const float*>(damax.p),
                                           static_cast<cu::StatsRecord*>(multi.p), ws.p, 1, 9);
                std::vector<cu::StatsRecord> got(k);
                cu::copy_to_host(got.data(), multi.p, k * rb);
                int usable = 0;
                for (std::size_t i = 0; i < k; ++i) {
                    INFO(recipes[i].name << " " << fp8kit::slot_name(role) << " " << fp8kit::name(w) << " inf "
                                         << with_inf);
                    zero(one);
                    cu::statistics_async(plans[i].to, w, din.p, n, plans[i].policy, plans[i].rule,
                                         static_cast<const float*>(damax.p), static_cast<cu::StatsRecord*>(one.p), ws.p,
                                         1, 9);
                    const cu::StatsRecord want = read_record(one.p);
                    CHECK(bits(got[i].scale) == bits(want.scale));
                    CHECK(bits(got[i].scale_inv) == bits(want.scale_inv));
                    CHECK(got[i].scale_ok == want.scale_ok);
                    CHECK(got[i].numel == want.numel);
                    if (want.scale_ok) {
                        ++usable;
                        check_equal(cu::stats_of_record(got[i]), cu::stats_of_record(want), false);
                    }
                }
                CHECK(usable >= (with_inf ? 1 : static_cast<int>(k)));
            }
        }
    // The aliasing itself: te-current's and torchao-tensorwise's E4M3 plans at a finite amax have
    // the same scale pair; the record of the second equals the first's word for word (copied).
    const auto te = fp8kit::parse_recipe("te-current"), ao = fp8kit::parse_recipe("torchao-tensorwise");
    const auto host = tensor(Wide::f32, 4099, 41);
    DevBuf din(host.size()), damax(4), ws(cu::statistics_workspace_bytes()), recs(2 * sizeof(cu::StatsRecord));
    cu::copy_to_device(din.p, host.data(), host.size());
    cu::amax(Wide::f32, din.p, 4099, static_cast<float*>(damax.p));
    const cu::StatsPlan plans[2] = {
        {Format::e4m3, Wide::f32, te.policy, fp8kit::recipe_scale_params(te, fp8kit::Role::activation)},
        {Format::e4m3, Wide::f32, ao.policy, fp8kit::recipe_scale_params(ao, fp8kit::Role::activation)}};
    REQUIRE(te.policy.nan != ao.policy.nan);  // differ in the NaN code only
    // The second record is not zeroed but holds a planted count: only a word-for-word copy of
    // the first (its own launch skipped) makes the two equal; a launch of its own would add to it.
    cu::device_memset(recs.p, 0, 2 * sizeof(cu::StatsRecord));
    const std::uint64_t planted = 12345;
    cu::copy_to_device(static_cast<char*>(recs.p) + sizeof(cu::StatsRecord), &planted, sizeof planted);
    cu::statistics_async_multi(plans, 2, din.p, 4099, static_cast<const float*>(damax.p),
                               static_cast<cu::StatsRecord*>(recs.p), ws.p);
    cu::StatsRecord r[2];
    cu::copy_to_host(r, recs.p, sizeof r);
    CHECK(r[0].scale_ok == 1u);
    CHECK(r[0].counts[0] != planted);
    CHECK(std::memcmp(&r[0], &r[1], sizeof r[0]) == 0);
    // With the scales apart (an amax below torchao's epsilon: TE's scale is fmax / amax, torchao's
    // fmax / 1e-12), nothing is copied: the planted count stays in the second record's sum.
    const float tiny = 1e-13f;
    cu::copy_to_device(damax.p, &tiny, 4);
    cu::device_memset(recs.p, 0, 2 * sizeof(cu::StatsRecord));
    cu::copy_to_device(static_cast<char*>(recs.p) + sizeof(cu::StatsRecord), &planted, sizeof planted);
    cu::statistics_async_multi(plans, 2, din.p, 4099, static_cast<const float*>(damax.p),
                               static_cast<cu::StatsRecord*>(recs.p), ws.p);
    cu::copy_to_host(r, recs.p, sizeof r);
    CHECK(bits(r[0].scale) != bits(r[1].scale));
    CHECK(r[1].counts[0] == r[0].counts[0] + planted);
}

TEST_CASE("statistics_async_multi: bad arguments throw with the function's name", "[gpu]") {
    const auto r = fp8kit::parse_recipe("te-current");
    const cu::StatsPlan ok{Format::e4m3, Wide::f32, r.policy, fp8kit::recipe_scale_params(r, fp8kit::Role::activation)};
    const cu::StatsPlan bad{Format::e5m2, Wide::f32, r.policy, ok.rule};
    DevBuf d(64), rec(2 * sizeof(cu::StatsRecord)), ws(cu::statistics_workspace_bytes());
    auto* out = static_cast<cu::StatsRecord*>(rec.p);
    const auto* amax = static_cast<const float*>(d.p);
    const cu::StatsPlan two[2] = {ok, bad};
    REQUIRE_THROWS_WITH(cu::statistics_async_multi(two, 2, d.p, 4, amax, out, ws.p),
                        Catch::Contains("statistics_async_multi") && Catch::Contains("format"));
    REQUIRE_THROWS_WITH(cu::statistics_async_multi(&ok, 1, d.p, 4, amax, out, ws.p, 0),
                        Catch::Contains("statistics_async_multi") && Catch::Contains("sample"));
    REQUIRE_THROWS_WITH(cu::statistics_async_multi(&ok, 1, d.p, 4, nullptr, out, ws.p),
                        Catch::Contains("statistics_async_multi"));
}

namespace {

// Every tensorwise preset's plan for `role` on input type w, in preset order.
std::vector<cu::StatsPlan> preset_plans(const std::vector<fp8kit::RecipeSpec>& recipes, fp8kit::Role role, Wide w) {
    std::vector<cu::StatsPlan> plans;
    for (const auto& r : recipes)
        plans.push_back({r.role(role).format, w, r.policy, fp8kit::recipe_scale_params(r, role)});
    return plans;
}

}  // namespace

// watch_async's magnitude histogram (f16/bf16, sign-symmetric roundings) against lib: the amax
// equals cuda::amax's bits, each record's scale equals recipe_scale at it, and the statistics equal
// fp8kit::compute_stats (counts, extremes, histogram exact; sums to the documented 1e-9). A second
// call on the same workspace gives the same bits: each call leaves its histogram and counters
// zeroed (else the counts would double or the records stay incomplete).
TEST_CASE("watch_async (16-bit magnitude histogram) equals compute_stats for every tensorwise preset", "[gpu]") {
    const auto recipes = tensorwise_presets();
    for (bool with_inf : {false, true})
        for (Wide w : {Wide::bf16, Wide::f16})
            for (std::size_t n : {std::size_t{1}, std::size_t{4097}, std::size_t{1} << 21}) {
                const auto host = tensor(w, n, 71 + static_cast<int>(n % 97) + static_cast<int>(w), with_inf);
                DevBuf din(host.size()), damax(4), want_amax(4), ws(cu::watch_workspace_bytes());
                cu::copy_to_device(din.p, host.data(), host.size());
                cu::device_memset(ws.p, 0, cu::watch_workspace_bytes());
                cu::amax(w, din.p, n, static_cast<float*>(want_amax.p));
                float amax = 0, ref_amax = 0;
                cu::copy_to_host(&ref_amax, want_amax.p, 4);
                for (fp8kit::Role role : {fp8kit::Role::activation, fp8kit::Role::weight, fp8kit::Role::gradient}) {
                    const auto plans = preset_plans(recipes, role, w);
                    const std::size_t k = plans.size(), rb = sizeof(cu::StatsRecord);
                    DevBuf recs(k * rb), again(k * rb);
                    cu::device_memset(recs.p, 0, k * rb);
                    cu::device_memset(again.p, 0, k * rb);
                    cu::watch_async(plans.data(), k, din.p, n, static_cast<float*>(damax.p), true,
                                    static_cast<cu::StatsRecord*>(recs.p), ws.p);
                    cu::watch_async(plans.data(), k, din.p, n, static_cast<float*>(damax.p), true,
                                    static_cast<cu::StatsRecord*>(again.p), ws.p);
                    cu::copy_to_host(&amax, damax.p, 4);
                    REQUIRE(bits(amax) == bits(ref_amax));
                    std::vector<cu::StatsRecord> got(k), got2(k);
                    cu::copy_to_host(got.data(), recs.p, k * rb);
                    cu::copy_to_host(got2.data(), again.p, k * rb);
                    for (std::size_t i = 0; i < k; ++i) {
                        INFO(recipes[i].name << " " << fp8kit::slot_name(role) << " " << fp8kit::name(w) << " n " << n
                                             << " inf " << with_inf);
                        CHECK(std::memcmp(&got[i], &got2[i], rb) == 0);  // deterministic, workspace reset
                        const Format f = plans[i].to;
                        const fp8kit::ScalePair sp = fp8kit::recipe_scale(recipes[i], role, amax);
                        CHECK(bits(got[i].scale) == bits(sp.scale));
                        CHECK(bits(got[i].scale_inv) == bits(sp.scale_inv));
                        CHECK(got[i].numel == n);
                        const bool ok =
                            sp.scale > 0 && std::isfinite(sp.scale) && sp.scale_inv > 0 && std::isfinite(sp.scale_inv);
                        CHECK(got[i].scale_ok == (ok ? 1u : 0u));
                        if (!ok) continue;
                        const fp8kit::QuantConfig cfg{f, sp.scale, recipes[i].policy, sp.scale_inv, 0};
                        check_equal(cu::stats_of_record(got[i]), fp8kit::compute_stats(host.data(), w, n, cfg), false);
                    }
                }
            }
}

// A group with a plan the histogram cannot serve (stochastic rounding: random bits per element)
// after sign-symmetric ones: those go through the histogram (sampled or not), the stochastic one
// through statistics_async at the amax the histogram gave; float32 tensors take the element loop.
// All equal statistics_async plan by plan.
TEST_CASE("watch_async: stochastic plans and float32 tensors take the element loop", "[gpu]") {
    const auto te = fp8kit::parse_recipe("te-current");
    Policy sr = te.policy;
    sr.rounding = fp8kit::emu::Rounding::stochastic;
    for (Wide w : {Wide::bf16, Wide::f32})
        for (std::uint32_t sample : {1u, 4u}) {
            const std::size_t n = 70001;
            const auto host = tensor(w, n, 90 + static_cast<int>(w));
            const auto rule = fp8kit::recipe_scale_params(te, fp8kit::Role::activation);
            const cu::StatsPlan plans[2] = {{Format::e4m3, w, te.policy, rule}, {Format::e4m3, w, sr, rule}};
            const std::size_t rb = sizeof(cu::StatsRecord);
            DevBuf din(host.size()), damax(4), ws(cu::watch_workspace_bytes()), recs(2 * rb), one(rb);
            cu::copy_to_device(din.p, host.data(), host.size());
            cu::device_memset(ws.p, 0, cu::watch_workspace_bytes());
            cu::device_memset(recs.p, 0, 2 * rb);
            cu::watch_async(plans, 2, din.p, n, static_cast<float*>(damax.p), true,
                            static_cast<cu::StatsRecord*>(recs.p), ws.p, sample, 5);
            cu::StatsRecord got[2];
            cu::copy_to_host(got, recs.p, 2 * rb);
            for (int i = 0; i < 2; ++i) {
                INFO(fp8kit::name(w) << " sample " << sample << " plan " << i);
                zero(one);
                cu::statistics_async(Format::e4m3, w, din.p, n, plans[i].policy, rule,
                                     static_cast<const float*>(damax.p), static_cast<cu::StatsRecord*>(one.p), ws.p,
                                     sample, 5);
                const cu::StatsRecord want = read_record(one.p);
                REQUIRE(want.scale_ok == 1u);
                CHECK(got[i].sample == sample);
                check_equal(cu::stats_of_record(got[i]), cu::stats_of_record(want),
                            i == 1 || w == Wide::f32 || sample > 1);
            }
        }
}

// The histogram path with sample k: K1 counts only the blocks of 16 whose index is a multiple of
// k and reads the rest for the amax alone. Against lib: compute_stats of the kept elements at the
// scale of the whole tensor's amax (lib's tensor_amax), vector loads and the unaligned element
// loop, k from 2 to more blocks than the tensor has; NaN and huge values in the tensor.
TEST_CASE("watch_async with sample k: the histogram of the sampled blocks, the amax of all", "[gpu]") {
    const auto r = fp8kit::parse_recipe("te-current");
    const auto rule = fp8kit::recipe_scale_params(r, fp8kit::Role::activation);
    const std::size_t n = 100000 + 7, rb = sizeof(cu::StatsRecord);
    for (Wide w : {Wide::bf16, Wide::f16}) {
        const std::size_t es = fp8kit::wide_size(w);
        const auto host = tensor(w, n, 41);
        DevBuf din(host.size() + 16), damax(4), rec(rb), ws(cu::watch_workspace_bytes());
        cu::copy_to_device(din.p, host.data(), host.size());
        cu::device_memset(ws.p, 0, cu::watch_workspace_bytes());
        for (std::size_t off : {std::size_t{0}, std::size_t{1}})
            for (std::uint32_t k : {2u, 7u, 16u, 100000u}) {
                INFO(fp8kit::name(w) << " offset " << off << " sample " << k);
                const unsigned char* h = host.data() + off * es;
                const std::size_t m = n - off;
                zero(rec);
                const cu::StatsPlan plan{r.input.format, w, r.policy, rule};
                cu::watch_async(&plan, 1, static_cast<const char*>(din.p) + off * es, m, static_cast<float*>(damax.p),
                                true, static_cast<cu::StatsRecord*>(rec.p), ws.p, k);
                float amax = 0;
                cu::copy_to_host(&amax, damax.p, 4);
                CHECK(bits(amax) == bits(fp8kit::amax_of(h, w, m)));
                std::vector<unsigned char> kept;
                for (std::size_t i = 0; i < m; ++i)
                    if ((i / 16) % k == 0) kept.insert(kept.end(), h + i * es, h + (i + 1) * es);
                const cu::StatsRecord got = read_record(rec.p);
                CHECK(got.sample == k);
                CHECK(got.numel == kept.size() / es);
                const fp8kit::ScalePair sp = fp8kit::recipe_scale(r, fp8kit::Role::activation, amax);
                const fp8kit::QuantConfig cfg{r.input.format, sp.scale, r.policy, sp.scale_inv, 0};
                check_equal(cu::stats_of_record(got), fp8kit::compute_stats(kept.data(), w, kept.size() / es, cfg),
                            false);
            }
    }
}

// cuda::WatchBatch (the monitor's batch: K1 at add(), one K2 launch for every tensor at flush())
// against watch_async tensor by tensor, bit for bit (the same kernels per tensor, sums in the same
// order), and against lib's compute_stats. 600 tensors of both 16-bit types and many plan lists:
// the batch flushes itself when its launch is full (512 tensors, 4 plan lists per input type);
// a float32 tensor, a sampled one and a stochastic plan take watch_async's element loop at add().
// The inputs are overwritten before the last flush: K2 must read only the histograms.
// FP8KIT_GPU_TEST_QUICK=1 (the compute-sanitizer runs of validate_on_gpu.sh): 40 tensors, so the
// batch flushes itself on a full plan table only (600 took 83 s under racecheck, which then ran
// past its 300 s limit).
TEST_CASE("WatchBatch: every tensor's K2 in one launch equals watch_async and compute_stats", "[gpu]") {
    const auto recipes = tensorwise_presets();
    REQUIRE(recipes.size() >= 3);
    const char* quick = std::getenv("FP8KIT_GPU_TEST_QUICK");
    const std::size_t count = quick != nullptr && *quick == '1' ? 40 : 600;
    const fp8kit::Role roles[3] = {fp8kit::Role::activation, fp8kit::Role::weight, fp8kit::Role::gradient};
    struct Tensor {
        Wide w;
        std::size_t n;
        std::uint32_t sample;
        fp8kit::Role role;
        std::vector<std::size_t> which;  // recipes' indices
        std::vector<cu::StatsPlan> plans;
        std::vector<unsigned char> host;
        std::unique_ptr<DevBuf> in, amax, recs;
    };
    std::vector<Tensor> ts(count);
    const std::size_t rb = sizeof(cu::StatsRecord);
    for (std::size_t i = 0; i < ts.size(); ++i) {
        Tensor& t = ts[i];
        t.w = i == 7 ? Wide::f32 : i % 3 == 0 ? Wide::f16 : Wide::bf16;
        t.n = i % 50 == 0 ? 70001 : 1 + (i * 37) % 3000;
        t.sample = i == 11 ? 4u : 1u;
        t.role = roles[i % 3];
        for (std::size_t k = 0; k < 3; ++k) t.which.push_back((i / 3 + k) % recipes.size());
        for (std::size_t j : t.which) {
            const auto& r = recipes[j];
            cu::StatsPlan p{r.role(t.role).format, t.w, r.policy, fp8kit::recipe_scale_params(r, t.role)};
            if (i == 13) p.policy.rounding = fp8kit::emu::Rounding::stochastic;
            t.plans.push_back(p);
        }
        t.host = tensor(t.w, t.n, 500 + static_cast<std::uint32_t>(i), i % 7 == 0);
        t.in = std::make_unique<DevBuf>(t.host.size());
        t.amax = std::make_unique<DevBuf>(4);
        t.recs = std::make_unique<DevBuf>(3 * rb);
        cu::copy_to_device(t.in->p, t.host.data(), t.host.size());
        cu::device_memset(t.recs->p, 0, 3 * rb);
    }
    // The reference: watch_async, tensor by tensor.
    std::vector<std::vector<cu::StatsRecord>> want(ts.size(), std::vector<cu::StatsRecord>(3));
    std::vector<float> want_amax(ts.size());
    {
        DevBuf ws(cu::watch_workspace_bytes()), recs(3 * rb), amax(4);
        cu::device_memset(ws.p, 0, cu::watch_workspace_bytes());
        for (std::size_t i = 0; i < ts.size(); ++i) {
            cu::device_memset(recs.p, 0, 3 * rb);
            cu::watch_async(ts[i].plans.data(), 3, ts[i].in->p, ts[i].n, static_cast<float*>(amax.p), true,
                            static_cast<cu::StatsRecord*>(recs.p), ws.p, ts[i].sample, 9);
            cu::copy_to_host(want[i].data(), recs.p, 3 * rb);
            cu::copy_to_host(&want_amax[i], amax.p, 4);
        }
    }
    {
        cu::WatchBatch batch;
        for (auto& t : ts)
            batch.add(t.plans.data(), 3, t.in->p, t.n, static_cast<float*>(t.amax->p), true,
                      static_cast<cu::StatsRecord*>(t.recs->p), t.sample, 9);
        CHECK(batch.pending() > 0);
        CHECK(batch.pending() < ts.size());  // it flushed itself on the way
        for (auto& t : ts) cu::device_memset(t.in->p, 0, t.host.size());
        batch.flush();
        CHECK(batch.pending() == 0);
    }
    for (std::size_t i = 0; i < ts.size(); ++i) {
        const Tensor& t = ts[i];
        float amax = 0;
        cu::copy_to_host(&amax, t.amax->p, 4);
        std::vector<cu::StatsRecord> got(3);
        cu::copy_to_host(got.data(), t.recs->p, 3 * rb);
        INFO("tensor " << i << " " << fp8kit::name(t.w) << " n " << t.n << " sample " << t.sample);
        REQUIRE(bits(amax) == bits(want_amax[i]));
        for (std::size_t k = 0; k < 3; ++k) {
            const auto& r = recipes[t.which[k]];
            INFO(r.name << " " << fp8kit::slot_name(t.role));
            REQUIRE(std::memcmp(&got[k], &want[i][k], rb) == 0);
            const fp8kit::ScalePair sp = fp8kit::recipe_scale(r, t.role, amax);
            CHECK(bits(got[k].scale) == bits(sp.scale));
            if (got[k].scale_ok == 0u || t.sample != 1) continue;  // sampled: the test above covers it
            const fp8kit::QuantConfig cfg{t.plans[k].to, sp.scale, t.plans[k].policy, sp.scale_inv, 9};
            check_equal(cu::stats_of_record(got[k]), fp8kit::compute_stats(t.host.data(), t.w, t.n, cfg), false);
        }
    }
}

// cuda::block_statistics_async against lib's compute_block_stats for every block preset the GPU
// serves (every role; f32, f16, bf16; shapes with partial edge tiles; NaN, zeros, huge values and
// +-Inf): counts, extremes and histogram exact, the binary64 sums to the documented 1e-9, every
// tile's scale_inv bit for bit.
TEST_CASE("block_statistics_async equals compute_block_stats for every block preset", "[gpu]") {
    int served = 0;
    for (const auto& name : fp8kit::recipe_presets()) {
        const auto r = fp8kit::parse_recipe(name);
        for (fp8kit::Role role : {fp8kit::Role::activation, fp8kit::Role::weight, fp8kit::Role::gradient}) {
            for (Wide w : {Wide::f32, Wide::bf16, Wide::f16})
                for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{1, 33}, {130, 300}, {257, 1024}}) {
                    if (r.role(role).granularity == fp8kit::Granularity::tensor) continue;
                    fp8kit::BlockRecipe br;
                    try {
                        br = fp8kit::block_recipe(r, role, cols);
                    } catch (const std::invalid_argument&) {
                        continue;  // delayed / windowed recipes
                    }
                    if (br.columnwise_rht || fp8kit::numerics::rule_uses_global_amax(br.rule) ||
                        !cu::has_cast_kernels(br.format) || br.block_rows < 1)
                        continue;
                    if (fp8kit::numerics::rule_amax_keeps_nan(br.rule)) {  // torchao's rules: CPU only
                        const cu::BlockStatsPlan refused{
                            br.format,
                            w,
                            br.policy,
                            fp8kit::numerics::make_scale_params(br.rule, br.format, br.epsilon, br.pow2, br.value_for_inf, 0),
                            br.block_rows,
                            br.block_cols};
                        CHECK_THROWS_AS(
                            cu::block_statistics_async(refused, nullptr, rows, cols, nullptr, nullptr, nullptr),
                            std::invalid_argument);
                        continue;
                    }
                    ++served;
                    const auto host =
                        tensor(w, rows * cols, 300 + static_cast<std::uint32_t>(rows + cols), cols == 300);
                    const fp8kit::BlockStats want = fp8kit::compute_block_stats(host.data(), w, rows, cols, br);
                    const cu::BlockStatsPlan plan{
                        br.format,
                        w,
                        br.policy,
                        fp8kit::numerics::make_scale_params(br.rule, br.format, br.epsilon, br.pow2, br.value_for_inf, 0),
                        br.block_rows,
                        br.block_cols};
                    DevBuf din(host.size()), rec(sizeof(cu::StatsRecord)), ws(cu::statistics_workspace_bytes()),
                        sinv(want.blocks * 4);
                    cu::copy_to_device(din.p, host.data(), host.size());
                    zero(rec);
                    cu::block_statistics_async(plan, din.p, rows, cols, static_cast<cu::StatsRecord*>(rec.p),
                                               static_cast<float*>(sinv.p), ws.p);
                    const cu::StatsRecord got = read_record(rec.p);
                    std::vector<float> scale_inv(want.blocks);
                    cu::copy_to_host(scale_inv.data(), sinv.p, want.blocks * 4);
                    INFO(name << " " << fp8kit::slot_name(role) << " " << fp8kit::name(w) << " " << rows << " x "
                              << cols);
                    CHECK(got.numel == rows * cols);
                    check_equal(cu::stats_of_record(got), want.total, false);
                    bool same = true;
                    for (std::size_t b = 0; b < want.blocks; ++b)
                        same = same && bits(scale_inv[b]) == bits(want.scale_inv[b]);
                    CHECK(same);
                }
        }
    }
    CHECK(served > 0);
}

// NVFP4 on the GPU (issue 23 B): block_statistics_async with the rule's global amax computed on
// the device, and TE's column-wise RHT copy made on the device where the preset's role asks for it,
// against lib's compute_block_stats: counts, extremes and histogram exact, every tile's scale_inv
// bit for bit (a NaN scale_inv, which the rules give when the global amax is Inf, only as a NaN:
// x86 makes the default NaN 0xFFC00000 where the GPU makes 0x7FFFFFFF, as blocks.hpp's
// quantize_blocks documents; such tiles must occur here), the global amax equal to lib's block_global_amax, the per-tile fields that
// summarize_tiles gives from the GPU's tile extremes equal to lib's, and the binary64 sums to the
// 1e-9 order tolerance. f32, bf16 and f16 inputs; shapes with partial blocks; a block of NaN, one
// of +Inf and Inf elsewhere; rows that are not a multiple of 16 refused under the column-wise RHT.
// FP8KIT_GPU_TEST_QUICK=1 (the compute-sanitizer runs of validate_on_gpu.sh): one input type per
// (recipe, role), rotating, so that every type still occurs; under racecheck all 108 combinations
// ran past the script's 300 s limit.
TEST_CASE("block_statistics_async NVFP4 (global amax, column-wise RHT) equals compute_block_stats", "[gpu]") {
    int served = 0, with_rht = 0;
    std::size_t nan_scales = 0;
    const char* quick_env = std::getenv("FP8KIT_GPU_TEST_QUICK");
    const bool quick = quick_env != nullptr && *quick_env == '1';
    int combo = 0;  // (recipe, role) pairs so far
    for (const char* name : {"nvfp4", "nvfp4-rowwise", "nvfp4-torchao"}) {
        const auto r = fp8kit::parse_recipe(name);
        for (fp8kit::Role role : {fp8kit::Role::activation, fp8kit::Role::weight, fp8kit::Role::gradient}) {
            const int pick = combo++ % 3;
            int wi = 0;
            for (Wide w : {Wide::f32, Wide::bf16, Wide::f16}) {
                if (quick && wi++ != pick) continue;
                for (auto [rows, cols] : {std::pair<std::size_t, std::size_t>{16, 33}, {144, 300}, {48, 17}, {7, 40}}) {
                    const fp8kit::BlockRecipe br = fp8kit::block_recipe(r, role, cols);
                    REQUIRE(fp8kit::numerics::rule_uses_global_amax(br.rule));
                    auto host = tensor(w, rows * cols, 900 + static_cast<std::uint32_t>(rows * 7 + cols), rows == 144);
                    if (rows == 144) {  // a block of NaN and a block of +Inf (row 2: elements 0..15, 16..31)
                        const std::size_t es = fp8kit::wide_size(w);
                        const Policy rne{fp8kit::emu::Rounding::nearest_even, fp8kit::emu::Overflow::no_saturate,
                                         fp8kit::emu::NanEncoding::signed_quiet_payload};
                        fp8kit::emu::with_wide(w, [&](auto dst) {
                            using D = decltype(dst);
                            for (std::size_t c = 0; c < 32; ++c) {
                                const auto v = static_cast<typename D::storage_t>(
                                    fp8kit::emu::convert<fp8kit::emu::Binary32, D>(bits(c < 16 ? NAN : INFINITY), rne));
                                std::memcpy(host.data() + (2 * cols + c) * es, &v, es);
                            }
                            return 0;
                        });
                    }
                    const cu::BlockStatsPlan plan{
                        br.format,
                        w,
                        br.policy,
                        fp8kit::numerics::make_scale_params(br.rule, br.format, br.epsilon, br.pow2, br.value_for_inf, 0),
                        br.block_rows,
                        br.block_cols,
                        br.columnwise_rht};
                    INFO(name << " " << fp8kit::slot_name(role) << " " << fp8kit::name(w) << " " << rows << " x "
                              << cols << (br.columnwise_rht ? " (column-wise RHT)" : ""));
                    DevBuf din(host.size()), rec(sizeof(cu::StatsRecord)), ws(cu::statistics_workspace_bytes()),
                        gamax(4);
                    cu::copy_to_device(din.p, host.data(), host.size());
                    zero(rec);
                    if (br.columnwise_rht && rows % 16 != 0) {
                        CHECK_THROWS_AS(fp8kit::compute_block_stats(host.data(), w, rows, cols, br),
                                        std::invalid_argument);
                        CHECK_THROWS_AS(cu::block_statistics_async(
                                            plan, din.p, rows, cols, static_cast<cu::StatsRecord*>(rec.p), nullptr,
                                            ws.p, 0, nullptr, nullptr, nullptr, static_cast<float*>(gamax.p)),
                                        std::invalid_argument);
                        continue;
                    }
                    ++served;
                    with_rht += br.columnwise_rht;
                    const fp8kit::BlockStats want = fp8kit::compute_block_stats(host.data(), w, rows, cols, br);
                    CHECK(want.columnwise_rht == br.columnwise_rht);
                    const std::size_t nb = want.blocks;
                    DevBuf sinv(nb * 4), tamax(nb * 4), tmin(nb * 4);
                    CHECK_THROWS_AS(cu::block_statistics_async(plan, din.p, rows, cols,
                                                               static_cast<cu::StatsRecord*>(rec.p), nullptr, ws.p),
                                    std::invalid_argument);  // no d_global_amax
                    cu::block_statistics_async(plan, din.p, rows, cols, static_cast<cu::StatsRecord*>(rec.p),
                                               static_cast<float*>(sinv.p), ws.p, 0, nullptr,
                                               static_cast<float*>(tamax.p), static_cast<float*>(tmin.p),
                                               static_cast<float*>(gamax.p));
                    const cu::StatsRecord got = read_record(rec.p);
                    CHECK(got.numel == rows * cols);
                    check_equal(cu::stats_of_record(got), want.total, false);
                    float ga = 0;
                    cu::copy_to_host(&ga, gamax.p, 4);
                    CHECK(bits(ga) == bits(fp8kit::block_global_amax(host.data(), w, rows, cols, br)));
                    fp8kit::BlockStats b;
                    b.blocks = nb;
                    b.scale_inv.resize(nb);
                    std::vector<float> am(nb), mn(nb);
                    cu::copy_to_host(b.scale_inv.data(), sinv.p, nb * 4);
                    cu::copy_to_host(am.data(), tamax.p, nb * 4);
                    cu::copy_to_host(mn.data(), tmin.p, nb * 4);
                    std::size_t differ = 0;
                    for (std::size_t t = 0; t < nb; ++t) {
                        const bool both_nan = std::isnan(b.scale_inv[t]) && std::isnan(want.scale_inv[t]);
                        nan_scales += both_nan;
                        differ += !both_nan && bits(b.scale_inv[t]) != bits(want.scale_inv[t]);
                    }
                    CHECK(differ == 0);
                    const std::vector<double> amd(am.begin(), am.end()), mnd(mn.begin(), mn.end());
                    fp8kit::summarize_tiles(b, amd.data(), mnd.data());
                    CHECK(b.scale_inv_exp_hist == want.scale_inv_exp_hist);
                    CHECK(b.scale_inv_min == want.scale_inv_min);
                    CHECK(b.scale_inv_max == want.scale_inv_max);
                    CHECK(b.blocks_with_range == want.blocks_with_range);
                    CHECK(b.dr_max == want.dr_max);
                    CHECK(b.dr_mean == want.dr_mean);
                    CHECK(b.dr_hist == want.dr_hist);
                }
            }
        }
    }
    CHECK(served > 0);
    CHECK(with_rht > 0);
    CHECK(nan_scales > 0);
}
