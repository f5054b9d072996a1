// `calibrate --save --scheme nvfp4` against the producers themselves:
// tests/golden/calibration_nvfp4_input_scales.json holds the NVFP4 activation scale that
// nvidia-modelopt 0.47.0 (mtq.quantize with NVFP4_DEFAULT_CFG, then the HF export's
// get_activation_scaling_factor: `input_scale`) and llm-compressor 0.14.0.1 with
// compressed-tensors 0.19.0 (the NVFP4 preset's static_minmax / memoryless_minmax observer, then
// generate_gparam: `input_global_scale`) computed on data/example/llama_tiny_dump.h5 (steps 0 and
// 100) and on hand-made batches (scripts/fixtures/make_calibration_nvfp4_golden.py). The file
// --save writes must hold those names, dtypes, shapes and bits, and nothing else.
#include <catch2/catch.hpp>

#include <cstring>
#include <fstream>
#include <iterator>

#include <nlohmann/json.hpp>

#include "float_bits.hpp"
#include "fp8kit/calibrate.hpp"
#include "scratch_dir.hpp"

using namespace fp8kit::calibrate;

namespace {

const std::string kNvfp4Dump = std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_dump.h5";

nlohmann::json nvfp4_golden() {
    std::ifstream f(std::string(FP8KIT_GOLDEN_DIR) + "/calibration_nvfp4_input_scales.json");
    REQUIRE(f);
    return nlohmann::json::parse(f);
}

std::uint32_t nvfp4_hex_bits(const std::string& s) { return static_cast<std::uint32_t>(std::stoul(s, nullptr, 16)); }

// A safetensors file: its header and, per tensor, its bytes.
struct Saved {
    nlohmann::json header;
    std::string data;
    std::string bytes(const std::string& name) const {
        const auto& o = header.at(name).at("data_offsets");
        return data.substr(o[0].get<std::size_t>(), o[1].get<std::size_t>() - o[0].get<std::size_t>());
    }
};
Saved read_saved(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f);
    std::uint64_t n = 0;
    f.read(reinterpret_cast<char*>(&n), 8);
    std::string h(n, '\0');
    f.read(h.data(), static_cast<std::streamsize>(n));
    Saved s{nlohmann::json::parse(h), std::string(std::istreambuf_iterator<char>(f), {})};
    return s;
}

// The dump tensor's module, as its checkpoint names it ("m/input" -> "m"; "m/weight" -> "m.weight").
std::string module_of(std::string key) {
    const std::string in = "/input";
    if (key.size() > in.size() && key.compare(key.size() - in.size(), in.size(), in) == 0)
        return key.substr(0, key.size() - in.size());
    for (auto& c : key)
        if (c == '/') c = '.';
    return key;
}

}  // namespace

TEST_CASE("calibrate --save --scheme nvfp4: each producer's names, dtype, shape and bits", "[calibrate]") {
    const auto g = nvfp4_golden();
    fp8kit::test::ScratchDir scratch("calibrate_nvfp4");
    Options o;
    o.files = {kNvfp4Dump};
    o.include = {"*/input", "*/lm_head/weight", "*/model.layers.0.self_attn.q_proj/weight",
                 "*/model.layers.1.mlp.down_proj/weight"};  // the golden's float32 tensors
    o.methods = {Method::modelopt_max, Method::llmc_static_minmax, Method::llmc_memoryless_minmax};
    const auto r = run(o);
    for (Method m : o.methods) {
        INFO(name(m));
        const std::string path = scratch.file(std::string(name(m)) + ".safetensors");
        write_safetensors(r, m, path, Scheme::nvfp4);
        const auto s = read_saved(path);
        const bool mo = m == Method::modelopt_max;
        REQUIRE(g["tensors"].size() == 18);
        CHECK(s.header.size() == g["tensors"].size() + 1);  // + __metadata__: no other tensor
        CHECK(s.header["__metadata__"]["scheme"] == "nvfp4");
        for (const auto& [key, e] : g["tensors"].items()) {
            INFO(key);
            const auto& want = e.at(name(m));
            const std::string n = module_of(key) + (mo ? ".input_scale" : ".input_global_scale");
            REQUIRE(s.header.contains(n));
            if (!mo) CHECK_FALSE(s.header.contains(module_of(key) + ".input_scale"));  // dynamic "local": none
            CHECK(s.header[n]["dtype"] == "F32");
            CHECK(want["dtype"] == "float32");
            CHECK(s.header[n]["shape"] == want["shape"]);
            const std::string b = s.bytes(n);
            REQUIRE(b.size() == 4);
            std::uint32_t got = 0;
            std::memcpy(&got, b.data(), 4);
            CHECK(got == nvfp4_hex_bits(want["bits_f32"]));
        }
    }
}

TEST_CASE("calibrate nvfp4 input scales: the producers' zero, tiny and huge amax cases", "[calibrate]") {
    const auto g = nvfp4_golden();
    REQUIRE(g["edge"].size() == 6);
    for (const auto& [label, e] : g["edge"].items()) {
        INFO(label);
        const DType d = e["dtype"] == "bfloat16" ? DType::bf16 : DType::f32;
        std::vector<Batch> batches;
        for (const auto& b : e["batches_f32"]) {
            Batch x;
            for (const auto& v : b) x.push_back(fp8kit_test::from_bits(nvfp4_hex_bits(v)));
            batches.push_back(x);
        }
        const auto& mo = e["modelopt_max"];
        const auto s = modelopt_nvfp4_input_scale(calibrate(Method::modelopt_max, batches, d).amax);
        if (mo.contains("error")) {
            CHECK_FALSE(s.has_value());  // ModelOpt's export asserts: the scale underflows to zero
        } else {
            REQUIRE(s.has_value());
            CHECK(fp8kit_test::bits(*s) == nvfp4_hex_bits(mo["bits_f32"]));
        }
        for (Method m : {Method::llmc_static_minmax, Method::llmc_memoryless_minmax}) {
            INFO(name(m));
            const float gs = llmc_nvfp4_input_global_scale(calibrate(m, batches, d).amax, d);
            CHECK(fp8kit_test::bits(gs) == nvfp4_hex_bits(e[name(m)]["bits_f32"]));
        }
    }
    CHECK(llmc_nvfp4_input_global_scale(fp8kit_test::kNaN, DType::bf16) == 1.0f);  // nan_to_num
    CHECK(fp8kit_test::bits(*modelopt_nvfp4_input_scale(fp8kit_test::kNaN)) ==
          fp8kit_test::bits(6.0f / 2688.0f));  // export_amax: NaN -> maxbound
}

TEST_CASE("calibrate --scheme nvfp4: what it refuses, and KV scales stay FP8", "[calibrate]") {
    CHECK(parse_scheme("nvfp4") == Scheme::nvfp4);
    CHECK(parse_scheme("fp8") == Scheme::fp8);
    CHECK_FALSE(parse_scheme("mxfp4").has_value());
    CHECK_THROWS_WITH(require_scheme(Method::modelopt_mse, Scheme::nvfp4), Catch::Contains("\"algorithm\": \"max\""));
    CHECK_THROWS_WITH(require_scheme(Method::modelopt_percentile, Scheme::nvfp4), Catch::Contains("modelopt_max"));
    CHECK_THROWS_WITH(require_scheme(Method::llmc_minmax, Scheme::nvfp4), Catch::Contains("per group of 16"));
    CHECK_THROWS_WITH(require_scheme(Method::llmc_mse, Scheme::nvfp4), Catch::Contains("observers/mse.py"));
    for (Method m : all_methods()) CHECK_NOTHROW(require_scheme(m, Scheme::fp8));

    // The KV cache of an NVFP4 model stays FP8 for both producers: under --scheme nvfp4 the
    // attention's k/v scales are written exactly as under fp8.
    fp8kit::test::ScratchDir scratch("calibrate_nvfp4");
    Options o;
    o.files = {std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_kv.h5"};
    o.include = {"*/model.layers.0.self_attn.k", "*/model.layers.0.self_attn.v"};
    o.methods = {Method::modelopt_max, Method::llmc_static_minmax};
    const auto r = run(o);
    for (Method m : o.methods) {
        INFO(name(m));
        write_safetensors(r, m, scratch.file("fp8.safetensors"), Scheme::fp8);
        write_safetensors(r, m, scratch.file("nvfp4.safetensors"), Scheme::nvfp4);
        auto a = read_saved(scratch.file("fp8.safetensors")), b = read_saved(scratch.file("nvfp4.safetensors"));
        CHECK(a.data == b.data);
        a.header.erase("__metadata__"), b.header.erase("__metadata__");
        CHECK(a.header == b.header);
    }
    Options c = o;
    c.granularity = Granularity::head;
    c.methods = {Method::modelopt_max};
    CHECK_THROWS_AS(write_safetensors(run(c), Method::modelopt_max, scratch.file("h.safetensors"), Scheme::nvfp4),
                    CalibrateError);
}
