// TransformerEngine's MXFP8Tensor, NVFP4Tensor and Float8BlockwiseQTensor entries (data/te/quantized/,
// written by real torch.save through scripts/fixtures/make_te_quantized_fixtures.py with TE 2.16-2.18's
// exact argument tuples and quantizer objects): the quantizer is read as data (NEWOBJ + BUILD,
// nothing constructed), the row-wise codes are listed, MXFP8 (swizzled and plain E8M0 scales),
// blockwise (1x128, 128x128) and NVFP4 (packed codes, E4M3 block scales, amax) are compared with
// the reference under TE's own scales. TE 2.15's pickles (the same tuples through the bound
// classmethod, getattr(Cls, "_make_in_reduce_ex")) of all four types are read and compared too.
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "dump_test_util.hpp"
#include "fp8kit/validate.hpp"
#include "fp8kit/io/te_debug.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;

namespace {
const std::string kQuantizedDir = std::string(FP8KIT_DATA_DIR) + "/te/quantized/";
const std::string kQuantizedRank0 = kQuantizedDir + "tensor_dumps/rank_0/";

nlohmann::json expected() {
    nlohmann::json j;
    std::ifstream(kQuantizedDir + "EXPECTED.json") >> j;
    return j["files"];
}
}  // namespace

TEST_CASE("te quantized: MXFP8, blockwise and Float8Tensor codes against the reference", "[dump]") {
    int compared = 0;
    const nlohmann::json ex = expected();  // kept alive for items()
    for (const auto& [file, e] : ex.items()) {
        if (e["kind"] != "MXFP8Tensor" && e["kind"] != "Float8BlockwiseQTensor" && e["kind"] != "Float8Tensor")
            continue;
        INFO(file);
        const auto c = check_te_quantized(kQuantizedRank0 + file);
        REQUIRE(c);
        CHECK(c->kind == e["kind"].get<std::string>());
        CHECK(std::string(name(c->layout)) == e["layout"].get<std::string>());
        if (e.contains("swizzled")) CHECK(c->swizzled == e["swizzled"].get<bool>());
        INFO(c->report.summary());
        CHECK(c->report.mismatches == e["mismatches"].get<std::uint64_t>());
        if (e.contains("first")) {
            std::uint64_t first = ~0ull;
            for (const auto& cl : c->report.classes)
                for (const auto& x : cl.examples) first = std::min(first, x.index);
            CHECK(first == e["first"].get<std::uint64_t>());
        }
        // The block scales TE stored equal the reference's for the same input, block for block.
        if (e["kind"] != "Float8Tensor") {
            CHECK(c->scale_blocks == e["scale_blocks"].get<std::uint64_t>());
            CHECK(c->scale_mismatches == e.value("scale_mismatches", 0u));
        }
        auto src = open_source(kQuantizedRank0 + file);
        REQUIRE(src->tensors().size() == 2);
        CHECK((src->tensors()[1].storage.rfind("TE 2.15 ", 0) == 0) == (e.value("te", "") == "2.15"));
        ++compared;
    }
    // TE 2.16+: 2 MXFP8, 2 blockwise, and one of each with a scale off TE's rule; TE 2.15: MXFP8,
    // blockwise, Float8Tensor.
    CHECK(compared == 9);
}

TEST_CASE("te quantized: GEMM-swizzled scales unswizzled as cuBLAS lays them out", "[dump]") {
    // cuBLAS's layout on a 256 x 4 padded scale array whose byte k holds k % 251: element (r, c)
    // at ((r / 128) * 1 + c / 4) * 512 + (r % 32) * 16 + ((r % 128) / 32) * 4 + c % 4.
    std::vector<std::uint8_t> stored(256 * 4);
    for (std::size_t k = 0; k < stored.size(); ++k) stored[k] = static_cast<std::uint8_t>(k % 251);
    const auto plain = te::te_rowwise_scales(stored, {256, 4}, 136, 3, false);
    const auto unswizzled = te::te_rowwise_scales(stored, {256, 4}, 136, 3, true);
    REQUIRE(plain.size() == 136 * 3);
    CHECK(plain[33 * 3 + 2] == stored[33 * 4 + 2]);
    CHECK(unswizzled[33 * 3 + 2] == stored[22]);    // tile 0: 1 * 16 + 1 * 4 + 2
    CHECK(unswizzled[130 * 3 + 1] == stored[545]);  // tile 1: 512 + 2 * 16 + 0 * 4 + 1
    CHECK_THROWS_WITH(te::te_rowwise_scales(stored, {128, 4}, 136, 3, true), Catch::Contains("expected 256x4"));
    // The swizzled fixture (scales swizzled by TE's own test code) compares exactly: see above.
    auto src = open_source(kQuantizedRank0 + "layers_0_fc1_activation_iter_000001.pt");
    CHECK_THAT(src->tensors().at(1).storage, Catch::Contains("MXFP8Quantizer"));
}

TEST_CASE("te quantized: NVFP4 of TE 2.16 and 2.17 (swizzled): codes, E4M3 scales and amax against the reference",
          "[dump]") {
    int listed = 0;
    const nlohmann::json ex = expected();  // kept alive for items()
    for (const auto& [file, e] : ex.items()) {
        if (e["kind"] != "NVFP4Tensor") continue;
        INFO(file);
        auto src = open_source(kQuantizedRank0 + file);
        REQUIRE(src->errors().empty());
        REQUIRE(src->tensors().size() == 2);
        const TensorInfo& t = src->tensors()[1];
        CHECK(t.dtype == DType::e2m1);
        CHECK(t.shape == e["shape"].get<std::vector<std::uint64_t>>());
        // The codes, as the fixture packed them (low nibble first), decoded.
        const std::string codes = e["codes"];
        std::vector<float> got(t.numel);
        src->read(t, [&](const Chunk& c) {
            REQUIRE(c.wide == Wide::f32);
            std::memcpy(got.data() + c.first, c.bits, 4 * c.count);
        });
        static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
        for (std::size_t k = 0; k < codes.size(); ++k) {
            const int code = std::stoi(codes.substr(k, 1), nullptr, 16);
            const float want = (code & 8) ? -mag[code & 7] : mag[code & 7];
            if (std::memcmp(&got[k], &want, 4) != 0) FAIL("code " << k);
        }
        CHECK_THAT(t.storage, Catch::Contains("NVFP4Tensor") && Catch::Contains("NVFP4Quantizer"));
        // Compared: TE's codes under its own E4M3 block scales and amax; its scale bytes against
        // the reference's (TE's rule, numerics::nvfp4_te_block) for the same amax.
        const auto c = check_te_quantized(kQuantizedRank0 + file);
        REQUIRE(c);
        INFO(c->report.summary());
        CHECK(c->kind == "NVFP4Tensor");
        CHECK(c->format == Format::e2m1);
        CHECK(c->swizzled == e["swizzled"].get<bool>());
        CHECK(c->amax_matches);
        CHECK(c->scale_blocks == t.numel / 16);
        CHECK(c->scale_mismatches == 0);
        CHECK(c->report.total == t.numel);
        CHECK(c->report.mismatches == e["mismatches"].get<std::uint64_t>());
        if (e.contains("first")) {
            std::uint64_t first = ~0ull;
            for (const auto& cl : c->report.classes)
                for (const auto& x : cl.examples) first = std::min(first, x.index);
            CHECK(first == e["first"].get<std::uint64_t>());
        }
        ++listed;
    }
    CHECK(listed == 3);  // TE 2.15, 2.16, 2.17
}

TEST_CASE("te quantized: TE 2.15's bound classmethod is read as a name, nothing executed", "[dump]") {
    // getattr(MXFP8Tensor, "_make_in_reduce_ex") with the 9-argument tuple: the quantizer read as
    // data, the codes listed and compared (above).
    auto src = open_source(kQuantizedRank0 + "layers_9_fc1_activation_iter_000001.pt");
    REQUIRE(src->errors().empty());
    REQUIRE(src->tensors().size() == 2);
    CHECK(src->tensors()[1].name == "layers_9_fc1_activation/quantized");
    CHECK_THAT(src->tensors()[1].storage,
               Catch::StartsWith("TE 2.15 MXFP8Tensor e4m3 codes") && Catch::Contains("MXFP8Quantizer"));
}

TEST_CASE("te quantized: column-wise copies listed and compared as the transposed matrix", "[dump]") {
    // data/te/columnwise/ (scripts/fixtures/make_te_columnwise_fixtures.py, numpy and ml_dtypes):
    // Float8Tensor's data_transpose, MXFP8's 32 x 1 blocks (one file column-wise only, one with
    // GEMM-swizzled scales), blockwise 1x128 / 128x128 and NVFP4 column-wise data (one 3-D without
    // RHT, one column-only with TE's RHT, from tests/python/nvfp4_reference.py); one code planted
    // in the Float8Tensor's transpose, the column-only MXFP8 and the RHT NVFP4 tensor, at indices
    // of the K x M matrix.
    const std::string dir = std::string(FP8KIT_DATA_DIR) + "/te/columnwise/";
    nlohmann::json ex;
    std::ifstream(dir + "EXPECTED.json") >> ex;
    int compared = 0;
    for (const auto& [file, e] : ex["files"].items()) {
        INFO(file);
        const std::string path = dir + "tensor_dumps/rank_0/" + file;
        auto src = open_source(path);
        REQUIRE(src->errors().empty());
        const bool rowwise = e.contains("rowwise");
        REQUIRE(src->tensors().size() == (rowwise ? 3u : 2u));
        const TensorInfo& t = src->tensors().back();
        CHECK_THAT(t.name, Catch::EndsWith("/quantized/columnwise"));
        CHECK_THAT(t.storage, Catch::Contains(e["kind"].get<std::string>()) && Catch::Contains("column-wise"));
        const auto row = check_te_quantized(path);
        CHECK(row.has_value() == rowwise);
        if (row) CHECK(row->report.mismatches == e["rowwise"].get<std::uint64_t>());
        const auto c = check_te_quantized_columnwise(path);
        REQUIRE(c);
        INFO(c->report.summary());
        CHECK_THAT(c->name, Catch::EndsWith("/columnwise"));
        CHECK(c->kind == e["kind"].get<std::string>());
        CHECK(std::string(name(c->layout)) == e["layout"].get<std::string>());
        CHECK(c->report.shape == e["shape"].get<std::vector<std::uint64_t>>());
        CHECK(c->report.total == t.numel);
        CHECK(c->report.mismatches == e["mismatches"].get<std::uint64_t>());
        if (e.contains("first")) {
            std::uint64_t first = ~0ull;
            for (const auto& cl : c->report.classes)
                for (const auto& x : cl.examples) first = std::min(first, x.index);
            CHECK(first == e["first"].get<std::uint64_t>());
        }
        if (e.contains("scale_blocks")) {
            CHECK(c->scale_blocks == e["scale_blocks"].get<std::uint64_t>());
            CHECK(c->scale_mismatches == 0);
        }
        CHECK(c->amax_matches);  // NVFP4: amax_columnwise is max |x^T| (after the RHT)
        ++compared;
    }
    CHECK(compared == 8);
    // The row-wise fixtures hold no column-wise copy: nothing to compare there.
    CHECK_FALSE(check_te_quantized_columnwise(kQuantizedRank0 + "layers_0_fc1_gradient_iter_000001.pt"));
}
