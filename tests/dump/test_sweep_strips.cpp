// sweep's block presets on a dumped tensor larger than Inputs::block_memory_bytes (analysed in
// strips of whole tiles, lib/src/analysis/dumped_blocks.cpp) against one compute_block_stats call
// on the whole tensor. The budget is lowered so that a small tensor is cut into strips whose
// amaxes differ: presets with a tensor-wide second-level scale (NVFP4: TE's S_enc = 2688 /
// global_amax, torchao's per_tensor_scale) must still use the whole tensor's amax.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "dump/dump_test_util.hpp"
#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

using namespace fp8kit;
using namespace fp8kit::dump::test;

namespace {

// rows x cols float32, each 16-row band scaled differently (bands of amax 2^-6 .. 2^6), so that
// every strip's own amax differs from the tensor's.
std::vector<float> banded(std::size_t rows, std::size_t cols, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    std::vector<float> v(rows * cols);
    for (std::size_t r = 0; r < rows; ++r) {
        const double band = std::ldexp(1.0, static_cast<int>((r / 16) % 13) - 6);
        for (std::size_t c = 0; c < cols; ++c)
            v[r * cols + c] = static_cast<float>(band * n01(g) * std::exp(0.5 * n01(g)));
    }
    return v;
}

std::string write_dump(const std::string& name, const std::string& dataset, const std::vector<float>& v,
                       std::size_t rows, std::size_t cols) {
    const std::string path = scratch(name);
    const hid_t f = h5_create(path);
    const hid_t d = h5_write(f, dataset, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {rows, cols}, v.data());
    h5_attr_int(d, "step", 3);
    H5Dclose(d);
    H5Fclose(f);
    return path;
}

// As write_dump, chunked in 16-row chunks with only the first `written` rows written: the rest
// read as fill-value runs (dump::Chunk::repeat) that do not cover the tensor.
std::string write_partly(const std::string& name, const std::string& dataset, const std::vector<float>& v,
                         std::size_t rows, std::size_t cols, std::size_t written, float fill) {
    const std::string path = scratch(name);
    const hid_t f = h5_create(path);
    const hid_t dcpl = h5_chunked({16, cols}, false, -1);
    REQUIRE(H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill) >= 0);
    const hid_t d = h5_write(f, dataset, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {rows, cols}, nullptr, dcpl);
    const hid_t fs = H5Dget_space(d);
    const hsize_t start[2] = {0, 0}, count[2] = {written, cols};
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t ms = H5Screate_simple(2, count, nullptr);
    REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, v.data()) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    h5_attr_int(d, "step", 3);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Fclose(f);
    return path;
}

const sweep::Dumped& only_dumped(const sweep::Loaded& L) {
    REQUIRE(L.dumped.size() == 1);
    return L.dumped[0];
}

// Binary64 sums of n nonnegative terms added one by one in two groupings: each is within
// (n - 1) 2^-53 (relative) of the exact sum, so they differ by at most 2 n 2^-53 of the larger.
bool sums_close(double a, double b, std::size_t n) {
    return std::fabs(a - b) <= 2.0 * static_cast<double>(n) * std::ldexp(1.0, -53) * std::max(a, b);
}

// strips: what sweep keeps of a dumped tensor's block preset (the scalars; its exponent histogram is
// not kept, see sweep::Dumped).
void check_preset(const sweep::Candidate& cand, const numerics::StatsScalars& strips, const std::vector<float>& v,
                  std::size_t rows, std::size_t cols, Role role) {
    INFO(cand.label);
    const BlockRecipe br = block_recipe(cand.recipe, role, cols);
    const BlockStats whole = compute_block_stats(v.data(), Wide::f32, rows, cols, br);
    const QuantStats& w = whole.total;
    // Counts and extremes: bit for bit.
    CHECK(strips.numel == w.numel);
    CHECK(strips.zeros == w.zeros);
    CHECK(strips.nan == w.nan);
    CHECK(strips.inf == w.inf);
    CHECK(strips.underflow == w.underflow);
    CHECK(strips.subnormal == w.subnormal);
    CHECK(strips.overflow == w.overflow);
    CHECK(strips.te_underflow == w.te_underflow);
    CHECK(strips.te_overflow == w.te_overflow);
    CHECK(strips.amax == w.amax);
    CHECK(strips.min_nonzero == w.min_nonzero);
    // Sums: strips of whole tile rows continue the whole tensor's block order (bit for bit), except
    // TE's column-wise copy, whose blocks run down the columns (docs/statistics.md: the tolerance).
    if (br.columnwise_rht) {
        CHECK(sums_close(strips.sum_x2, w.sum_x2, whole.blocks));
        CHECK(sums_close(strips.sum_err2, w.sum_err2, whole.blocks));
    } else {
        CHECK(strips.sum_x2 == w.sum_x2);
        CHECK(strips.sum_err2 == w.sum_err2);
    }
}

}  // namespace

TEST_CASE("sweep: block presets in strips equal the whole-tensor statistics, NVFP4's global amax included",
          "[dump][sweep]") {
    const std::size_t rows = 208, cols = 96;  // 13 bands of 16 rows
    struct Case {
        const char* dataset;
        Role role;
        std::size_t strip_rows;  // rows the lowered budget holds
    };
    // weight: nvfp4's 16 x 16 tiles; input: nvfp4's column-wise RHT copy (its own global amax);
    // grad: 1 x 16 and 1 x 32 row tiles.
    // The strip height is a multiple of every preset's tile height (DeepSeek's 128 x 128 weight
    // tiles: 128 rows, 2 strips; otherwise 16: 48 rows, 5 strips).
    for (const Case& cs : {Case{"l0.fc1.weight", Role::weight, 128}, Case{"l0.fc1.input", Role::activation, 48},
                           Case{"l0.fc1.grad_output", Role::gradient, 48}}) {
        DYNAMIC_SECTION(cs.dataset) {
            const auto v = banded(rows, cols, 7 + static_cast<std::uint64_t>(cs.role));
            const std::string path = write_dump(std::string(cs.dataset) + ".h5", cs.dataset, v, rows, cols);
            sweep::Inputs in;
            in.files = {path};
            in.block_memory_bytes = cs.strip_rows * cols * sizeof(float);
            const sweep::Loaded L = sweep::load_inputs(in);
            const sweep::Dumped& d = only_dumped(L);
            const auto cands = sweep::block_candidates();
            REQUIRE(d.block.size() == cands.size());
            bool saw_global = false, saw_local = false;
            for (std::size_t k = 0; k < cands.size(); ++k) {
                INFO(cands[k].label);
                if (!d.block[k]) continue;  // a preset this tensor's shape is left out of
                const bool global = numerics::rule_uses_global_amax(cands[k].recipe.rule);
                saw_global |= global;
                saw_local |= !global;
                check_preset(cands[k], *d.block[k], v, rows, cols, cs.role);
            }
            CHECK(saw_global);
            CHECK(saw_local);
            // The budget really cut the tensor: with room for it whole, the same numbers.
            in.block_memory_bytes = rows * cols * sizeof(float);
            const sweep::Loaded W = sweep::load_inputs(in);
            const sweep::Dumped& dw = only_dumped(W);
            for (std::size_t k = 0; k < cands.size(); ++k)
                if (dw.block[k]) check_preset(cands[k], *dw.block[k], v, rows, cols, cs.role);
        }
    }
}

TEST_CASE("sweep: strips of a partly written dataset (fill-value runs) use the tensor's global amax", "[dump][sweep]") {
    // 208 x 96, rows 160.. never written: their fill value 40 is the tensor's amax, met only by the
    // last strips (and by the amax pass, which expands the runs for the column-wise RHT copy).
    const std::size_t rows = 208, cols = 96, written = 160;
    const float fill = 40.0f;
    auto v = banded(rows, cols, 11);
    for (std::size_t i = written * cols; i < v.size(); ++i) v[i] = fill;
    for (const auto& [dataset, role] :
         {std::pair{"l1.fc2.input", Role::activation}, std::pair{"l1.fc2.grad_output", Role::gradient}}) {
        DYNAMIC_SECTION(dataset) {
            const std::string path =
                write_partly(std::string(dataset) + "_partly.h5", dataset, v, rows, cols, written, fill);
            sweep::Inputs in;
            in.files = {path};
            in.block_memory_bytes = 48 * cols * sizeof(float);
            const sweep::Loaded L = sweep::load_inputs(in);
            const sweep::Dumped& d = only_dumped(L);
            const auto cands = sweep::block_candidates();
            REQUIRE(d.block.size() == cands.size());
            std::size_t checked = 0;
            for (std::size_t k = 0; k < cands.size(); ++k)
                if (d.block[k]) {
                    check_preset(cands[k], *d.block[k], v, rows, cols, role);
                    ++checked;
                }
            CHECK(checked == cands.size());
        }
    }
}
