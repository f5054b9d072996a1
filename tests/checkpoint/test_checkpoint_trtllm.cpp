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
#include "float_bits.hpp"
#include "fp8kit/kv.hpp"

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
        CHECK_THAT(m, Catch::Contains("tp2: a TensorRT-LLM checkpoint of tp_size 2 without rank1.safetensors"));
        CHECK(m.find('\n') == std::string::npos);
    }
    SECTION("pipeline parallelism: pp_size 2") {
        auto c = trt_config();
        c["mapping"] = {{"world_size", 2}, {"tp_size", 1}, {"pp_size", 2}};
        const std::string m = refusal(trt_folder(scratch, "pp2", c));
        CHECK_THAT(m, Catch::Contains("pp2/config.json: a TensorRT-LLM checkpoint of world_size 2, tp_size 1, "
                                      "pp_size 2; fp8kit reads tensor-parallel ones"));
        CHECK(m.find('\n') == std::string::npos);
    }
    SECTION("no rank0.safetensors") {
        const std::string m = refusal(trt_folder(scratch, "norank", trt_config(), false));
        CHECK_THAT(m, Catch::Contains("norank: a TensorRT-LLM checkpoint of tp_size 1 without rank0.safetensors"));
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

namespace {

const std::string kL = "transformer.layers.0.", kQkv = kL + "attention.qkv", kFc = kL + "mlp.fc",
                  kGateT = kL + "mlp.gate", kKv = kL + "attention.kv_cache_scaling_factor",
                  kKc = kL + "attention.k_cache_scaling_factor", kVc = kL + "attention.v_cache_scaling_factor";
const std::string kMixtral = kData + "moe_mixtral_original";

const Layer& layer(const Folder& F, const std::string& module) {
    for (const auto& L : F.layers())
        if (L.module == module) return L;
    FAIL("no layer " << module);
    throw;
}

// Every quantised weight checked is bit-exact; `n` comparisons.
void bit_exact(const Report& r, std::size_t n) {
    CHECK(r.comparisons.size() == n);
    for (const auto& c : r.comparisons) {
        INFO(c.module);
        CHECK(c.verdict == "bit-exact");
        CHECK(c.code_mismatches == 0);
        CHECK(c.scale_mismatches == 0);
    }
    CHECK_FALSE(r.failed());
}

// The float32 values of tensor `name` in a checkpoint's one-shard file.
float f32_at(const std::string& dir, const std::string& name) {
    const Folder F(dir, /*unquantized=*/true);
    return F.read(name).at(0);
}

// The calibrated amax of <attn>'s k or v bmm quantizer, as the fixture script recorded it.
float kv_amax(const std::string& fixture, const char* which) {
    std::ifstream in(kData + fixture + "/kv_amax.json");
    const auto j = nlohmann::json::parse(in);
    const std::string hex = j["model.layers.0.self_attn"][which]["bits"][0];
    return fp8kit_test::from_bits(static_cast<std::uint32_t>(std::stoul(hex, nullptr, 16)));
}
using fp8kit_test::bits;

}  // namespace

TEST_CASE("checkpoint: ModelOpt's TensorRT-LLM export, TensorRT-LLM's names mapped to the Hugging Face modules",
          "[checkpoint][trtllm]") {
    const Folder F(kData + "modelopt_trtllm_fp8");
    CHECK(F.trtllm);
    CHECK(F.quant_algo == "FP8");
    CHECK(layer(F, kQkv).sources == std::vector<std::string>{kQ, kK, "model.layers.0.self_attn.v_proj"});
    CHECK(layer(F, kQkv).rows == 256);  // q 128 + k 64 + v 64 rows
    // build_mlp_config: fc is gate_proj, gate is up_proj; FP8 fuses their amax.
    CHECK(layer(F, kFc).sources == std::vector<std::string>{kGate});
    CHECK(layer(F, kGateT).sources == std::vector<std::string>{kUp});
    CHECK(layer(F, kFc).amax_group == std::vector<std::string>{kGate, kUp});
    CHECK(layer(F, kL + "mlp.proj").sources == std::vector<std::string>{kDown});
    CHECK(layer(F, kL + "mlp.proj").amax_group.empty());
    CHECK(layer(F, "lm_head").scheme == Scheme::none);
    CHECK(layer(F, "lm_head").excluded);
    // Per channel: per_channel_scale, no shared amax.
    const Folder P(kData + "modelopt_trtllm_fp8_pcpt");
    CHECK(layer(P, kFc).scheme == Scheme::fp8_channel);
    CHECK(layer(P, kFc).scale == kFc + ".per_channel_scale");
    CHECK(layer(P, kFc).amax_group.empty());
    // Stacked experts: per expert w3 (up) then w1 (gate) rows (build_stacked_experts).
    const Folder M(kData + "moe_mixtral_linear_modelopt_trtllm_fp8");
    const Layer& fc = layer(M, kFc);
    CHECK(fc.experts == 4);
    REQUIRE(fc.sources.size() == 8);
    CHECK(fc.sources[0] == "model.layers.0.block_sparse_moe.experts.0.w3");
    CHECK(fc.sources[1] == "model.layers.0.block_sparse_moe.experts.0.w1");
    CHECK(fc.sources[7] == "model.layers.0.block_sparse_moe.experts.3.w1");
    CHECK(layer(M, kL + "mlp.router").excluded);
}

TEST_CASE("checkpoint --reference: every weight of ModelOpt's TensorRT-LLM exports bit-exact against the original",
          "[checkpoint][trtllm]") {
    for (const std::string pre : {"", "gpu_"}) {
        INFO(pre);
        for (const std::string s : {"fp8", "nvfp4", "fp8_pcpt"}) {
            INFO(s);
            bit_exact(check(kData + pre + "modelopt_trtllm_" + s, kOriginal), 5);  // qkv dense fc gate proj
        }
        bit_exact(check(kData + pre + "modelopt_trtllm_nvfp4_hf", kOriginal), 7);
        // Mixtral: qkv, dense and the two stacked expert weights (4 x [w3; w1], 4 x w2).
        bit_exact(check(kData + pre + "moe_mixtral_linear_modelopt_trtllm_fp8", kMixtral), 4);
        // Stacked NVFP4 experts, a global scale per expert: each expert compared on its own.
        const Report n = check(kData + pre + "moe_mixtral_linear_modelopt_trtllm_nvfp4", kMixtral);
        bit_exact(n, 10);  // qkv, dense, 4 x fc[expert e], 4 x proj[expert e]
        CHECK(comparison(n, kFc + "[expert 3]").elements == 128 * 128);
        bit_exact(check(kData + pre + "moe_mixtral_linear_modelopt_trtllm_fp8_hf", kMixtral), 16);
        bit_exact(check(kData + pre + "moe_mixtral_linear_modelopt_trtllm_nvfp4_hf", kMixtral), 16);
        // The HF export of per-channel experts (their TensorRT-LLM export is refused by ModelOpt):
        // an expert's w1 and w3 share each row's amax (sync_moe_gate_up_amax), w2 keeps its own.
        const Report pc = check(kData + pre + "moe_mixtral_linear_modelopt_trtllm_fp8_pcpt_hf", kMixtral);
        bit_exact(pc, 16);
        const std::string e0 = "model.layers.0.block_sparse_moe.experts.0.";
        CHECK_THAT(comparison(pc, e0 + "w1").variant, Catch::Contains("expert gate/up amax shared per row"));
        CHECK_THAT(comparison(pc, e0 + "w2").variant, !Catch::Contains("shared per row"));
    }
    // The GPU export needs the CUDA-arithmetic variant for its 1-ulp-up scales (amax * fl(1/448)).
    const Report g = check(kData + "gpu_modelopt_trtllm_fp8", kOriginal);
    CHECK(comparison(g, kFc).variant == "modelopt (CUDA arithmetic)");
    CHECK(comparison(check(kData + "modelopt_trtllm_fp8", kOriginal), kFc).variant == "modelopt (CPU arithmetic)");
}

TEST_CASE("checkpoint: ModelOpt's TensorRT-LLM export divides by a [1] scale, a float32 quotient",
          "[checkpoint][trtllm]") {
    fp8kit::test::ScratchDir scratch("fp8kit_trtllm");
    // The same bytes with the scale stored 0-dim, as the HF export stores it: the HF rule (a
    // bfloat16 quotient) then applies, and the codes ModelOpt wrote from a float32 quotient differ.
    const std::string d = planted(
        scratch, "modelopt_trtllm_fp8",
        [](Tensors& t) { t.at(kQkv + ".weights_scaling_factor").shape = nlohmann::json::array(); },
        "rank0.safetensors");
    const Report r = check(d, kOriginal);
    CHECK(comparison(r, kQkv).verdict == "rounding");
    CHECK(comparison(r, kQkv).scale_mismatches == 0);
    CHECK(comparison(r, kFc).verdict == "bit-exact");
}

TEST_CASE("checkpoint: faults planted in a copy of a TensorRT-LLM export are named", "[checkpoint][trtllm]") {
    fp8kit::test::ScratchDir scratch("fp8kit_trtllm");
    const std::string fx = "modelopt_trtllm_fp8", shard = "rank0.safetensors";
    SECTION("a negative weight scale") {
        const std::string d = planted(
            scratch, fx, [](Tensors& t) { set_f32(t.at(kQkv + ".weights_scaling_factor"), -0.01f); }, shard);
        const Report r = check(d);
        CHECK(has_failure(r, "scale sign", kQkv + ".weights_scaling_factor"));
        CHECK(r.failed());
    }
    SECTION("one code flipped in the fused gate projection") {
        const std::string d = planted(
            scratch, fx, [](Tensors& t) { t.at(kFc + ".weight").bytes[100] ^= 0x01; }, shard);
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kFc).code_mismatches == 1);
        CHECK(comparison(r, kFc).verdict != "bit-exact");
        CHECK(comparison(r, kGateT).verdict == "bit-exact");
    }
    SECTION("gate's scale not shared with fc's (build_mlp_config fuses their amax)") {
        const std::string d = planted(
            scratch, fx,
            [](Tensors& t) {
                auto& s = t.at(kGateT + ".weights_scaling_factor");
                set_f32(s, get_f32(s) * 1.5f);
            },
            shard);
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kGateT).verdict == "different amax");
        CHECK(comparison(r, kFc).verdict == "bit-exact");
    }
    SECTION("no KV scale although config.json declares an FP8 KV cache") {
        const std::string d = planted(
            scratch, fx,
            [](Tensors& t) {
                t.erase(kKv);
                t.erase(kKc);
                t.erase(kVc);
            },
            shard);
        const Report r = check(d);
        CHECK(has_failure(r, "kv scale missing", kKv));
        CHECK(r.failed());
    }
    SECTION("k_cache_scaling_factor without v_cache_scaling_factor: TensorRT-LLM's preprocess_weights asserts") {
        const std::string d = planted(
            scratch, fx, [](Tensors& t) { t.erase(kVc); }, shard);
        const Report r = check(d);
        CHECK(has_failure(r, "kv scale rejected", kKc));
    }
    SECTION("one expert's NVFP4 global scale (weights_scaling_factor_2 [E]) doubled") {
        const std::string d = planted(
            scratch, "moe_mixtral_linear_modelopt_trtllm_nvfp4",
            [](Tensors& t) {
                auto& g = t.at(kFc + ".weights_scaling_factor_2");
                float v;
                std::memcpy(&v, g.bytes.data() + 4, 4);
                v *= 2;
                std::memcpy(g.bytes.data() + 4, &v, 4);
            },
            shard);
        const Report r = check(d, kMixtral);
        CHECK(comparison(r, kFc + "[expert 1]").verdict == "different amax");
        CHECK(comparison(r, kFc + "[expert 0]").verdict == "bit-exact");
        CHECK(comparison(r, kFc + "[expert 2]").verdict == "bit-exact");
    }
    SECTION("a KV scale of 0") {
        const std::string d = planted(
            scratch, fx, [](Tensors& t) { set_f32(t.at(kKv), 0.0f); }, shard);
        CHECK(has_failure(check(d), "kv scale value", kKv));
    }
    SECTION("a KV scale below 1 is noted: not what this export writes") {
        const std::string d = planted(
            scratch, fx, [](Tensors& t) { set_f32(t.at(kKv), 0.0045f); }, shard);
        const Report r = check(d);
        bool noted = false;
        for (const auto& f : r.findings)
            noted = noted || (!f.failed && f.check == "kv scale below 1" && f.tensor == kKv);
        CHECK(noted);
        CHECK_FALSE(r.failed());
    }
}

TEST_CASE("kv policies: each ModelOpt export's KV scale from the calibrated amax, bit for bit",
          "[checkpoint][trtllm]") {
    using fp8kit::kv::CacheFormat;
    // The fixture script recorded each k/v_bmm_quantizer's amax before export; both exports of
    // the same quantisation wrote their scales from it.
    for (const std::string pre : {"", "gpu_"})
        for (const std::string m : {"modelopt_trtllm_nvfp4", "moe_mixtral_linear_modelopt_trtllm_fp8"}) {
            INFO(pre + m);
            for (const char* q : {"k_bmm_quantizer", "v_bmm_quantizer"}) {
                const float amax = kv_amax(pre + m, q);
                const bool k = q[0] == 'k';
                // TensorRT-LLM export: max(amax / 448, 1) (get_kv_cache_scaling_factor).
                const float trt = f32_at(kData + pre + m, k ? kKc : kVc);
                CHECK(bits(trt) == bits(fp8kit::kv::modelopt_kv_scale(amax, CacheFormat::e4m3)));
                CHECK(trt == 1.0f);  // amax ~2 here: the clamp decides
                // HF export: amax / 448, never clamped (postprocess_state_dict); on CUDA the
                // division by the Python number 448 is amax * fl(1/448).
                const std::string hf = kData + pre + m + "_hf";
                const float s =
                    f32_at(hf, std::string("model.layers.0.self_attn.") + (k ? "k_proj.k_scale" : "v_proj.v_scale"));
                const float want =
                    pre.empty() ? fp8kit::kv::calibrated_scale(amax, CacheFormat::e4m3) : amax * (1.0f / 448.0f);
                CHECK(bits(s) == bits(want));
            }
            // kv_cache_scaling_factor = max(k, v) (model_config_utils.py split_config_and_weights).
            CHECK(f32_at(kData + pre + m, kKv) == std::max(f32_at(kData + pre + m, kKc), f32_at(kData + pre + m, kVc)));
        }
    // The two divisions differ on the Mixtral's k amax (1.8671875): the GPU fixture tells them apart.
    const float a = kv_amax("gpu_moe_mixtral_linear_modelopt_trtllm_fp8", "k_bmm_quantizer");
    CHECK(bits(a / 448.0f) != bits(a * (1.0f / 448.0f)));
}

// Tensor parallelism (data/checkpoints/*_tp2: the same quantisations exported by ModelOpt with
// inference_tensor_parallel=2, postprocess.py _split_model_config_for_tp).
TEST_CASE("checkpoint: a tp = 2 TensorRT-LLM export read whole is the tp = 1 export, byte for byte",
          "[checkpoint][trtllm]") {
    // The tp = 1 export of the same model and calibration is the golden whole: every tensor,
    // put back together from two ranks, is its bytes (q, k and v each split by rank; expert fc's
    // w3 and w1 halves each split; row linears and NVFP4 block scales split by column).
    for (const std::string m : {"modelopt_trtllm_fp8", "modelopt_trtllm_nvfp4",
                                "moe_mixtral_linear_modelopt_trtllm_fp8", "moe_mixtral_linear_modelopt_trtllm_nvfp4"}) {
        INFO(m);
        const Folder one(kData + m), two(kData + m + "_tp2");
        CHECK(one.tp() == 1);
        REQUIRE(two.tp() == 2);
        REQUIRE(one.tensors().size() == two.tensors().size());
        for (const auto& [n, t] : one.tensors()) {
            INFO(n);
            REQUIRE(two.has(n));
            CHECK(two.tensors().at(n).shape == t.shape);
            const RawTensor a = one.read(n), b = two.read(n);
            CHECK(a.bytes.size() == b.bytes.size());
            CHECK(std::memcmp(a.bytes.data(), b.bytes.data(), std::min(a.bytes.size(), b.bytes.size())) == 0);
        }
        CHECK(two.rank_differences().empty());
    }
    // Which rank holds an element: qkv rows [q0 64 | q1 64 | k0 32 | k1 32 | v0 32 | v1 32].
    const Folder F(kData + "modelopt_trtllm_fp8_tp2");
    const std::string w = kQkv + ".weight";
    CHECK(F.rank_of(w, 63 * 128) == 0u);
    CHECK(F.rank_of(w, 64 * 128) == 1u);
    CHECK(F.rank_of(w, 128 * 128) == 0u);
    CHECK(F.rank_of(w, 160 * 128 + 5) == 1u);
    CHECK(F.rank_of(w, 255 * 128 + 127) == 1u);
    CHECK(F.rank_of(kL + "attention.dense.weight", 63) == 0u);  // row linear: columns split
    CHECK(F.rank_of(kL + "attention.dense.weight", 64) == 1u);
    CHECK_FALSE(F.rank_of(kQkv + ".weights_scaling_factor", 0));  // per tensor: whole on every rank
}

TEST_CASE("checkpoint --reference: every weight of ModelOpt's tp = 2 TensorRT-LLM exports bit-exact",
          "[checkpoint][trtllm]") {
    for (const std::string s : {"fp8", "nvfp4"}) {
        INFO(s);
        const Report r = check(kData + "modelopt_trtllm_" + s + "_tp2", kOriginal);
        bit_exact(r, 5);
        bool told = false;
        for (const auto& f : r.findings) told = told || f.message.find("tp_size 2") != std::string::npos;
        CHECK(told);
    }
    bit_exact(check(kData + "moe_mixtral_linear_modelopt_trtllm_fp8_tp2", kMixtral), 4);
    bit_exact(check(kData + "moe_mixtral_linear_modelopt_trtllm_nvfp4_tp2", kMixtral), 10);
}

TEST_CASE("checkpoint: faults planted in one rank of a tp = 2 export are named with the rank", "[checkpoint][trtllm]") {
    fp8kit::test::ScratchDir scratch("fp8kit_trtllm");
    SECTION("one code flipped in rank1's qkv (its k rows)") {
        const std::string d = planted(
            scratch, "modelopt_trtllm_fp8_tp2", [](Tensors& t) { t.at(kQkv + ".weight").bytes[100 * 128 + 3] ^= 1; },
            "rank1.safetensors");
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kQkv).code_mismatches == 1);
        CHECK(comparison(r, kQkv).verdict != "bit-exact");
        CHECK(comparison(r, kQkv).ranks == std::vector<std::uint64_t>{1});
        CHECK(comparison(r, kFc).verdict == "bit-exact");
    }
    SECTION("one code flipped in rank0's mlp.proj") {
        const std::string d = planted(
            scratch, "modelopt_trtllm_fp8_tp2", [](Tensors& t) { t.at(kL + "mlp.proj.weight").bytes[7] ^= 1; },
            "rank0.safetensors");
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kL + "mlp.proj").code_mismatches == 1);
        CHECK(comparison(r, kL + "mlp.proj").ranks == std::vector<std::uint64_t>{0});
    }
    SECTION("an NVFP4 block scale of rank1's mlp.fc (split with its rows) doubled") {
        const std::string d = planted(
            scratch, "modelopt_trtllm_nvfp4_tp2",
            [](Tensors& t) {
                auto& s = t.at(kFc + ".weights_scaling_factor");
                s.bytes[10] = static_cast<std::uint8_t>(s.bytes[10] + 8);  // E4M3: one exponent step up
            },
            "rank1.safetensors");
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kFc).scale_mismatches >= 1);
        CHECK(comparison(r, kFc).verdict != "bit-exact");
        CHECK(comparison(r, kFc).ranks == std::vector<std::uint64_t>{1});
    }
    SECTION("rank1 without a tensor rank0 has: refused in one line naming rank1") {
        const std::string d = planted(
            scratch, "modelopt_trtllm_fp8_tp2", [](Tensors& t) { t.erase(kL + "mlp.proj.weight"); },
            "rank1.safetensors");
        const std::string m = refusal(d);
        CHECK_THAT(
            m, Catch::Contains("rank1.safetensors: no tensor " + kL + "mlp.proj.weight (rank0.safetensors has it)"));
        CHECK(m.find('\n') == std::string::npos);
    }
    SECTION("a per-tensor scale (the same on every rank) changed in rank1 only") {
        const std::string d = planted(
            scratch, "modelopt_trtllm_fp8_tp2",
            [](Tensors& t) {
                auto& s = t.at(kGateT + ".weights_scaling_factor");
                set_f32(s, get_f32(s) * 1.5f);
            },
            "rank1.safetensors");
        const Report r = check(d);
        CHECK(has_failure(r, "ranks", kGateT + ".weights_scaling_factor"));
        bool named = false;
        for (const auto& f : r.findings) named = named || f.message.find("rank1.safetensors") != std::string::npos;
        CHECK(named);
        CHECK(r.failed());
    }
}
