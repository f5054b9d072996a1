// compute_block_stats on strips of whole tile rows (BlockStrip: the tensor's block_global_amax and
// the totals of the strips above) against one call on the whole tensor, bfloat16 data, for the
// NVFP4 rules (a second-level scale from the whole tensor) and MX / 1 x 128 (none).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "fp8kit/numerics/scale_rules.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/statistics.hpp"

using namespace fp8kit;

TEST_CASE("compute_block_stats: strips with BlockStrip equal the whole tensor (bf16)", "[lib][stats]") {
    const std::size_t rows = 96, cols = 64, strip = 32;  // 3 strips, amaxes 2^-4, 2^0, 2^4 by band
    std::mt19937 g(5);
    std::normal_distribution<float> n01;
    std::vector<std::uint16_t> x(rows * cols);
    for (std::size_t i = 0; i < x.size(); ++i) {
        const float f = n01(g) * std::ldexp(1.0f, 4 * static_cast<int>(i / (strip * cols)) - 4);
        std::uint32_t u;
        std::memcpy(&u, &f, 4);
        x[i] = static_cast<std::uint16_t>(u >> 16);  // truncation: any bf16 value will do
    }
    for (const char* preset : {"nvfp4", "nvfp4-rowwise", "nvfp4-torchao", "mxfp8", "mxfp4", "deepseek-v3"}) {
        for (Role role : {Role::activation, Role::weight, Role::gradient}) {  // gradient: nvfp4 rounds stochastically
            INFO(preset << " role " << static_cast<int>(role));
            const BlockRecipe br = block_recipe(parse_recipe(preset), role, cols);
            if (br.block_rows > static_cast<int>(strip)) continue;  // deepseek-v3 weights: 128 x 128
            const BlockStats whole = compute_block_stats(x.data(), Wide::bf16, rows, cols, br);
            float global = 0;
            for (std::size_t r = 0; r < rows; r += strip)
                global = std::max(global, block_global_amax(&x[r * cols], Wide::bf16, strip, cols, br));
            QuantStats total;
            for (std::size_t r = 0; r < rows; r += strip) {
                BlockStrip s;
                s.global_amax = global;
                s.before = r ? &total : nullptr;
                s.first_row = r;
                s.total_rows = rows;
                QuantStats next = compute_block_stats(&x[r * cols], Wide::bf16, strip, cols, br, s).total;
                total = std::move(next);
            }
            const QuantStats& w = whole.total;
            CHECK(total.numel == w.numel);
            CHECK(total.underflow == w.underflow);
            CHECK(total.subnormal == w.subnormal);
            CHECK(total.overflow == w.overflow);
            CHECK(total.zeros == w.zeros);
            CHECK(total.exp_hist == w.exp_hist);
            CHECK(total.amax == w.amax);
            CHECK(total.min_nonzero == w.min_nonzero);
            if (br.columnwise_rht) {  // the copy's tiles cross the strips: sums regrouped (2 n 2^-53)
                const double tol = 2.0 * static_cast<double>(whole.blocks) * std::ldexp(1.0, -53);
                CHECK(std::fabs(total.sum_x2 - w.sum_x2) <= tol * w.sum_x2);
                CHECK(std::fabs(total.sum_err2 - w.sum_err2) <= tol * w.sum_err2);
            } else {
                CHECK(total.sum_x2 == w.sum_x2);
                CHECK(total.sum_err2 == w.sum_err2);
            }
            // Without the tensor's amax, each strip's own would give other counts for NVFP4.
            if (numerics::rule_uses_global_amax(br.rule)) {
                QuantStats own;
                for (std::size_t r = 0; r < rows; r += strip)
                    own.merge(compute_block_stats(&x[r * cols], Wide::bf16, strip, cols, br).total);
                CHECK(own.exp_hist != w.exp_hist);
            }
        }
    }
}
