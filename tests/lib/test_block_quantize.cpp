// quantize_blocks: grid shapes, the scales it reports are rule_scale's, codes are the element
// casts with those scales, and the result does not depend on the thread count.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/hadamard.hpp"
#include "fp8kit/stats/block_quantize.hpp"

using namespace fp8kit;

namespace {

std::vector<float> sample(std::size_t n, unsigned seed) {
    std::mt19937 g(seed);
    std::normal_distribution<float> d;
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = d(g) * std::ldexp(1.0f, static_cast<int>(i / 64 % 20) - 10);
    return v;
}

}  // namespace

TEST_CASE("quantize_blocks: NVFP4 grids, per-block scales and codes", "[lib][blocks]") {
    const std::size_t rows = 48, cols = 80;  // 1x16: 48 x 5 blocks; 16x16: 3 x 5
    const auto x = sample(rows * cols, 1);
    const RecipeSpec r = parse_recipe("nvfp4-rowwise");  // the row-wise copies (no RHT)
    for (Role role : {Role::activation, Role::weight}) {
        const BlockRecipe br = block_recipe(r, role, cols);
        const BlockQuantized q = quantize_blocks(x.data(), Wide::f32, rows, cols, br);
        const std::size_t th = role == Role::weight ? 16 : 1;
        CHECK((q.grid_rows == rows / th && q.grid_cols == cols / 16));
        numerics::ScaleParams p = numerics::make_scale_params(br.rule, br.format, 0.0, false, FLT_MAX, 0);
        numerics::set_global_amax(p, amax_of(x.data(), Wide::f32, x.size()));
        for (std::size_t bi = 0; bi < q.grid_rows; ++bi)
            for (std::size_t bj = 0; bj < q.grid_cols; ++bj) {
                float am = 0;
                for (std::size_t i = bi * th; i < (bi + 1) * th; ++i)
                    for (std::size_t j = bj * 16; j < bj * 16 + 16; ++j) am = std::max(am, std::fabs(x[i * cols + j]));
                const auto s = numerics::rule_scale(p, am);
                const std::size_t b = bi * q.grid_cols + bj;
                REQUIRE(q.scale_codes[b] == s.code);
                REQUIRE(q.scale[b] == s.scale);
                const std::size_t i = bi * th, j = bj * 16 + 3;
                const float y = x[i * cols + j] * s.scale;
                std::uint32_t u;
                std::memcpy(&u, &y, 4);
                REQUIRE(q.codes[i * cols + j] == emu::encode(Format::e2m1, Wide::f32, u, r.policy));
            }
    }
}

TEST_CASE("quantize_blocks: same codes and scales for 1 and 2 threads", "[lib][blocks]") {
    const std::size_t rows = 512, cols = 256;  // above the OpenMP threshold
    const auto x = sample(rows * cols, 2);
    for (const char* preset : {"nvfp4", "mxfp4", "mxfp6-e3m2-ocp"}) {
        INFO(preset);
        const BlockRecipe br = block_recipe(parse_recipe(preset), Role::activation, cols);
        const int before = omp_get_max_threads();
        omp_set_num_threads(1);
        const BlockQuantized a = quantize_blocks(x.data(), Wide::f32, rows, cols, br);
        omp_set_num_threads(2);
        const BlockQuantized b = quantize_blocks(x.data(), Wide::f32, rows, cols, br);
        omp_set_num_threads(before);
        CHECK(a.codes == b.codes);
        CHECK(a.scale_codes == b.scale_codes);
    }
}

TEST_CASE("quantize_blocks refuses a malformed block shape", "[lib][blocks]") {
    BlockRecipe br = block_recipe(parse_recipe("nvfp4-rowwise"), Role::activation, 16);
    br.block_rows = 0;
    const float x[16] = {};
    CHECK_THROWS_AS(quantize_blocks(x, Wide::f32, 1, 16, br), std::invalid_argument);
}

TEST_CASE("nvfp4: inputs and gradients are quantised as TE's column-wise copy with the RHT, weights not",
          "[lib][blocks][rht]") {
    // The independent check (TE's columnwise path transcribed in numpy) is
    // tests/python/test_rht.py; here: every tool's entry point goes through the copy.
    const std::size_t rows = 64, cols = 48;
    auto x = sample(rows * cols, 5);
    x[7 * cols + 3] = 40.0f;  // an outlier the transform spreads over its 16-group
    const RecipeSpec nv = parse_recipe("nvfp4"), rw = parse_recipe("nvfp4-rowwise");
    const ColumnwiseCopy c = columnwise_rht_copy(x.data(), Wide::f32, rows, cols);
    REQUIRE((c.rows == cols && c.cols == rows && c.type == Wide::f32));
    REQUIRE(c.bytes == te_rht16_columnwise(x.data(), Wide::f32, rows, cols));
    for (Role role : {Role::activation, Role::gradient}) {
        INFO(name(role));
        const BlockRecipe br = block_recipe(nv, role, cols), plain = block_recipe(rw, role, cols);
        CHECK(br.columnwise_rht);
        CHECK(!plain.columnwise_rht);
        const BlockQuantized q = quantize_blocks(x.data(), Wide::f32, rows, cols, br);
        const BlockQuantized want = quantize_blocks(c.bytes.data(), Wide::f32, cols, rows, plain);
        CHECK((q.columnwise_rht && q.rows == cols && q.cols == rows));
        CHECK((q.grid_rows == cols && q.grid_cols == rows / 16));
        CHECK(q.codes == want.codes);
        CHECK(q.scale_codes == want.scale_codes);
        CHECK(q.global_amax == want.global_amax);  // after the transform (TE's global_amax_col)
        CHECK(q.global_amax != amax_of(x.data(), Wide::f32, x.size()));
        const BlockStats s = compute_block_stats(x.data(), Wide::f32, rows, cols, br);
        const BlockStats ws = compute_block_stats(c.bytes.data(), Wide::f32, cols, rows, plain);
        CHECK(s.columnwise_rht);
        CHECK((s.grid_rows == cols && s.grid_cols == rows / 16));
        CHECK(s.scale_inv == ws.scale_inv);
        CHECK(s.total.underflow == ws.total.underflow);
        CHECK(s.total.sum_err2 == ws.total.sum_err2);
        // ... and not the row-wise copy's.
        CHECK(s.total.sum_err2 != compute_block_stats(x.data(), Wide::f32, rows, cols, plain).total.sum_err2);
    }
    const BlockRecipe w = block_recipe(nv, Role::weight, cols);
    CHECK(!w.columnwise_rht);
    CHECK(quantize_blocks(x.data(), Wide::f32, rows, cols, w).codes ==
          quantize_blocks(x.data(), Wide::f32, rows, cols, block_recipe(rw, Role::weight, cols)).codes);
}

TEST_CASE("nvfp4: the column-wise RHT refuses a row count that is not a multiple of 16", "[lib][blocks][rht]") {
    const BlockRecipe br = block_recipe(parse_recipe("nvfp4"), Role::gradient, 16);
    const std::vector<float> x(24 * 16, 1.0f);
    CHECK_THROWS_WITH(check_block_input(br, 24, 16),
                      Catch::Contains("multiple of 16, got 24") && Catch::Contains("nvfp4-rowwise"));
    CHECK_THROWS_AS(quantize_blocks(x.data(), Wide::f32, 24, 16, br), std::invalid_argument);
    CHECK_THROWS_AS(compute_block_stats(x.data(), Wide::f32, 24, 16, br), std::invalid_argument);
    CHECK_NOTHROW(check_block_input(br, 32, 16));
}
