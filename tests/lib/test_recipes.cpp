// Every recipe against hand-worked sequences. Expected scales are float32 bit patterns whose
// arithmetic is written next to them; nothing here calls the code under test to get an expected value.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "fp8kit/numerics/scale_rules.hpp"
#include "fp8kit/recipes.hpp"
#include "float_bits.hpp"

using namespace fp8kit;

namespace {

using fp8kit_test::from_bits;

using fp8kit_test::bits;

using fp8kit_test::kInf;
using fp8kit_test::kNaN;
const float kTiny = from_bits(1);  // 2^-149

// Scales a DelayedScaling gives for each step when fed `amaxes` (the scale of step t is read
// before step t's amax is recorded).
std::vector<std::uint32_t> replay(DelayedScaling d, const std::vector<float>& amaxes) {
    std::vector<std::uint32_t> out;
    for (float a : amaxes) {
        out.push_back(bits(d.scale_for_step()));
        d.record(a);
    }
    out.push_back(bits(d.scale_for_step()));
    return out;
}

// Powers of two: 2^e has bits (e + 127) << 23.
constexpr std::uint32_t p2(int e) { return static_cast<std::uint32_t>(e + 127) << 23; }

}  // namespace

TEST_CASE("TE current scaling: compute_scale_from_amax", "[lib][recipes]") {
    // 448 / 1 = 448 = 1.75 * 2^8: exponent 135 = 0x87, mantissa .11 -> 0x43E00000.
    CHECK(bits(te_scale(1.0f, 448.0f, 0.0f, false, FLT_MAX)) == 0x43E00000u);
    // 448 / 3 = 149.333... = 1.0010101010...b * 2^7. The 23 stored bits are 0010101...01 = 0x155555
    // and the rest (0101...) is below half an ulp, so it rounds down: (134 << 23) | 0x155555.
    CHECK(bits(te_scale(3.0f, 448.0f, 0.0f, false, FLT_MAX)) == 0x43155555u);
    // E5M2: 57344 / 3 = 1.1666.. * 2^14, same mantissa, exponent 141: 0x46955555.
    CHECK(bits(te_scale(3.0f, 57344.0f, 0.0f, false, FLT_MAX)) == 0x46955555u);
    // pow2 keeps sign and exponent: 149.33 -> 128.
    CHECK(bits(te_scale(3.0f, 448.0f, 0.0f, true, FLT_MAX)) == p2(7));
    // Zero, Inf and NaN amax: scale 1.
    CHECK(bits(te_scale(0.0f, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    CHECK(bits(te_scale(kInf, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    CHECK(bits(te_scale(kNaN, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    // amax below eps is raised to eps: 1e-10 < 1 -> 448 / 1.
    CHECK(bits(te_scale(1e-10f, 448.0f, 1.0f, false, FLT_MAX)) == 0x43E00000u);
    // Zero amax with eps > 0 is raised first: 448 / 2 = 224 = 1.75 * 2^7 -> 0x43600000.
    CHECK(bits(te_scale(0.0f, 448.0f, 2.0f, false, FLT_MAX)) == 0x43600000u);
    // Tiny amax: 448 / 2^-149 = 1.75 * 2^157 overflows -> value_for_inf (FLT_MAX = 0x7F7FFFFF);
    // with pow2, FLT_MAX's exponent only: 2^127.
    CHECK(bits(te_scale(kTiny, 448.0f, 0.0f, false, FLT_MAX)) == 0x7F7FFFFFu);
    CHECK(bits(te_scale(kTiny, 448.0f, 0.0f, true, FLT_MAX)) == p2(127));
}

TEST_CASE("TE DelayedScaling: first step, spikes, zeros, Inf, NaN, tiny, growing, decaying", "[lib][recipes]") {
    const std::uint32_t s448 = 0x43E00000u;  // 448 / 1
    const std::uint32_t s224 = 0x43600000u;  // 448 / 2 = 1.75 * 2^7
    const std::uint32_t s112 = 0x42E00000u;  // 448 / 4 = 1.75 * 2^6
    const std::uint32_t s56 = 0x42600000u;   // 448 / 8 = 1.75 * 2^5
    const std::uint32_t s7 = 0x40E00000u;    // 448 / 64 = 1.75 * 2^2
    const std::uint32_t s1 = p2(0);

    SECTION("first step casts with scale 1") {
        DelayedScaling d(448.0f, 1024, AmaxAlgo::max, 0);
        CHECK(bits(d.scale_for_step()) == s1);
        d.record(1.0f);
        CHECK(bits(d.scale_for_step()) == s448);
    }
    SECTION("one spike stays exactly L = 4 updates") {
        // The spike recorded at step 2 sets the scales of steps 3, 4, 5 and 6 (448/64 = 7);
        // step 7 is back to 448. Trace of history after each update: [0,0,0,64] [0,0,64,1]
        // [0,64,1,1] [0,1,1,1] -- the max at update k reads slots 1..3 plus the new amax.
        const auto got = replay(DelayedScaling(448.0f, 4, AmaxAlgo::max, 0), {1, 1, 64, 1, 1, 1, 1, 1});
        const std::vector<std::uint32_t> want = {s1, s448, s448, s7, s7, s7, s7, s448, s448};
        CHECK(got == want);
    }
    SECTION("zero amax does not roll the history") {
        // L = 2: the 64 stays in slot 1 through three zero steps, so the 1 after them still
        // sees max(64, 1). Had zeros rolled, 64 would be gone and the scale 448.
        const auto got = replay(DelayedScaling(448.0f, 2, AmaxAlgo::max, 0), {64, 0, 0, 0, 1});
        const std::vector<std::uint32_t> want = {s1, s7, s7, s7, s7, s7};
        CHECK(got == want);
    }
    SECTION("zero amax at the first steps keeps scale 1") {
        const auto got = replay(DelayedScaling(448.0f, 4, AmaxAlgo::most_recent, 0), {0, 0, 2});
        const std::vector<std::uint32_t> want = {s1, s1, s1, s224};
        CHECK(got == want);
    }
    SECTION("Inf amax freezes the scale for L updates") {
        // L = 3: 2 -> 224. Inf enters; the window max is Inf for 3 updates, so the scale stays
        // 224 although without the Inf the third would give 448 (window [1,1,1]).
        const auto got = replay(DelayedScaling(448.0f, 3, AmaxAlgo::max, 0), {2, kInf, 1, 1, 1});
        const std::vector<std::uint32_t> want = {s1, s224, s224, s224, s224, s448};
        CHECK(got == want);
    }
    SECTION("NaN is ignored by the max (fmaxf), and keeps the scale with most_recent") {
        const auto got = replay(DelayedScaling(448.0f, 2, AmaxAlgo::max, 0), {4, kNaN, 8});
        // [0,4] -> 112; NaN: max(4, NaN) = 4 -> 112; 8: max(NaN, 8) = 8 -> 56.
        const std::vector<std::uint32_t> want = {s1, s112, s112, s56};
        CHECK(got == want);
        const auto mr = replay(DelayedScaling(448.0f, 2, AmaxAlgo::most_recent, 0), {4, kNaN, 8});
        const std::vector<std::uint32_t> want_mr = {s1, s112, s112, s56};
        CHECK(mr == want_mr);
    }
    SECTION("tiny amax gives FLT_MAX, not Inf") {
        const auto got = replay(DelayedScaling(448.0f, 1, AmaxAlgo::most_recent, 0), {kTiny});
        CHECK(got.back() == 0x7F7FFFFFu);
    }
    SECTION("growing amax, history 1 (Megatron): the scale lags one step") {
        const auto got = replay(DelayedScaling(448.0f, 1, AmaxAlgo::most_recent, 0), {1, 2, 4, 8});
        const std::vector<std::uint32_t> want = {s1, s448, s224, s112, s56};
        CHECK(got == want);
    }
    SECTION("decaying amax with max over L = 4: the largest stays until it leaves") {
        const auto got = replay(DelayedScaling(448.0f, 4, AmaxAlgo::max, 0), {8, 4, 2, 1, 1, 1, 1});
        const std::vector<std::uint32_t> want = {s1, s56, s56, s56, s56, s112, s224, s448};
        CHECK(got == want);
    }
    SECTION("margin divides by 2^margin") {
        const auto got = replay(DelayedScaling(448.0f, 1, AmaxAlgo::max, 1), {1});
        CHECK(got.back() == s224);
    }
    SECTION("non-power-of-two quotient in float32") {
        const auto got = replay(DelayedScaling(448.0f, 1, AmaxAlgo::max, 0), {3});
        CHECK(got.back() == 0x43155555u);  // see the current-scaling case
    }
}

namespace {

// TE's kernel_bulk written as TE writes it (transformer_engine/common/recipe/delayed_scaling.cu
// with the torch.roll of the history): the whole history rolled every step. DelayedScaling keeps
// a ring and a monotonic max queue instead; both must give the same scales and history, bit for bit.
struct RollingDelayed {
    std::vector<float> h;
    float scale = 1.0f, scaled_max;
    bool most_recent;
    void record(float amax) {
        h[0] = amax;
        const float last = h[0];
        float m = 0.0f;
        if (last != 0.0f) {
            const std::size_t L = h.size();
            std::vector<float> a(L);
            for (std::size_t i = 0; i < L; ++i) {
                a[i] = (i < L - 1) ? h[i + 1] : last;
                m = std::fmax(m, a[i]);
            }
            for (std::size_t i = 0; i < L; ++i) h[i] = (i > 0) ? a[i] : 0.0f;
        }
        if (most_recent) m = last;
        scale = numerics::te_delayed_scale(m, scale, scaled_max);
    }
};

}  // namespace

TEST_CASE("TE DelayedScaling: the ring buffer equals the rolled history bit for bit", "[lib][recipes]") {
    // Random amaxes with runs of zeros and -0, NaN, Inf, negatives and spikes, for history lengths
    // around the ring's edge cases (1, 2) and TE's default 1024.
    std::uint64_t x = 0x9E3779B97F4A7C15ull;
    auto next = [&x] {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x;
    };
    const float specials[] = {0.0f, -0.0f, kNaN, kInf, -1.0f, 1e30f, kTiny, 0.0f};
    for (const int L : {1, 2, 3, 5, 16, 1024}) {
        for (const AmaxAlgo algo : {AmaxAlgo::max, AmaxAlgo::most_recent}) {
            DelayedScaling d(448.0f, L, algo, 1);
            RollingDelayed ref{std::vector<float>(static_cast<std::size_t>(L), 0.0f), 1.0f,
                               numerics::te_scaled_max(448.0f, 1), algo == AmaxAlgo::most_recent};
            for (int step = 0; step < 5000; ++step) {
                const std::uint64_t r = next();
                float a = (r % 8 == 0) ? specials[(r >> 8) % 8]
                                       : std::ldexp(static_cast<float>((r >> 16) % 1000 + 1),
                                                    static_cast<int>((r >> 32) % 40) - 30);
                if (step % 1500 > 1400) a = a * 1e-3f;  // a decaying stretch: the max must leave on time
                d.record(a);
                ref.record(a);
                REQUIRE(bits(d.scale_for_step()) == bits(ref.scale));
                if (step % 97 == 0 || L <= 3) {
                    const std::vector<float> h = d.history();
                    REQUIRE(h.size() == ref.h.size());
                    for (std::size_t i = 0; i < h.size(); ++i) REQUIRE(bits(h[i]) == bits(ref.h[i]));
                }
            }
            CHECK(d.steps() == 5000u);
        }
    }
}

TEST_CASE("torchao amax_to_scale", "[lib][recipes]") {
    // 448 / 3 in binary64 then rounded to float32: the same 0x43155555 (the binary64 quotient is
    // not near a float32 midpoint).
    CHECK(bits(torchao_scale(3.0f, 448.0f, 1e-12, false)) == 0x43155555u);
    CHECK(bits(torchao_scale(3.0f, 448.0f, 1e-12, true)) == p2(7));
    // Zero amax is clamped to 1e-12: 448e12 = 4.48e14 lies in [2^48, 2^49) -> pow2 gives 2^48.
    CHECK(bits(torchao_scale(0.0f, 448.0f, 1e-12, true)) == p2(48));
    // Inf amax: 448 / Inf = 0 (no guard); NaN propagates.
    CHECK(bits(torchao_scale(kInf, 448.0f, 1e-12, false)) == 0u);
    CHECK(std::isnan(torchao_scale(kNaN, 448.0f, 1e-12, true)));
    // E5M2, amax 57344: scale exactly 1.
    CHECK(bits(torchao_scale(57344.0f, 57344.0f, 1e-12, true)) == p2(0));
}

TEST_CASE("MS-AMP compute_scaling_factor", "[lib][recipes]") {
    // MS-AMP's own test values: 448/10 = 44.8 -> 2^5; 448/10000 = 0.0448 -> 2^-5.
    CHECK(bits(msamp_scale(10.0f, 1.0f, 448.0f, 0)) == p2(5));
    CHECK(bits(msamp_scale(10000.0f, 1.0f, 448.0f, 0)) == p2(-5));
    CHECK(bits(msamp_scale(10.0f, 1.0f, 448.0f, 1)) == p2(4));
    // amax 0 and NaN keep the previous scale (here 8). An Inf amax also takes the previous scale,
    // but compute_scaling_factor's last step still inverts it (exp = floor(log2(0)) = -Inf < 0):
    // 1/8 (tests/numerics/test_scale_rules.cpp has every step).
    CHECK(bits(msamp_scale(0.0f, 8.0f, 448.0f, 0)) == p2(3));
    CHECK(bits(msamp_scale(kInf, 8.0f, 448.0f, 0)) == p2(-3));
    CHECK(bits(msamp_scale(kNaN, 8.0f, 448.0f, 0)) == p2(3));
    // Exact power-of-two quotient: 448 / 7 = 64 -> 2^6 (floor of an integer log2).
    CHECK(bits(msamp_scale(7.0f, 1.0f, 448.0f, 0)) == p2(6));
    // Tiny amax: 448 / 2^-149 overflows to Inf in float32 and MS-AMP keeps it.
    CHECK(std::isinf(msamp_scale(kTiny, 1.0f, 448.0f, 0)));
}

TEST_CASE("MS-AMP window: in-time until full, roll, reset on NaN", "[lib][recipes]") {
    MsampScaling m(448.0f, 3, 0);
    struct Step {
        float amax;
        std::uint32_t scale;
        bool in_time;
    };
    // Hand trace (W = 3). In-time steps use floor-pow2(448 / own amax); later steps the scale
    // from the max over the window of the last 3 amaxes at the previous update.
    //  0: in-time 448/10 -> 32          window after roll [0,10,0]
    //  1: in-time 448/100 -> 4          [0,100,10]
    //  2: in-time 448/1 -> 256; update max(1,100,10) = 100 -> 4; counter 3
    //  3: delayed 4; update max(1,1,100) -> 4
    //  4: delayed 4; update max(1,1,1) -> 256
    //  5: delayed 256; amax NaN: max is NaN -> keeps 256; counter reset to 0
    //  6: in-time 448/2 = 224 -> 128; update max has NaN -> keeps 128; counter 1
    //  7: in-time 448/8 = 56 -> 32; counter 2
    //  8: in-time 448/1 -> 256; update max(1,8,2) = 8 -> 32; counter 3
    //  9: delayed 32
    const Step steps[] = {{10, p2(5), true}, {100, p2(2), true},   {1, p2(8), true}, {1, p2(2), false},
                          {1, p2(2), false}, {kNaN, p2(8), false}, {2, p2(7), true}, {8, p2(5), true},
                          {1, p2(8), true},  {1, p2(5), false}};
    int i = 0;
    for (const auto& s : steps) {
        INFO("step " << i++);
        CHECK(m.in_time() == s.in_time);
        CHECK(bits(m.scale_for_step(s.amax)) == s.scale);
        m.record(s.amax);
    }
}

TEST_CASE("DeepGEMM scales", "[lib][recipes]") {
    // amax 448 -> sf = 1, scale 1.
    auto p = deepseek_scale(448.0f, 448.0f, 1e-4f, false);
    CHECK(bits(p.scale) == p2(0));
    CHECK(bits(p.scale_inv) == p2(0));
    // UE8M0: sf = 1344/448 = 3 -> 2^ceil(log2 3) = 4, scale 1/4.
    p = deepseek_scale(1344.0f, 448.0f, 1e-4f, true);
    CHECK(bits(p.scale_inv) == p2(2));
    CHECK(bits(p.scale) == p2(-2));
    // A power of two stays: sf = 1792/448 = 4.
    p = deepseek_scale(1792.0f, 448.0f, 1e-4f, true);
    CHECK(bits(p.scale_inv) == p2(2));
    // Zero amax is floored at 1e-4 (float32): sf = fl32(fl32(1e-4) / 448), with UE8M0:
    // 1e-4/448 = 2.23e-7 lies in [2^-23, 2^-22) -> 2^-22.
    p = deepseek_scale(0.0f, 448.0f, 1e-4f, true);
    CHECK(bits(p.scale_inv) == p2(-22));
    CHECK(bits(p.scale) == p2(22));
    // Without UE8M0 the division is float32: fl32(1e-4) / 448 (not a power of two).
    p = deepseek_scale(0.0f, 448.0f, 1e-4f, false);
    CHECK(p.scale_inv == 1e-4f / 448.0f);
}

TEST_CASE("MX E8M0 block scales", "[lib][recipes]") {
    // TE round-up: val = amax * fl32(1/448). fl32(1/7) has significand 0x924925 (rounded up),
    // 7 * 0x924925 = 2^26 + 3, so 448 * fl32(1/448) = 1 + 3*2^-26 which rounds to 1.0:
    // code 127 (X = 1), and 448 maps to 448 exactly.
    CHECK(mx_e8m0_scale_roundup(448.0f, Format::e4m3) == 127);
    CHECK(mx_e8m0_scale_roundup(449.0f, Format::e4m3) == 128);  // val > 1 -> round up to 2
    // amax 1: val = fl32(1/448) in [2^-9, 2^-8) with a nonzero mantissa -> 2^-8: code 119.
    CHECK(mx_e8m0_scale_roundup(1.0f, Format::e4m3) == 119);
    CHECK(mx_e8m0_scale_roundup(0.0f, Format::e4m3) == 0);
    CHECK(mx_e8m0_scale_roundup(kNaN, Format::e4m3) == 0xFF);
    CHECK(mx_e8m0_scale_roundup(kInf, Format::e4m3) == 0xFE);
    // E5M2: 57344 * fl32(1/57344) -> code 127 as well (1/57344 = (1/7) * 2^-13).
    CHECK(mx_e8m0_scale_roundup(57344.0f, Format::e5m2) == 127);
    // OCP floor: X = 2^(floor(log2 amax) - 8) for E4M3 (emax 8), 15 for E5M2.
    CHECK(mx_e8m0_scale_floor_ocp(448.0f, Format::e4m3) == 127);
    CHECK(mx_e8m0_scale_floor_ocp(500.0f, Format::e4m3) == 127);  // 500 > 448: saturates in the cast
    CHECK(mx_e8m0_scale_floor_ocp(1.0f, Format::e4m3) == 119);
    CHECK(mx_e8m0_scale_floor_ocp(65536.0f, Format::e5m2) == 128);
    CHECK(mx_e8m0_scale_floor_ocp(kTiny, Format::e4m3) == 0);  // -149 - 8 + 127 < 0 -> clamp
    CHECK(mx_e8m0_scale_floor_ocp(0.0f, Format::e4m3) == 0);
    CHECK(mx_e8m0_scale_floor_ocp(kNaN, Format::e4m3) == 0xFF);
    // The scale pair of a code: 2^(code-127) and its inverse; code 0 -> 2^-127 (subnormal).
    const auto pr = e8m0_scale_pair(0);
    CHECK(bits(pr.scale_inv) == (1u << 22));
    CHECK(bits(pr.scale) == p2(127));
    CHECK(bits(e8m0_scale_pair(130).scale) == p2(-3));
}

TEST_CASE("recipe_scale follows each preset's rule", "[lib][recipes]") {
    CHECK(bits(recipe_scale(parse_recipe("te-current"), Role::activation, 3.0f).scale) == 0x43155555u);
    CHECK(bits(recipe_scale(parse_recipe("te-block"), Role::weight, 3.0f).scale) == p2(7));
    CHECK(bits(recipe_scale(parse_recipe("torchao-rowwise"), Role::gradient, 3.0f).scale) == p2(7));
    // mxfp8: code 0 casts with scale 1 in TE (exp2f_rcp), dequantises with 2^-127.
    const auto mx = recipe_scale(parse_recipe("mxfp8"), Role::activation, 0.0f);
    CHECK(bits(mx.scale) == p2(0));
    CHECK(bits(mx.scale_inv) == (1u << 22));
    CHECK(bits(recipe_scale(parse_recipe("deepseek-v3"), Role::activation, 448.0f).scale) == p2(0));
}
