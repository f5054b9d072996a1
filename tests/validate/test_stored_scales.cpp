// validate() on NVFP4 and MX kernel output as stored: packed E2M1 codes, E4M3 block scales with a
// global scale, E8M0 scales, row-major, padded and in cuBLAS's swizzled 128x4 layout. The
// producer is torchao 0.18 itself (tests/golden/torchao_mx_modes.{json,bin}: to_mx RCEIL E4M3
// codes and E8M0 scales, nvfp4_quantize packed codes and E4M3 scales, both also through
// torchao's to_blocked, scripts/fixtures/golden/torchao_mx_modes.py).
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/numerics/validate_rules.hpp"
#include "fp8kit/validate.hpp"

namespace {

using namespace fp8kit;

struct Swizzle {
    nlohmann::json s;
    std::vector<std::uint8_t> bin;
    std::vector<std::uint8_t> bytes(const nlohmann::json& ref) const {
        const auto off = ref.at(0).get<std::size_t>(), len = ref.at(1).get<std::size_t>();
        REQUIRE(off + len <= bin.size());
        return {bin.begin() + static_cast<std::ptrdiff_t>(off), bin.begin() + static_cast<std::ptrdiff_t>(off + len)};
    }
};

const Swizzle& golden() {
    static const Swizzle g = [] {
        Swizzle out;
        std::ifstream jf(std::string(FP8KIT_GOLDEN_DIR) + "/torchao_mx_modes.json");
        std::ifstream bf(std::string(FP8KIT_GOLDEN_DIR) + "/torchao_mx_modes.bin", std::ios::binary);
        out.s = nlohmann::json::parse(jf).at("swizzle");
        out.bin.assign(std::istreambuf_iterator<char>(bf), std::istreambuf_iterator<char>());
        return out;
    }();
    return g;
}

ValidateReport check(const std::vector<std::uint8_t>& input, const std::vector<std::uint8_t>& codes, Format to,
                     Policy pol, BlockLayout layout, const std::vector<float>& scales, std::size_t rows,
                     std::size_t cols, ScaleMode mode = ScaleMode::scale_inv) {
    ValidateRequest rq{Wide::bf16, input.data(), codes.data(), rows * cols, to, pol, {}};
    rq.scaling.mode = mode;
    rq.scaling.layout = layout;
    rq.scaling.blocks = scales.data();
    rq.scaling.block_count = scales.size();
    rq.scaling.rows = rows;
    rq.scaling.cols = cols;
    return validate(rq);
}

}  // namespace

TEST_CASE("swizzled scale offsets: cuBLAS's 128x4 tiles", "[validate]") {
    using numerics::swizzled_scale_count;
    using numerics::swizzled_scale_offset;
    CHECK(swizzled_scale_count(130, 5) == 256 * 8);
    CHECK(swizzled_scale_offset(0, 0, 5) == 0);
    CHECK(swizzled_scale_offset(0, 3, 5) == 3);
    CHECK(swizzled_scale_offset(1, 0, 5) == 16);
    CHECK(swizzled_scale_offset(32, 0, 5) == 4);
    CHECK(swizzled_scale_offset(127, 3, 5) == 31 * 16 + 3 * 4 + 3);
    CHECK(swizzled_scale_offset(0, 4, 5) == 512);     // the next tile across
    CHECK(swizzled_scale_offset(128, 0, 5) == 1024);  // the first tile of the next 128 rows
    // Every scale of a 300 x 9 grid lands on its own byte.
    std::vector<int> seen(swizzled_scale_count(300, 9), 0);
    for (std::size_t r = 0; r < 300; ++r)
        for (std::size_t c = 0; c < 9; ++c) ++seen.at(swizzled_scale_offset(r, c, 9));
    std::size_t used = 0;
    for (int v : seen) {
        CHECK(v <= 1);
        used += v;
    }
    CHECK(used == 300 * 9);
}

TEST_CASE("torchao's to_blocked output reads back as its row-major scales", "[validate]") {
    const Swizzle& g = golden();
    const std::size_t rows = g.s.at("rows"), cols = g.s.at("cols");
    for (const char* which : {"mx", "nvfp4"}) {
        INFO(which);
        const auto& w = g.s.at(which);
        const bool mx = std::string(which) == "mx";
        const BlockLayout layout = mx ? BlockLayout::mx32 : BlockLayout::nv16;
        const ScaleType type = mx ? ScaleType::e8m0 : ScaleType::e4m3;
        const auto rm = g.bytes(w.at("scales")), sw = g.bytes(w.at("swizzled"));
        REQUIRE(rm.size() == stored_scale_count(layout, rows, cols, ScaleOrder::row_major));
        REQUIRE(sw.size() == stored_scale_count(layout, rows, cols, ScaleOrder::swizzled));
        const auto a = block_scale_values({rm.data(), rm.size(), type, ScaleOrder::row_major, 1.0f}, layout, rows, cols,
                                          ScaleMode::scale_inv);
        const auto b = block_scale_values({sw.data(), sw.size(), type, ScaleOrder::swizzled, 1.0f}, layout, rows, cols,
                                          ScaleMode::scale_inv);
        REQUIRE(a.size() == b.size());
        CHECK(std::memcmp(a.data(), b.data(), a.size() * 4) == 0);
        // The swizzled bytes read as row-major are refused (their count is the padded grid's).
        CHECK_THROWS_AS(block_scale_values({sw.data(), sw.size(), type, ScaleOrder::row_major, 1.0f}, layout, rows,
                                           cols, ScaleMode::scale_inv),
                        std::invalid_argument);
    }
}

TEST_CASE("validate is bit-exact on torchao's MXFP8 and packed NVFP4 output, and sees a wrong scale", "[validate]") {
    const Swizzle& g = golden();
    const std::size_t rows = g.s.at("rows"), cols = g.s.at("cols");
    const auto input = g.bytes(g.s.at("input"));
    REQUIRE(input.size() == rows * cols * 2);
    {  // to_mx RCEIL E4M3: x * 2^(127 - code), clamp to +-448, torch's cast
        const auto& w = g.s.at("mx");
        const auto codes = g.bytes(w.at("codes"));
        const auto sw = g.bytes(w.at("swizzled"));
        const auto s = block_scale_values({sw.data(), sw.size(), ScaleType::e8m0, ScaleOrder::swizzled, 1.0f},
                                          BlockLayout::mx32, rows, cols, ScaleMode::scale_inv);
        const Policy pol{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::signed_all_ones};
        const ValidateReport r = check(input, codes, Format::e4m3, pol, BlockLayout::mx32, s, rows, cols);
        INFO(r.summary());
        CHECK(r.exact());
    }
    {  // nvfp4_quantize without a per-tensor scale: x * fl32(1 / e4m3(b)), clamp to +-6, RNE
        const auto& w = g.s.at("nvfp4");
        const auto packed = g.bytes(w.at("codes"));
        const auto codes = unpack_fp4_codes(packed.data(), packed.size(), rows, cols);
        const auto sw = g.bytes(w.at("swizzled"));
        const Policy pol{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::positive_max};
        for (ScaleMode mode : {ScaleMode::scale_inv, ScaleMode::scale}) {
            const auto s = block_scale_values({sw.data(), sw.size(), ScaleType::e4m3, ScaleOrder::swizzled, 1.0f},
                                              BlockLayout::nv16, rows, cols, mode);
            const ValidateReport r = check(input, codes, Format::e2m1, pol, BlockLayout::nv16, s, rows, cols, mode);
            INFO(r.summary());
            CHECK(r.exact());
        }
        // A global scale of 2 halves every block's factor: mismatches.
        const auto s2 = block_scale_values({sw.data(), sw.size(), ScaleType::e4m3, ScaleOrder::swizzled, 2.0f},
                                           BlockLayout::nv16, rows, cols, ScaleMode::scale_inv);
        CHECK(check(input, codes, Format::e2m1, pol, BlockLayout::nv16, s2, rows, cols).mismatches > 0);
        // Unpacking: element 2i is the low nibble.
        CHECK(codes[0] == (packed[0] & 0xF));
        CHECK(codes[1] == (packed[0] >> 4));
        CHECK_THROWS_AS(unpack_fp4_codes(packed.data(), packed.size() - 1, rows, cols), std::invalid_argument);
        CHECK_THROWS_AS(unpack_fp4_codes(packed.data(), packed.size(), rows, cols + 1), std::invalid_argument);
    }
}

TEST_CASE("E4M3 scales with a global scale in TE's and torchao's orders; the padded order", "[validate]") {
    const std::uint8_t b[2] = {0x38, 0x3D};  // e4m3 1.0 and 1.625
    const float g = 0.1f;
    const auto te = block_scale_values({b, 2, ScaleType::e4m3, ScaleOrder::row_major, g}, BlockLayout::nv16, 1, 32,
                                       ScaleMode::scale_inv);
    const auto ao = block_scale_values({b, 2, ScaleType::e4m3, ScaleOrder::row_major, g}, BlockLayout::nv16, 1, 32,
                                       ScaleMode::scale);
    CHECK(te[0] == 1.0f * g);
    CHECK(te[1] == 1.625f * g);
    const volatile float inv_g = 1.0f / g;
    CHECK(ao[0] == inv_g / 1.0f);
    CHECK(ao[1] == inv_g / 1.625f);
    // Padded (TE's scale_inv tensors): 2 rows x 3 scales stored in a 128 x 4 grid.
    std::vector<std::uint8_t> padded(128 * 4, 0);
    for (std::size_t r = 0; r < 2; ++r)
        for (std::size_t c = 0; c < 3; ++c) padded[r * 4 + c] = static_cast<std::uint8_t>(120 + r * 3 + c);
    const auto v = block_scale_values({padded.data(), padded.size(), ScaleType::e8m0, ScaleOrder::padded, 1.0f},
                                      BlockLayout::mx32, 2, 96, ScaleMode::scale_inv);
    REQUIRE(v.size() == 6);
    for (std::size_t i = 0; i < 6; ++i) CHECK(v[i] == std::ldexp(1.0f, static_cast<int>(120 + i) - 127));
    CHECK_THROWS_AS(block_scale_values({padded.data(), padded.size(), ScaleType::e8m0, ScaleOrder::padded, 1.0f},
                                       BlockLayout::b1x128, 2, 96, ScaleMode::scale_inv),
                    std::invalid_argument);
    CHECK_THROWS_AS(block_scale_values({b, 2, ScaleType::e4m3, ScaleOrder::row_major, 0.0f}, BlockLayout::nv16, 1, 32,
                                       ScaleMode::scale_inv),
                    std::invalid_argument);
}
