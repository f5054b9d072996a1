// Shape signals on tensors built with known answers.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "fp8kit/warn/shape.hpp"

using namespace fp8kit;
using namespace fp8kit::warn;

TEST_CASE("per-channel amax: outlier channels and their ratio", "[warn]") {
    const std::uint64_t rows = 16, cols = 32;
    std::vector<float> x(rows * cols, 0.5f);
    x[3 * cols + 7] = 100.0f;  // channel 7: 200 x the median 0.5
    x[5 * cols + 9] = -20.0f;  // channel 9: 40 x, below outlier_k = 64
    ShapeConfig c;
    const ShapeStats s = shape_of(x.data(), rows, cols, Role::activation, c);
    CHECK(s.median_channel_amax == 0.5);
    CHECK(s.max_channel_amax == 100.0);
    CHECK(s.outlier_channels == std::vector<std::uint64_t>{7});
}

TEST_CASE("kurtosis of a two-point and of a sparse distribution", "[warn]") {
    std::vector<float> x(1000);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = i % 2 ? 1.0f : -1.0f;
    ShapeConfig c;
    CHECK(shape_of(x.data(), 10, 100, Role::activation, c).kurtosis == Approx(1.0).epsilon(1e-12));
    // One value in n: kurtosis ~ n (n = 1000: (n - 1)^3 / n + 1/n ... computed exactly below).
    std::fill(x.begin(), x.end(), 0.0f);
    x[17] = 1.0f;
    const double n = 1000, p = 1 / n, mean = p;
    const double m2 = p * (1 - mean) * (1 - mean) + (1 - p) * mean * mean;
    const double m4 = p * std::pow(1 - mean, 4) + (1 - p) * std::pow(mean, 4);
    CHECK(shape_of(x.data(), 10, 100, Role::activation, c).kurtosis == Approx(m4 / (m2 * m2)).epsilon(1e-9));
}

TEST_CASE("block statistics under MXFP8: underflow, saturation and scale spread from compute_block_stats", "[warn]") {
    ShapeConfig c;
    c.block_recipe = parse_recipe("mxfp8");
    // Two 1x32 blocks per row: amax 1 and 2^-10: scale_inv exponents differ by 10.
    std::vector<float> x(4 * 64);
    for (std::size_t r = 0; r < 4; ++r)
        for (std::size_t k = 0; k < 64; ++k) x[r * 64 + k] = k < 32 ? 1.0f : std::ldexp(1.0f, -10);
    const ShapeStats s = shape_of(x.data(), 4, 64, Role::activation, c);
    REQUIRE(s.has_blocks);
    CHECK(s.blocks == 8);
    CHECK(s.underflow == 0);
    CHECK(s.saturation == 0);
    CHECK(s.scale_log2_range == 10);
    CHECK(s.scale_log2_std == 5);
}

TEST_CASE("SwiGLU: gate/up names and channel alignment", "[warn]") {
    CHECK(swiglu_up_name("step_1/model.layers.3.mlp.gate_proj/weight") == "step_1/model.layers.3.mlp.up_proj/weight");
    CHECK(swiglu_up_name("layers.0.feed_forward.w1.weight") == "layers.0.feed_forward.w3.weight");
    CHECK(swiglu_up_name("model.layers.0.mlp.down_proj.weight").empty());
    std::mt19937 g(5);
    std::normal_distribution<float> d;
    const std::uint64_t rows = 64, cols = 256;
    std::vector<float> gate(rows * cols), up(rows * cols);
    for (auto& v : gate) v = d(g);
    for (auto& v : up) v = d(g);
    for (std::uint64_t c = 0; c < cols; ++c) up[10 * cols + c] = -3 * gate[10 * cols + c];  // cos -1
    const SwigluAlignment a = swiglu_alignment(gate.data(), up.data(), rows, cols, 0.9);
    CHECK(a.aligned == std::vector<std::uint64_t>{10});
    CHECK(a.cos[10] == Approx(-1).epsilon(1e-12));
}
