// torchao 0.18's own outputs (tests/golden/torchao_mx_modes.{json,bin}, written by
// scripts/fixtures/golden/torchao_mx_modes.py on CPU tensors) against lib's quantize_blocks under the
// presets that name torchao's modes: E8M0 scale bytes, element codes (FP4 unpacked from torchao's
// pack_uint4 bytes, element 2i in the low nibble) and, for MX, the float32 factor torchao
// dequantises with (get_fp_scale), all bit for bit.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/emu/pack.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/block_quantize.hpp"

namespace {

using fp8kit::Wide;

struct Golden {
    nlohmann::json man;
    std::vector<std::uint8_t> bin;
    std::vector<std::uint8_t> bytes(const nlohmann::json& ref) const {
        const auto off = ref.at(0).get<std::size_t>(), len = ref.at(1).get<std::size_t>();
        REQUIRE(off + len <= bin.size());
        return {bin.begin() + static_cast<std::ptrdiff_t>(off), bin.begin() + static_cast<std::ptrdiff_t>(off + len)};
    }
};

const Golden& golden() {
    static const Golden g = [] {
        Golden out;
        std::ifstream jf(std::string(FP8KIT_GOLDEN_DIR) + "/torchao_mx_modes.json");
        std::ifstream bf(std::string(FP8KIT_GOLDEN_DIR) + "/torchao_mx_modes.bin", std::ios::binary);
        out.man = nlohmann::json::parse(jf);
        out.bin.assign(std::istreambuf_iterator<char>(bf), std::istreambuf_iterator<char>());
        return out;
    }();
    return g;
}

std::vector<std::uint8_t> unpack(const std::vector<std::uint8_t>& packed) {
    std::vector<std::uint8_t> codes(packed.size() * 2);
    fp8kit::emu::unpack_fp4_array(packed.data(), codes.data(), codes.size(), fp8kit::emu::NibbleOrder::low_first);
    return codes;
}

// Differing entries; the first few are printed (index, fp8kit's byte, torchao's byte).
std::size_t count_diff(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    std::size_t n = a.size() == b.size() ? 0 : 1 + std::max(a.size(), b.size());
    for (std::size_t i = 0; i < std::min(a.size(), b.size()); ++i)
        if (a[i] != b[i] && ++n <= 4)
            UNSCOPED_INFO("  [" << i << "] fp8kit " << int(a[i]) << ", torchao " << int(b[i]));
    return n;
}

fp8kit::BlockQuantized run(const std::string& preset, const std::vector<std::uint8_t>& input, Wide w, std::size_t rows,
                           std::size_t cols) {
    const fp8kit::BlockRecipe br = fp8kit::block_recipe(fp8kit::parse_recipe(preset), fp8kit::Role::weight, cols);
    return fp8kit::quantize_blocks(input.data(), w, rows, cols, br);
}

}  // namespace

TEST_CASE("torchao 0.18 to_mx and nvfp4_quantize outputs equal the torchao presets bit for bit", "[torchao][golden]") {
    const Golden& g = golden();
    REQUIRE(g.man.at("torchao").get<std::string>().rfind("0.18", 0) == 0);
    int cases = 0;
    for (const auto& c : g.man.at("cases")) {
        const std::string preset = c.at("preset");
        const std::string dtype = c.at("dtype");
        INFO(preset << " " << dtype << " (input " << c.at("input").get<std::string>() << ")");
        const Wide w = dtype == "bf16" ? Wide::bf16 : Wide::f32;
        const std::size_t rows = c.at("rows"), cols = c.at("cols");
        const auto input = g.bytes(g.man.at("inputs").at(c.at("input").get<std::string>()));
        REQUIRE(input.size() == rows * cols * (w == Wide::bf16 ? 2 : 4));
        const fp8kit::BlockQuantized q = run(preset, input, w, rows, cols);
        const auto want_scales = g.bytes(c.at("scales"));
        const auto want_codes = c.at("packed").get<bool>() ? unpack(g.bytes(c.at("codes"))) : g.bytes(c.at("codes"));
        CHECK(count_diff(q.scale_codes, want_scales) == 0);
        CHECK(count_diff(q.codes, want_codes) == 0);
        if (c.contains("scale_inv")) {  // MX: the factor torchao dequantises with (get_fp_scale)
            const auto want = g.bytes(c.at("scale_inv"));
            REQUIRE(want.size() == q.scale_inv.size() * 4);
            std::size_t diff = 0;
            for (std::size_t b = 0; b < q.scale_inv.size(); ++b)
                diff += std::memcmp(&q.scale_inv[b], &want[4 * b], 4) != 0;
            CHECK(diff == 0);
        }
        ++cases;
    }
    // 4 element formats x 4 modes x {f32, bf16}, and NVFP4 with and without a per-tensor scale.
    CHECK(cases == 36);
}

TEST_CASE("torchao golden data exercises the cases the rules are about", "[torchao][golden]") {
    // The file must hold what the modes differ on, else the test above could pass vacuously.
    const Golden& g = golden();
    bool code0 = false, nan_scale = false, inf_block_floor = false, fe_rceil = false;
    for (const auto& c : g.man.at("cases")) {
        const std::string p = c.at("preset");
        for (const std::uint8_t s : g.bytes(c.at("scales"))) {
            if (p == "mxfp8-torchao-floor" && s == 0) code0 = true;
            if (p == "mxfp8-torchao-floor" && s == 0xFF) nan_scale = true;
            if (p == "mxfp8-torchao-floor" && s == 247) inf_block_floor = true;  // an Inf block: 255 - 8
            if (p == "mxfp8-torchao-rceil" && s == 0xFE) fe_rceil = true;
        }
    }
    CHECK(code0);
    CHECK(nan_scale);
    CHECK(inf_block_floor);
    CHECK(fe_rceil);
}

TEST_CASE("the modes differ from each other and from the OCP and TE presets on torchao's data", "[torchao][golden]") {
    // No existing preset is torchao's RCEIL exactly: mxfp8 (TE's float_to_e8m0: amax * fl32(1/448),
    // the exact ceiling from the bits, NaN ignored) equals mxfp8-torchao-rceil (amax / 448, the
    // ceiling of a float32 log2, NaN kept) except at NaN blocks and where amax / 448 lies a few
    // ulps above a power of two, where the two codes differ by one. -ocp differs from torchao's
    // FLOOR at code 0 and at Inf blocks.
    const Golden& g = golden();
    const auto input = g.bytes(g.man.at("inputs").at("nan/f32"));
    const std::size_t rows = 160, cols = 32;
    const auto te = run("mxfp8", input, Wide::f32, rows, cols);
    const auto rceil = run("mxfp8-torchao-rceil", input, Wide::f32, rows, cols);
    const auto ocp = run("mx-ocp", input, Wide::f32, rows, cols);
    const auto floor = run("mxfp8-torchao-floor", input, Wide::f32, rows, cols);
    const auto ceil = run("mxfp8-torchao-ceil", input, Wide::f32, rows, cols);
    const auto even = run("mxfp8-torchao-even", input, Wide::f32, rows, cols);
    CHECK(count_diff(floor.scale_codes, ceil.scale_codes) > 0);
    CHECK(count_diff(floor.scale_codes, even.scale_codes) > 0);
    std::size_t nan_blocks = 0, te_code_diff = 0, te_code_diff_not_one = 0, ocp_code_diff = 0, ocp_code0_elem_diff = 0;
    std::size_t te_elem_diff_same_code = 0;
    for (std::size_t r = 0; r < rows; ++r) {
        const bool has_nan = fp8kit::any_nan(input.data(), Wide::f32, r * cols, cols);
        nan_blocks += has_nan;
        if (!has_nan) {
            const int d = static_cast<int>(te.scale_codes[r]) - static_cast<int>(rceil.scale_codes[r]);
            te_code_diff += d != 0;
            te_code_diff_not_one += d != 0 && d != 1 && d != -1;
            if (d == 0)
                for (std::size_t c = 0; c < cols; ++c)
                    te_elem_diff_same_code += te.codes[r * cols + c] != rceil.codes[r * cols + c];
        }
        ocp_code_diff += ocp.scale_codes[r] != floor.scale_codes[r];
        if (floor.scale_codes[r] == 0)
            for (std::size_t c = 0; c < cols; ++c)
                ocp_code0_elem_diff += ocp.codes[r * cols + c] != floor.codes[r * cols + c];
    }
    CHECK(nan_blocks == 3);
    CHECK(te_code_diff > 0);
    CHECK(te_code_diff_not_one == 0);
    CHECK(te_elem_diff_same_code == 0);  // with the same code both cast alike (code 0 with 1)
    CHECK(ocp_code_diff > 0);            // Inf and NaN blocks: OCP 0xFF, torchao 0xFF only for NaN
    CHECK(ocp_code0_elem_diff > 0);      // code 0: OCP casts with 2^127, torchao divides by 2^-126
}
