// checkpoint check on ModelOpt's TensorRT-LLM checkpoint export (issue 51): what the reader
// refuses, with one line naming the file; and, on the fixtures ModelOpt 0.47 wrote
// (data/checkpoints/*modelopt_trtllm_*, scripts/fixtures/make_modelopt_trtllm_checkpoints.py), the
// TensorRT-LLM names mapped to the Hugging Face modules, every weight bit-exact against the
// unquantised original, the KV scales as that export writes them, and planted faults named.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>

#include "checkpoint/fixture_edit.hpp"

using namespace fp8kit::test::ckpt;

namespace {

// A folder holding config.json `config` and, unless `rank0` is false, a rank0.safetensors of one
// BF16 tensor.
std::string trt_folder(const fp8kit::test::ScratchDir& scratch, const std::string& name, const nlohmann::json& config,
                       bool rank0 = true) {
    const fs::path d = fs::path(scratch.path()) / name;
    fs::create_directories(d);
    std::ofstream(d / "config.json") << config.dump();
    if (rank0) {
        const std::string h =
            R"({"transformer.layers.0.attention.dense.weight":{"dtype":"BF16","shape":[2,2],"data_offsets":[0,8]}})";
        std::ofstream o(d / "rank0.safetensors", std::ios::binary);
        const std::uint64_t n = h.size();
        o.write(reinterpret_cast<const char*>(&n), 8);
        o << h << std::string(8, '\0');
    }
    return d.string();
}

nlohmann::json trt_config() {
    return {{"producer", {{"name", "modelopt"}, {"version", "0.47.0"}}},
            {"architecture", "LlamaForCausalLM"},
            {"mapping", {{"world_size", 1}, {"tp_size", 1}, {"pp_size", 1}}},
            {"quantization", {{"quant_algo", "FP8"}, {"kv_cache_quant_algo", "FP8"}}}};
}

std::string refusal(const std::string& dir) {
    try {
        Folder F(dir);
    } catch (const CheckpointError& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("checkpoint: a TensorRT-LLM checkpoint fp8kit cannot read is refused in one line naming the file",
          "[checkpoint][trtllm]") {
    fp8kit::test::ScratchDir scratch("fp8kit_trtllm");
    SECTION("the layout is recognised: one rank of ModelOpt FP8") {
        Folder F(trt_folder(scratch, "ok", trt_config()));
        CHECK(F.trtllm);
        CHECK(F.architecture == "LlamaForCausalLM");
        CHECK(F.producer() == Producer::modelopt);
        CHECK(F.kv_cache_algo == "FP8");
        REQUIRE(F.layers().size() == 1);
        CHECK(F.layers()[0].sources == std::vector<std::string>{"model.layers.0.self_attn.o_proj"});
    }
    SECTION("tensor parallelism: two ranks, rank1 missing") {
        auto c = trt_config();
        c["mapping"] = {{"world_size", 2}, {"tp_size", 2}, {"pp_size", 1}};
        const std::string m = refusal(trt_folder(scratch, "tp2", c));
        CHECK_THAT(m, Catch::Contains("tp2/config.json: a TensorRT-LLM checkpoint of 2 ranks (tp_size 2, pp_size 1)"));
        CHECK_THAT(m, Catch::Contains("missing: rank1.safetensors"));
        CHECK_THAT(m, Catch::Contains("single-rank"));
        CHECK(m.find('\n') == std::string::npos);
    }
    SECTION("no rank0.safetensors") {
        const std::string m = refusal(trt_folder(scratch, "norank", trt_config(), false));
        CHECK_THAT(m, Catch::Contains("norank: a TensorRT-LLM checkpoint config.json without rank0.safetensors"));
    }
    SECTION("another producer") {
        auto c = trt_config();
        c.erase("producer");
        CHECK_THAT(refusal(trt_folder(scratch, "noproducer", c)),
                   Catch::Contains("noproducer/config.json: a TensorRT-LLM checkpoint whose producer is 'not named'"));
    }
    SECTION("a scheme whose tensors are not read") {
        auto c = trt_config();
        c["quantization"]["quant_algo"] = "W4A8_AWQ";
        CHECK_THAT(refusal(trt_folder(scratch, "awq", c)),
                   Catch::Contains("awq/config.json: quant_algo 'W4A8_AWQ' in a TensorRT-LLM checkpoint is not one "
                                   "fp8kit reads"));
    }
    SECTION("a Hugging Face config.json (\"architectures\", a list) is not taken for this layout") {
        const std::string d = trt_folder(scratch, "hf", {{"architectures", {"LlamaForCausalLM"}}});
        CHECK_THAT(refusal(d), !Catch::Contains("TensorRT-LLM"));
    }
}
