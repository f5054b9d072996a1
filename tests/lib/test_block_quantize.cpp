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
    const RecipeSpec r = parse_recipe("nvfp4");
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
    BlockRecipe br = block_recipe(parse_recipe("nvfp4"), Role::activation, 16);
    br.block_rows = 0;
    const float x[16] = {};
    CHECK_THROWS_AS(quantize_blocks(x, Wide::f32, 1, 16, br), std::invalid_argument);
}
