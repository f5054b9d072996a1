// torch.save files whose tensors torch pickles through _rebuild_tensor_v3 (data/torch_v3/torch-X.Y/,
// written by real torch 2.2 and 2.15 through scripts/fixtures/make_torch_v3_fixtures.py): every dtype of torch.storage's
// _new_dtypes is accepted; the float8 types are read with their storage offset and strides in
// elements of the dtype and equal torch's own float32 values; float4_e2m1fn_x2 is listed
// unpacked (two E2M1 codes per byte, low nibble first); the integer, bits and complex types are
// noted and skipped, never a reason to refuse the file, whose high_precision entry is read.
#include <cstdint>
#include <cstring>
#include <fstream>

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

#include "dump_test_util.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;

namespace {

const std::string kTorchV3Dir = std::string(FP8KIT_DATA_DIR) + "/torch_v3/";

std::vector<std::uint32_t> f32_bits(Source& src, const TensorInfo& t) {
    std::vector<std::uint32_t> out(t.numel);
    src.read(t, [&](const Chunk& c) {
        REQUIRE(c.wide == Wide::f32);
        std::memcpy(out.data() + c.first, c.bits, 4 * c.count);
    });
    return out;
}

std::vector<std::uint32_t> hex_words(const nlohmann::json& a) {
    std::vector<std::uint32_t> v;
    for (const auto& s : a) v.push_back(static_cast<std::uint32_t>(std::stoul(s.get<std::string>(), nullptr, 16)));
    return v;
}

// E2M1 (OCP MX spec, table of FP4 values): sign, 2 exponent bits, 1 mantissa bit.
float e2m1(std::uint8_t c) {
    static const float mag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    return (c & 8) ? -mag[c & 7] : mag[c & 7];
}

}  // namespace

TEST_CASE("torch v3: every _rebuild_tensor_v3 dtype is read or noted, never refused", "[dump]") {
    // torch 2.2 (the first to write v3: float8_e4m3fn, float8_e5m2 and the five bits types; it
    // cannot save the others) and 2.15 (16 dtypes).
    const std::string version = GENERATE(as<std::string>{}, "torch-2.2", "torch-2.15");
    INFO(version);
    const std::string dir = kTorchV3Dir + version + "/";
    nlohmann::json ex;
    std::ifstream(dir + "EXPECTED.json") >> ex;
    REQUIRE(ex["v2"].empty());
    REQUIRE(ex["skipped"].size() == (version == "torch-2.2" ? 9u : 0u));
    REQUIRE(ex["files"].size() == (version == "torch-2.2" ? 7u : 16u));
    REQUIRE(ex["torch"].get<std::string>().rfind(version.substr(6) + ".", 0) == 0);
    for (const auto& [file, e] : ex["files"].items()) {
        INFO(file);
        auto src = open_source(dir + file);
        REQUIRE(src->errors().empty());
        const TensorInfo* hp = nullptr;
        const TensorInfo* t = nullptr;
        for (const auto& x : src->tensors()) (x.name == "high_precision" ? hp : t) = &x;
        REQUIRE(hp);
        CHECK(f32_bits(*src, *hp) == hex_words(e["hp"]));
        const std::string dtype = e["dtype"];
        const auto shape = e["shape"].get<std::vector<std::uint64_t>>();
        if (e.contains("f32")) {  // float8: torch's own values, through the strided view
            REQUIRE(t);
            CHECK(t->storage == "torch." + dtype);
            CHECK(t->shape == shape);
            CHECK(f32_bits(*src, *t) == hex_words(e["f32"]));
        } else if (dtype == "float4_e2m1fn_x2") {
            REQUIRE(t);
            CHECK(t->dtype == DType::e2m1);
            CHECK(t->shape == std::vector<std::uint64_t>{shape[0], shape[1] * 2});
            const std::string hex = e["bytes"];
            std::vector<std::uint32_t> want;
            for (std::size_t k = 0; k < hex.size(); k += 2) {
                const auto b = static_cast<std::uint8_t>(std::stoul(hex.substr(k, 2), nullptr, 16));
                for (const std::uint8_t code : {std::uint8_t(b & 15), std::uint8_t(b >> 4)}) {
                    const float f = e2m1(code);
                    std::uint32_t u;
                    std::memcpy(&u, &f, 4);
                    want.push_back(u);
                }
            }
            CHECK(f32_bits(*src, *t) == want);
        } else {  // integers, bits, complex: a note naming the type, the file still read
            CHECK_FALSE(t);
            bool noted = false;
            for (const auto& n : src->notes())
                noted = noted || n.describe().find("torch." + dtype) != std::string::npos;
            CHECK(noted);
        }
    }
}

TEST_CASE("torch v3: an untyped storage shorter than its tensor is refused", "[dump]") {
    // 1000 float8 elements claimed of a 4-byte storage: that tensor is refused, naming it; the
    // high_precision entry beside it is still read.
    auto src = open_source(kTorchV3Dir + "hostile/short_v3.pt");
    REQUIRE(src->errors().size() == 1);
    CHECK_THAT(src->errors()[0].describe(), Catch::Contains("short_v3.pt") && Catch::Contains("t") &&
                                                Catch::Contains("storage shorter than its tensor"));
    REQUIRE(src->tensors().size() == 1);
    CHECK(src->tensors()[0].name == "high_precision");
}

TEST_CASE("torch v3: a dtype fp8kit does not know (a newer torch's) is skipped with a note", "[dump]") {
    // torch.float6_e3m2fn_x4 as the v3 dtype: the tensor is named in a note, the file is read.
    auto src = open_source(kTorchV3Dir + "hostile/future_dtype_v3.pt");
    CHECK(src->errors().empty());
    REQUIRE(src->tensors().size() == 1);
    CHECK(src->tensors()[0].name == "high_precision");
    REQUIRE(src->notes().size() == 1);
    CHECK(src->notes()[0].name == "t");
    CHECK_THAT(src->notes()[0].message,
               Catch::Contains("torch.float6_e3m2fn_x4") && Catch::Contains("a dtype fp8kit does not know"));
}
