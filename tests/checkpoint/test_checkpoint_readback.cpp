// Checkpoints read back through the producers' own readers (issue 51), against fp8kit's
// dequantisation, bit for bit.
// Block FP8 through DeepSeek-V3's own weight_dequant: the check file
// data/checkpoints/deepseek_weight_dequant.json holds the hash of the float32 result of
// DeepSeek-V3 inference/kernel.py weight_dequant on every block-FP8 weight of four fixtures
// (scripts/fixtures/deepseek_weight_dequant_check.py, which imports the kernel from a DeepSeek-V3
// checkout); fp8kit's dequantisation of the same tensors must give the same bytes.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/fixture_edit.hpp"
#include "fp8kit/emu/formats.hpp"

using namespace fp8kit::test::ckpt;

namespace {

// 64-bit FNV-1a over the float32 values' little-endian bytes (the check file's hash).
std::string fnv1a64(const std::vector<float>& y) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (float v : y) {
        std::uint32_t b;
        std::memcpy(&b, &v, 4);
        for (int i = 0; i < 4; ++i) h = (h ^ ((b >> (8 * i)) & 0xFF)) * 0x100000001b3ull;
    }
    return fmt::format("{:016x}", h);
}

nlohmann::json readback() {
    std::ifstream in(kData + "deepseek_weight_dequant.json");
    REQUIRE(in.good());
    return nlohmann::json::parse(in);
}

}  // namespace

TEST_CASE("DeepSeek-V3 weight_dequant reads the block-FP8 fixtures as fp8kit does, bit for bit", "[checkpoint]") {
    const auto j = readback();
    REQUIRE(j["folders"].size() == 4);
    for (const auto& [name, f] : j["folders"].items()) {
        INFO(name);
        const Folder F(kData + name);
        std::map<std::string, const Layer*> by;
        for (const auto& L : F.layers())
            if (L.scheme == Scheme::fp8_block) by[L.module] = &L;
        // Every block-FP8 weight of the folder was read back, and nothing else.
        CHECK(by.size() == f["layers"].size());
        for (const auto& [m, rec] : f["layers"].items()) {
            INFO(m);
            REQUIRE(by.count(m) == 1);
            const Layer& L = *by.at(m);
            CHECK(L.block_rows == f["block"].get<std::uint64_t>());
            CHECK(rec["shape"][0].get<std::uint64_t>() == L.rows);
            CHECK(rec["shape"][1].get<std::uint64_t>() == L.cols);
            CHECK(fnv1a64(dequantize(F, L)) == rec["fnv1a64"].get<std::string>());
        }
    }
}

TEST_CASE("DeepSeek weight_dequant: the hashes tell a transposed block grid apart", "[checkpoint]") {
    // A 2 x 2 grid whose off-diagonal scales differ: reading it column-major (the layout
    // transposed) gives other bytes than DeepSeek's kernel, so the comparison above can fail.
    const auto j = readback();
    const Folder F(kData + "ds_fp8_block");
    std::size_t tried = 0;
    for (const auto& L : F.layers()) {
        if (L.scheme != Scheme::fp8_block) continue;
        const auto s = F.read(L.scale);
        if (s.numel() != 4 || L.rows != 256 || L.cols != 256 || s.at(1) == s.at(2)) continue;
        INFO(L.module);
        ++tried;
        const auto y = dequantize(F, L);
        const auto w = F.read(L.weight);
        std::vector<float> t(y.size());
        for (std::uint64_t r = 0; r < L.rows; ++r)
            for (std::uint64_t c = 0; c < L.cols; ++c) {
                const std::uint64_t i = r * L.cols + c;
                const auto b = static_cast<std::uint32_t>(
                    fp8kit::emu::decode(fp8kit::emu::Format::e4m3, fp8kit::emu::Wide::f32, w.bytes[i]));
                float code;
                std::memcpy(&code, &b, 4);
                t[i] = code * s.at((c / 128) * 2 + r / 128);
            }
        const std::string want = j["folders"]["ds_fp8_block"]["layers"][L.module]["fnv1a64"];
        CHECK(fnv1a64(y) == want);
        CHECK(fnv1a64(t) != want);
    }
    CHECK(tried > 0);
}

namespace {
std::uint16_t bf16_bits(float f) {  // round to nearest even (the values here are exact in bfloat16)
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return static_cast<std::uint16_t>((b + 0x7FFFu + ((b >> 16) & 1u)) >> 16);
}
// FNV-1a 64 over the values' bfloat16 bytes, little-endian, as the read-back scripts hash them.
std::string bf16_fnv1a64(const std::vector<float>& y) {
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (float v : y) {
        const std::uint16_t b = bf16_bits(v);
        h = (h ^ (b & 0xFF)) * 0x100000001b3ull;
        h = (h ^ (b >> 8)) * 0x100000001b3ull;
    }
    return fmt::format("{:016x}", h);
}
}  // namespace

TEST_CASE("gpt-oss original/: gpt_oss/torch/weights.py reads the MXFP4 experts as fp8kit does, bit for bit",
          "[checkpoint]") {
    // data/checkpoints/gpt_oss_weights_readback.json: hashes of gpt-oss's Checkpoint.get (bfloat16,
    // scripts/fixtures/gpt_oss_weights_readback.py) on gptoss_original_llmc's stacked experts.
    std::ifstream in(kData + "gpt_oss_weights_readback.json");
    REQUIRE(in.good());
    const auto j = nlohmann::json::parse(in);
    const Folder F(kData + j["folder"].get<std::string>());
    CHECK(F.producer() == Producer::gpt_oss);
    CHECK(F.layout_from_names);
    std::size_t n = 0;
    for (const auto& L : F.layers()) {
        if (L.scheme != Scheme::mxfp4) continue;
        INFO(L.module);
        REQUIRE(j["tensors"].contains(L.module));
        const auto& rec = j["tensors"][L.module];
        CHECK(L.experts == rec["shape"][0].get<std::uint64_t>());
        CHECK(L.rows == L.experts * rec["shape"][1].get<std::uint64_t>());
        CHECK(L.cols == rec["shape"][2].get<std::uint64_t>());
        CHECK(bf16_fnv1a64(dequantize(F, L)) == rec["fnv1a64"].get<std::string>());
        ++n;
    }
    CHECK(n == 2);
    CHECK_FALSE(check(F.dir()).failed());
}

TEST_CASE("gpt-oss written by triton_kernels' downcast_to_mxfp: gpt-oss's reader and fp8kit agree, both layouts",
          "[checkpoint]") {
    // data/checkpoints/gptoss_triton_readback.json (triton_kernels at d80d2866, ties to even) and
    // gptoss_triton_aug25_readback.json (at 9e1e203f, ties away): hashes of gpt-oss's
    // Checkpoint._get_mxfp4_tensor (bfloat16) on the experts of the original/ and the HF folders
    // (scripts/fixtures/make_gptoss_triton_checkpoints.py).
    for (const std::string json : {"gptoss_triton_readback.json", "gptoss_triton_aug25_readback.json"}) {
        INFO(json);
        std::ifstream in(kData + json);
        REQUIRE(in.good());
        const auto j = nlohmann::json::parse(in);
        REQUIRE(j["folders"].size() == 2);
        for (const auto& [folder, tensors] : j["folders"].items()) {
            INFO(folder);
            const Folder F(kData + folder);
            CHECK(F.producer() == Producer::gpt_oss);
            std::size_t n = 0;
            for (const auto& L : F.layers()) {
                if (L.scheme != Scheme::mxfp4) continue;
                INFO(L.module);
                REQUIRE(tensors.contains(L.module));
                const auto& rec = tensors[L.module];
                CHECK(L.experts == rec["shape"][0].get<std::uint64_t>());
                CHECK(L.rows == L.experts * rec["shape"][1].get<std::uint64_t>());
                CHECK(L.cols == rec["shape"][2].get<std::uint64_t>());
                CHECK(bf16_fnv1a64(dequantize(F, L)) == rec["fnv1a64"].get<std::string>());
                ++n;
            }
            CHECK(n == 2);
        }
    }
}
