// The aligned step of numerics/gemm_model.hpp in the two forms the CUDA model uses beside lib's:
// 32-bit sums (the kernel's fast path, where bits + log2(group + 1) + 4 <= 31) equal the 64-bit
// sums lib runs, and a TM x TN tile equals each of its elements stepped alone (lib's 1 x 1 tile).
// The model itself is checked against independent transcriptions in tests/gemm and against the
// hardware in docs/gemm.md; here only the two forms against each other, on random, wide and
// cancelling terms.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/numerics/gemm_model.hpp"
#include "float_bits.hpp"

namespace ng = fp8kit::numerics::gemm;

namespace {

using fp8kit_test::bits;

// k x rows codes of E4M3 or E5M2 as terms: uniform over all codes but NaN/Inf (wide exponents,
// subnormals, zeros), every fourth row with large products cancelling.
std::vector<ng::CodeTerm> terms(bool e5m2, int k, int rows, std::mt19937& g) {
    std::vector<ng::CodeTerm> t;
    for (int i = 0; i < k * rows; ++i) {
        ng::CodeTerm c;
        do {
            const std::uint32_t code =
                (i / k) % 4 == 3 && g() % 4 == 0 ? (0x70u + g() % 8) | (g() % 2 ? 0x80u : 0u) : g() % 256;
            c = e5m2 ? ng::code_term<fp8kit::emu::E5M2>(code) : ng::code_term<fp8kit::emu::E4M3>(code);
        } while (c.special);
        t.push_back(c);
    }
    return t;
}

}  // namespace

TEST_CASE("gemm aligned step: 32-bit sums equal 64-bit sums where the width allows", "[numerics][gemm]") {
    std::mt19937 g(26);
    std::size_t steps = 0;
    for (const char* params : {"trunc", "floor", "rne"})
        for (int bits_kept : {2, 8, 14, 21})
            for (int group : {1, 7, 16, 32})
                for (bool e5 : {false, true}) {
                    ng::ModelParams m;
                    m.align_bits = bits_kept;
                    m.group = group;
                    m.align = params[0] == 't'   ? ng::AlignRound::toward_zero
                              : params[0] == 'f' ? ng::AlignRound::floor
                                                 : ng::AlignRound::nearest_even;
                    m.sticky = bits_kept % 2 == 0 && group != 16;
                    m.sum_bits = group == 7 ? 0 : 14;
                    m.step_round = group == 32 ? ng::StepRound::nearest_even : ng::StepRound::toward_zero;
                    m.nominal_exponent = group != 1;
                    const auto a = terms(e5, 8 * group, 1, g), b = terms(!e5, 8 * group, 1, g);
                    float c32[1][1] = {{0}}, c64[1][1] = {{0}};
                    for (int s = 0; s < 8; ++s) {
                        const auto la = [&](int q, int) { return a[s * group + q]; };
                        const auto lb = [&](int q, int) { return b[s * group + q]; };
                        ng::aligned_step<std::int32_t, 1, 1>(c32, group, la, lb, m);
                        ng::aligned_step<std::int64_t, 1, 1>(c64, group, la, lb, m);
                        INFO(params << " bits " << bits_kept << " group " << group << " step " << s);
                        REQUIRE(bits(c32[0][0]) == bits(c64[0][0]));
                        ++steps;
                    }
                }
    CHECK(steps == 3 * 4 * 4 * 2 * 8);
}

TEST_CASE("gemm aligned step: a tile of outputs equals each output stepped alone", "[numerics][gemm]") {
    std::mt19937 g(27);
    constexpr int TM = 3, TN = 2, n = 32;
    for (bool nominal : {true, false})
        for (int rep = 0; rep < 50; ++rep) {
            ng::ModelParams m;
            m.nominal_exponent = nominal;
            m.sticky = rep % 3 == 0;
            const auto a = terms(rep % 2 == 0, n, TM, g), b = terms(rep % 4 < 2, n, TN, g);
            float tile[TM][TN];
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) tile[i][j] = static_cast<float>(g() % 1000) - 500.0f;
            float alone[TM][TN];
            std::memcpy(alone, tile, sizeof tile);
            ng::aligned_step<std::int64_t, TM, TN>(
                tile, n, [&](int q, int i) { return a[i * n + q]; }, [&](int q, int j) { return b[j * n + q]; }, m);
            for (int i = 0; i < TM; ++i)
                for (int j = 0; j < TN; ++j) {
                    float c[1][1] = {{alone[i][j]}};
                    ng::aligned_step<std::int64_t, 1, 1>(
                        c, n, [&](int q, int) { return a[i * n + q]; }, [&](int q, int) { return b[j * n + q]; }, m);
                    INFO("rep " << rep << " element " << i << "," << j);
                    REQUIRE(bits(c[0][0]) == bits(tile[i][j]));
                }
        }
}
