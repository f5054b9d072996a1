// torchao 0.18's own outputs (tests/golden/torchao_mx_modes.{json,bin}, written by
// scripts/fixtures/golden/torchao_mx_modes.py) against the GPU block quantiser under the presets that
// name torchao's modes (FLOOR, CEIL, EVEN, RCEIL for MXFP4 / MXFP6 / MXFP8; NVFP4 with and without a
// per-tensor scale): E8M0 / E4M3 scale bytes and element codes, bit for bit, as
// tests/torchao/test_torchao_golden.cpp checks lib on the host.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/cuda/blocks.hpp"
#include "fp8kit/emu/pack.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace {

namespace cu = fp8kit::cuda;
using fp8kit::Wide;

std::string golden_dir() {
    const char* env = std::getenv("FP8KIT_GOLDEN_DIR");
    return env && *env ? env : FP8KIT_GOLDEN_DIR;
}

struct DeviceBytes {
    void* p;
    explicit DeviceBytes(std::size_t n) : p(cu::device_alloc(n)) {}
    ~DeviceBytes() { cu::device_free(p); }
    DeviceBytes(const DeviceBytes&) = delete;
    DeviceBytes& operator=(const DeviceBytes&) = delete;
};

std::vector<std::uint8_t> to_host(const void* d, std::size_t n) {
    std::vector<std::uint8_t> h(n);
    if (n) cu::copy_to_host(h.data(), d, n);
    return h;
}

}  // namespace

TEST_CASE("torchao 0.18 golden outputs equal the GPU block quantiser under every torchao mode", "[gpu][torchao]") {
    std::ifstream jf(golden_dir() + "/torchao_mx_modes.json");
    std::ifstream bf(golden_dir() + "/torchao_mx_modes.bin", std::ios::binary);
    REQUIRE(jf.good());
    const nlohmann::json man = nlohmann::json::parse(jf);
    const std::vector<std::uint8_t> bin((std::istreambuf_iterator<char>(bf)), std::istreambuf_iterator<char>());
    auto bytes = [&](const nlohmann::json& ref) {
        const auto off = ref.at(0).get<std::size_t>(), len = ref.at(1).get<std::size_t>();
        REQUIRE(off + len <= bin.size());
        return std::vector<std::uint8_t>(bin.begin() + static_cast<std::ptrdiff_t>(off),
                                         bin.begin() + static_cast<std::ptrdiff_t>(off + len));
    };
    int cases = 0;
    for (const auto& c : man.at("cases")) {
        const std::string preset = c.at("preset"), dtype = c.at("dtype");
        INFO(preset << " " << dtype << " (input " << c.at("input").get<std::string>() << ")");
        const Wide w = dtype == "bf16" ? Wide::bf16 : Wide::f32;
        const std::size_t rows = c.at("rows"), cols = c.at("cols");
        const auto input = bytes(man.at("inputs").at(c.at("input").get<std::string>()));
        const fp8kit::BlockRecipe br = fp8kit::block_recipe(fp8kit::parse_recipe(preset), fp8kit::Role::weight, cols);
        const cu::BlockSpec spec{br.format,  br.rule, br.block_rows,    br.block_cols,    br.policy,
                                 br.epsilon, br.pow2, br.value_for_inf, br.columnwise_rht};
        const bool packed = c.at("packed").get<bool>();
        const auto want_codes = bytes(c.at("codes"));
        const auto want_scales = bytes(c.at("scales"));
        DeviceBytes din(input.size()), dcodes(rows * cols), dsc(want_scales.size() + 1), damax(4);
        cu::copy_to_device(din.p, input.data(), input.size());
        cu::quantize_blocks(spec, w, din.p, rows, cols, static_cast<std::uint8_t*>(dcodes.p), packed,
                            static_cast<std::uint8_t*>(dsc.p), nullptr, nullptr, static_cast<float*>(damax.p));
        CHECK(to_host(dsc.p, want_scales.size()) == want_scales);
        CHECK(to_host(dcodes.p, want_codes.size()) == want_codes);  // packed: torchao's pack_uint4 bytes
        ++cases;
    }
    CHECK(cases == 36);  // 4 element formats x 4 modes x {f32, bf16}, NVFP4 with and without a tensor scale
}
