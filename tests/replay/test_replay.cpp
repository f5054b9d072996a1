// Replay against TransformerEngine sequences worked by hand (delayed_scaling.cu kernel_bulk:
// scale 1 at step 0; the update after step t gives step t+1's scale from the last L amaxes;
// zero amax does not roll; fmaxf ignores NaN; Inf keeps the previous scale).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "fp8kit/analysis/replay.hpp"
#include "float_bits.hpp"

using namespace fp8kit;

namespace {

using fp8kit_test::bits;
using fp8kit_test::kInf;
using fp8kit_test::kNaN;

std::vector<std::uint32_t> bits(const std::vector<float>& v) {
    std::vector<std::uint32_t> o;
    for (float f : v) o.push_back(bits(f));
    return o;
}

RecipeSpec te(int L, AmaxAlgo algo, int margin) {
    RecipeSpec r = parse_recipe("te-delayed");
    r.history_len = L;
    r.algo = algo;
    r.margin = margin;
    return r;
}

std::vector<std::uint32_t> replayed(const RecipeSpec& r, std::vector<float> amax, Format f = Format::e4m3) {
    return bits(replay::scales(r, Role::activation, f, amax));
}

}  // namespace

TEST_CASE("replay: one spike stays in the max for exactly L steps", "[replay]") {
    // L = 4: the spike recorded at step 1 sets the scales of steps 2, 3, 4 and 5 (448/8 = 56).
    const auto s = replayed(te(4, AmaxAlgo::max, 0), {1, 8, 1, 1, 1, 1, 1, 1});
    REQUIRE(s == bits(std::vector<float>{1, 448, 56, 56, 56, 56, 448, 448}));
    // most_recent forgets it at once.
    REQUIRE(replayed(te(4, AmaxAlgo::most_recent, 0), {1, 8, 1, 1}) == bits(std::vector<float>{1, 448, 56, 448}));
}

TEST_CASE("replay: first step casts with scale 1, then float32 fmax/amax", "[replay]") {
    // fl32(448 / 3) = 0x43155555 (149.333328...), worked out independently of fp8kit.
    const auto s = replayed(te(1024, AmaxAlgo::max, 0), {3, 3, 3});
    REQUIRE(s == std::vector<std::uint32_t>{0x3F800000u, 0x43155555u, 0x43155555u});
    // margin 1 halves it: fl32(224 / 3) = 0x42955555.
    REQUIRE(replayed(te(16, AmaxAlgo::max, 1), {3, 3})[1] == 0x42955555u);
    // E5M2: 57344 / 4 = 14336.
    REQUIRE(replayed(te(16, AmaxAlgo::max, 0), {4, 4}, Format::e5m2)[1] == bits(14336.0f));
}

TEST_CASE("replay: Inf amax freezes the scale while it is in the window", "[replay]") {
    // L = 2: after 2 the scale is 224; Inf at step 1 keeps 224 for two updates; then 448.
    REQUIRE(replayed(te(2, AmaxAlgo::max, 0), {2, kInf, 1, 1, 1}) == bits(std::vector<float>{1, 224, 224, 224, 448}));
}

TEST_CASE("replay: zero amax does not roll the history", "[replay]") {
    // L = 2: 4 at step 0 stays in the window across the zeros and still counts at step 3's
    // update (step 4 casts with 112); a rolling history would have dropped it (448).
    REQUIRE(replayed(te(2, AmaxAlgo::max, 0), {4, 0, 0, 1, 1, 1}) ==
            bits(std::vector<float>{1, 112, 112, 112, 112, 448}));
}

TEST_CASE("replay: NaN is ignored by the max", "[replay]") {
    REQUIRE(replayed(te(2, AmaxAlgo::max, 0), {2, kNaN, 1, 1}) == bits(std::vector<float>{1, 224, 224, 448}));
    // most_recent takes the NaN itself, which is not finite: the scale stays.
    REQUIRE(replayed(te(2, AmaxAlgo::most_recent, 0), {2, kNaN, 1}) == bits(std::vector<float>{1, 224, 224}));
}

TEST_CASE("replay: overflow is decided on the float32 product", "[replay]") {
    // E4M3: 448 is the largest value, 480 the next step; the midpoint 464 rounds to even (448).
    CHECK_FALSE(replay::overflows(464.0f, 1.0f, Format::e4m3));
    CHECK(replay::overflows(std::nextafter(464.0f, 1000.0f), 1.0f, Format::e4m3));
    // E5M2: 57344 is the largest, the midpoint 61440 rounds to even = 65536 = Inf.
    CHECK(replay::overflows(61440.0f, 1.0f, Format::e5m2));
    CHECK_FALSE(replay::overflows(std::nextafter(61440.0f, 0.0f), 1.0f, Format::e5m2));
    // fl32(464/3) * 3 is 464.0000153 exactly but 464 in float32: no overflow; the next float
    // gives 464.00006 in float32: overflow.
    const float a = 464.0f / 3.0f;
    REQUIRE(bits(a) == 0x431AAAABu);
    CHECK_FALSE(replay::overflows(a, 3.0f, Format::e4m3));
    CHECK(replay::overflows(std::nextafter(a, 1000.0f), 3.0f, Format::e4m3));
    CHECK(replay::overflows(kInf, 1.0f, Format::e4m3));
    CHECK_FALSE(replay::overflows(kNaN, 1.0f, Format::e4m3));
    CHECK_FALSE(replay::overflows(0.0f, 1.0f, Format::e4m3));
}

TEST_CASE("replay: a series gives scales, headroom and overflow step by step", "[replay]") {
    trace::Series s;
    s.tensor = "layer.grad_output";
    s.role = recipe_slot(guess_role(s.tensor));
    s.steps = {10, 11, 12, 13};
    s.amax = {1000, 2000, 1000, 1000};
    const auto r = replay::replay_series(te(2, AmaxAlgo::max, 0), s, std::nullopt);
    REQUIRE(r.format == Format::e5m2);  // hybrid: gradients E5M2
    // 57344/1000 = 57.344 -> fl32; step 11: 2000 * fl32(57.344) = 114688 > 61440: overflow.
    REQUIRE(bits(r.scale) == bits(std::vector<float>{1, 57344.0f / 1000.0f, 57344.0f / 2000.0f, 57344.0f / 2000.0f}));
    REQUIRE(r.overflow == std::vector<std::uint8_t>{0, 1, 0, 0});
    REQUIRE(r.overflow_steps == 1);
    REQUIRE(r.worst_step == 11);
    REQUIRE(r.headroom[1] == Approx(2.0).epsilon(1e-6));  // binary64 of float32 scale: not exactly 2
    // --format overrides the hybrid choice.
    REQUIRE(replay::replay_series(te(2, AmaxAlgo::max, 0), s, Format::e4m3).format == Format::e4m3);
}

TEST_CASE("replay: current scaling uses the step's own amax; blockwise recipes need data", "[replay]") {
    const auto cur = replay::scales(parse_recipe("te-current"), Role::activation, Format::e4m3, {2, 4, 0});
    REQUIRE(bits(cur) == bits(std::vector<float>{224, 112, 1}));  // amax 0 -> scale 1 (TE)
    REQUIRE_THROWS_AS(replay::scales(parse_recipe("mxfp8"), Role::activation, Format::e4m3, {1}),
                      std::invalid_argument);
    // MS-AMP: in-time scaling over the first window, powers of two: 2^floor(log2(448/3)) = 128.
    const auto ms = replay::scales(parse_recipe("msamp"), Role::activation, Format::e4m3, {3});
    REQUIRE(bits(ms[0]) == bits(128.0f));
}

// Issue 16: a role that rounds stochastically overflows whenever fl32(amax * scale) is above the
// largest finite value (stochastic rounding carries it past with nonzero probability); nearest-even
// only past the midpoint to the next binade's first value (E5M2: 61440).
TEST_CASE("replay: a role's stochastic rounding counts every product above max as an overflow", "[replay]") {
    const float above = std::nextafter(57344.0f, 1e9f);
    CHECK_FALSE(replay::overflows(above, 1.0f, Format::e5m2));
    CHECK_FALSE(replay::overflows(above, 1.0f, Format::e5m2, Rounding::nearest_even));
    CHECK(replay::overflows(above, 1.0f, Format::e5m2, Rounding::stochastic));
    CHECK_FALSE(replay::overflows(57344.0f, 1.0f, Format::e5m2, Rounding::stochastic));
    CHECK(replay::overflows(kInf, 1.0f, Format::e5m2, Rounding::stochastic));
    CHECK_FALSE(replay::overflows(kNaN, 1.0f, Format::e5m2, Rounding::stochastic));
    trace::Series s;
    s.tensor = "layer.grad_output";
    s.role = recipe_slot(guess_role(s.tensor));
    s.steps = {0, 1};
    s.amax = {above, 1.0f};  // step 0 casts with TE's initial scale 1
    RecipeSpec r = te(1, AmaxAlgo::most_recent, 0);
    CHECK(replay::replay_series(r, s, std::nullopt).overflow_steps == 0);
    r.grad.rounding = Rounding::stochastic;
    CHECK(replay::replay_series(r, s, std::nullopt).overflow == std::vector<std::uint8_t>{1, 0});
    s.role = Role::activation;  // the input slot keeps the recipe-wide rounding (E4M3: 57345 overflows anyway)
    s.amax = {448.5f, 1.0f};
    CHECK(replay::replay_series(r, s, std::nullopt).overflow_steps == 0);
}
