// checkpoint check against what the producers write beyond the library-helper fixtures (issue
// 51): llm-compressor's fused NVFP4 global scales, transformers' FineGrainedFP8 block rule and its
// ue8m0 scales (data/checkpoints/llmc_nvfp4_fused, scripts/make_transcribed_checkpoints.py;
// tf_*, scripts/fixtures/make_transformers_fp8_checkpoints.py), MX scale code 0, engine concerns under --engine, every scale
// value and shape, gpt-oss's original/ layout and stacked experts, the verdict summary, and
// layers quantised outside the config's targets.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <tuple>

#include <fmt/format.h>

#include "checkpoint/fixture_edit.hpp"

using namespace fp8kit::test::ckpt;

namespace {

bool has_note(const Report& r, const std::string& check, const std::string& tensor) {
    for (const auto& f : r.findings)
        if (!f.failed && f.check == check && f.tensor == tensor) return true;
    return false;
}
bool any_failure(const Report& r, const std::string& check) {
    for (const auto& f : r.findings)
        if (f.failed && f.check == check) return true;
    return false;
}
void set_f32_at(Tensor& t, std::size_t i, float v) {
    REQUIRE(t.dtype == "F32");
    std::memcpy(t.bytes.data() + 4 * i, &v, 4);
}

}  // namespace

TEST_CASE("llm-compressor NVFP4: a fused group's one global scale is the producer's rule", "[checkpoint]") {
    // q/k/v and gate/up carry the global of the group's largest amax (llm-compressor
    // update_fused_layer_weight_global_scales); k, v (below q) and gate (below up) have a smaller
    // amax of their own.
    const Report r = check(kData + "llmc_nvfp4_fused", kOriginal);
    all_bit_exact(r);
    for (const auto& m :
         {kK, std::string("model.layers.0.self_attn.v_proj"), std::string("model.layers.0.mlp.gate_proj")}) {
        INFO(m);
        CHECK_THAT(comparison(r, m).variant, Catch::Contains("llm-compressor fused global scale"));
    }
    // o_proj and down_proj are groups of one: compressed-tensors' own rule.
    CHECK_THAT(comparison(r, kDown).variant, !Catch::Contains("fused"));
    // The per-layer fixture stays bit-exact under compressed-tensors' own rule.
    all_bit_exact(check(kData + "ct_nvfp4", kOriginal));
}

TEST_CASE("MX: E8M0 scale code 0 (2^-127) is a legal, multiplied scale", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    for (const std::string fx : {"ct_mxfp4", "modelopt_mxfp4", "modelopt_mxfp8"}) {
        INFO(fx);
        // An all-zero block: up_proj row 3, columns 32..63 (MX block 1 of the row).
        const auto d = planted(s, fx, [&](Tensors& t) {
            const bool packed = fx != "modelopt_mxfp8";
            auto& w = t.at(kUp + (fx == "ct_mxfp4" ? ".weight_packed" : ".weight"));
            const std::size_t row = packed ? 64 : 128, first = packed ? 16 : 32, n = packed ? 16 : 32;
            for (std::size_t i = 0; i < n; ++i) w.bytes[3 * row + first + i] = 0;
            t.at(kUp + ".weight_scale").bytes[3 * 4 + 1] = 0;  // E8M0 code 0
        });
        const Report r = check(d);
        CHECK_FALSE(any_failure(r, "scale subnormal"));
        CHECK_FALSE(r.failed());
        // What does break the multiplication: E8M0 code 255 (NaN in the OCP MX format).
        fp8kit::test::ScratchDir s2("ckpt");
        const auto nan = planted(s2, fx, [&](Tensors& t) { t.at(kUp + ".weight_scale").bytes[3 * 4 + 1] = 255; });
        const Report rn = check(nan);
        CHECK(has_failure(rn, "scale finite", kUp + ".weight_scale"));
        for (const auto& f : rn.findings)
            if (f.check == "scale finite") CHECK_THAT(f.message, Catch::Contains("= nan"));
    }
}

TEST_CASE("engine concerns are notes unless --engine names the engine", "[checkpoint]") {
    // llm-compressor's FP8 KV cache: k_scale / v_scale on the attention module (compressed-tensors
    // lifecycle/initialize.py _initialize_attn_scales, shape [1] in the module's dtype).
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "ct_fp8", [](Tensors& t) {
        for (const char* n : {"k_scale", "v_scale"})
            t[std::string("model.layers.0.self_attn.") + n] = {"BF16", {1}, {0x10, 0x3c}};
    });
    {
        std::ifstream in(fs::path(d) / "config.json");
        auto c = nlohmann::json::parse(in);
        c["quantization_config"]["kv_cache_scheme"] = {
            {"num_bits", 8}, {"type", "float"}, {"strategy", "tensor"}, {"dynamic", false}, {"symmetric", true}};
        std::ofstream(fs::path(d) / "config.json") << c.dump();
    }
    const std::string k = "model.layers.0.self_attn.k_scale";
    const Report none = check(d);
    CHECK_FALSE(none.failed());
    CHECK(has_note(none, "kv scale dropped", k));  // TensorRT-LLM never reads self_attn.k_scale
    CHECK_FALSE(check(d, CheckOptions{std::nullopt, "vllm"}).failed());
    CHECK_FALSE(check(d, CheckOptions{std::nullopt, "sglang"}).failed());
    const Report trt = check(d, CheckOptions{std::nullopt, "trtllm"});
    CHECK(has_failure(trt, "kv scale dropped", k));
    CHECK(trt.failed());
    CHECK_THROWS_AS(check(d, CheckOptions{std::nullopt, "tgi"}), CheckpointError);
}

TEST_CASE("transformers FineGrainedFP8: its own block rule and both ue8m0 scale forms", "[checkpoint]") {
    // Written by transformers 5.17 itself (scripts/fixtures/make_transformers_fp8_checkpoints.py):
    // its loader casts the weight to E4M3 before Fp8Quantize, whose multiplier is
    // fl(448 * fl(1 / amax)) and whose stored scale is fl(1 / that).
    const Report r = check(kData + "tf_fp8_block", kOriginal);
    all_bit_exact(r);
    REQUIRE(r.comparisons.size() == 7);
    for (const auto& c : r.comparisons)
        CHECK_THAT(c.variant, Catch::Contains("transformers FineGrainedFP8, weight cast to E4M3 on load"));
    // ue8m0: power-of-two scales as F8_E8M0 (what transformers writes) and in a float32
    // container, read and checked alike.
    for (const std::string fx : {"tf_fp8_block_ue8m0", "tf_fp8_block_ue8m0_f32"}) {
        INFO(fx);
        const Folder F(kData + fx);
        CHECK(F.scale_fmt == "ue8m0");
        CHECK(F.transformers_fp8);
        for (const auto& L : F.layers())
            if (L.scheme != Scheme::none)
                CHECK(F.tensors().at(L.scale).dtype == (fx == "tf_fp8_block_ue8m0" ? "F8_E8M0" : "F32"));
        CHECK_FALSE(check(kData + fx).failed());
        const Report u = check(kData + fx, kOriginal);
        all_bit_exact(u);
        for (const auto& c : u.comparisons) CHECK_THAT(c.variant, Catch::Contains("FineGrainedFP8 ue8m0"));
    }
    // The MoE: experts saved per expert, an all-zero block in expert 1's up_proj (transformers'
    // multiplier 1, scale 1; ue8m0 code 127).
    for (const std::string fx : {"tf_moe_fp8_block", "tf_moe_fp8_block_ue8m0"}) {
        INFO(fx);
        const Report m = check(kData + fx, kData + "tf_moe_original");
        CHECK_FALSE(m.failed());
        CHECK(m.comparisons.size() == 16);  // q k v o + 4 experts x gate up down
        for (const auto& c : m.comparisons) {
            INFO(c.module);
            CHECK(c.verdict == "bit-exact");
            CHECK(c.code_mismatches == 0);
            CHECK_THAT(c.variant, Catch::Contains("weight cast to E4M3 on load"));
        }
        const Folder F(kData + fx);
        const auto s = F.read("model.layers.0.mlp.experts.1.up_proj.weight_scale_inv");
        REQUIRE(s.numel() == 4);
        CHECK(s.at(0) == 1.0f);  // rows 0..63: zeroed
        CHECK(s.at(1) == 1.0f);
        CHECK(s.at(2) != 1.0f);
    }
}

TEST_CASE("the block rule is the config's: transformers' FineGrainedFP8 or DeepSeek's", "[checkpoint]") {
    // transformers' tensors under a DeepSeek-V3 config (no `dequantize`): amax / 448, not bit-exact.
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "tf_fp8_block", [](Tensors&) {});
    {
        std::ifstream in(fs::path(d) / "config.json");
        auto c = nlohmann::json::parse(in);
        c["quantization_config"].erase("dequantize");
        std::ofstream(fs::path(d) / "config.json") << c.dump();
    }
    CHECK_FALSE(Folder(d).transformers_fp8);
    const Report r = check(d, kOriginal);
    CHECK(r.failed());
    for (const auto& c : r.comparisons) CHECK_THAT(c.variant, !Catch::Contains("transformers"));
}

TEST_CASE("every scale value: sign, NaN, Inf, zero and magnitude", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    SECTION("a negative block scale fails") {
        const auto d =
            planted(s, "tf_fp8_block", [](Tensors& t) { set_f32_at(t.at(kDown + ".weight_scale_inv"), 1, -0.001f); });
        const Report r = check(d);
        CHECK(has_failure(r, "scale sign", kDown + ".weight_scale_inv"));
        CHECK(r.failed());
    }
    SECTION("uninitialised scales: every value is checked") {
        // torch.empty leaves whatever the memory held: -3e27, 1e30, float32 subnormals, NaN.
        const auto d = planted(s, "tf_fp8_block", [](Tensors& t) {
            auto& sc = t.at(kDown + ".weight_scale_inv");  // [2, 3]
            set_f32_at(sc, 0, -3e27f);
            set_f32_at(sc, 1, -2.5e-30f);
            set_f32_at(sc, 2, 1e30f);
            set_f32_at(sc, 3, 4e-40f);
            set_f32_at(sc, 4, NAN);
        });
        const Report r = check(d);
        const std::string n = kDown + ".weight_scale_inv";
        CHECK(has_failure(r, "scale sign", n));
        CHECK(has_failure(r, "scale magnitude", n));
        CHECK(has_failure(r, "scale subnormal", n));
        CHECK(has_failure(r, "scale finite", n));
        for (const auto& f : r.findings)
            if (f.check == "scale sign") CHECK_THAT(f.message, Catch::StartsWith("2 of 6"));
    }
    SECTION("a positive scale far beyond any weight fails") {
        const auto d = planted(s, "ct_fp8", [](Tensors& t) {
            auto& sc = t.at(kQ + ".weight_scale");  // BF16 [1]
            sc.bytes = {0x00, 0x70};                // 2^97
        });
        CHECK(has_failure(check(d), "scale magnitude", kQ + ".weight_scale"));
    }
}

TEST_CASE("every scale shape for every layout: a transposed DeepSeek grid fails", "[checkpoint]") {
    fp8kit::test::ScratchDir s1("ckpt"), s2("ckpt");
    // DeepSeek-V3: weight_scale_inv [ceil(rows/128), ceil(cols/128)]; down_proj [128, 192] -> [1, 2].
    auto deepseek = [&](const fp8kit::test::ScratchDir& s, const nlohmann::json& down_shape) {
        const auto d = planted(s, "tf_fp8_block", [&](Tensors& t) {
            Tensors out;
            for (auto& [k, v] : t) {
                Tensor x = v;
                if (k.size() > 17 && k.compare(k.size() - 17, 17, ".weight_scale_inv") == 0) {
                    // one 128x128 block scale per block of the 64x64 fixture's grid: keep the
                    // element count right, only the arrangement is at stake here
                    const auto& w = t.at(k.substr(0, k.size() - 10));
                    const std::size_t gr = (w.shape[0].get<std::size_t>() + 127) / 128,
                                      gc = (w.shape[1].get<std::size_t>() + 127) / 128;
                    x.bytes.resize(4 * gr * gc);
                    x.shape = nlohmann::json::array({gr, gc});
                    if (k.find("down_proj") != std::string::npos) x.shape = down_shape;
                }
                out[k] = x;
            }
            t = std::move(out);
        });
        std::ifstream in(fs::path(d) / "config.json");
        auto c = nlohmann::json::parse(in);
        c["quantization_config"]["weight_block_size"] = {128, 128};
        std::ofstream(fs::path(d) / "config.json") << c.dump();
        return d;
    };
    const Report ok = check(deepseek(s1, {1, 2}));
    CHECK_FALSE(any_failure(ok, "scale shape"));
    CHECK_FALSE(any_failure(ok, "structure"));
    const Report bad = check(deepseek(s2, {2, 1}));
    CHECK(has_failure(bad, "scale shape", kDown + ".weight_scale_inv"));
    CHECK(bad.failed());
    for (const auto& f : bad.findings)  // the shape found and the shape the layout stores, both named
        if (f.check == "scale shape") {
            CHECK_THAT(f.message, Catch::StartsWith("shape [2, 1] for fp8-block weight [128, 192]"));
            CHECK_THAT(f.message, Catch::EndsWith("stores [1, 2]"));
        }
    // ModelOpt's own FP8_PB_WO layout [gr, 1, gc, 1] stays right for ModelOpt.
    CHECK_FALSE(any_failure(check(kData + "modelopt_fp8_block"), "scale shape"));
}

TEST_CASE("the summary counts what failed, by class", "[checkpoint]") {
    CHECK(summary(check(kData + "ct_fp8", kOriginal)) == "OK");
    // One code flipped in down_proj: only a comparison fails, no finding does.
    fp8kit::test::ScratchDir sd("ckpt");
    const auto d = planted(sd, "ct_fp8", [](Tensors& t) { t.at(kDown + ".weight").bytes[10] ^= 1; });
    const Report r = check(d, kOriginal);
    REQUIRE(r.failed());
    std::size_t bad = 0;
    for (const auto& c : r.comparisons) bad += c.verdict != "bit-exact";
    for (const auto& f : r.findings) bad += f.failed;
    REQUIRE(bad > 0);
    const std::string s = summary(r);
    CHECK_THAT(s, Catch::StartsWith(fmt::format("FAILED ({} failed: ", bad)));
    CHECK_THAT(s, !Catch::Contains("(0 failed"));
}

namespace {
// ct_mxfp4's experts, stacked as gpt-oss stores them: `<p>.blocks` [E, rows, cols/32, 16] and
// `<p>.scales` [E, rows, cols/32] (gpt_oss/torch/weights.py), from moe_ct_mxfp4's per-expert tensors.
// original/: gpt-oss's names (mlp1_weight for the gate half here, mlp2_weight for down_proj).
std::string gpt_oss_name(const std::string& p) { return p == "gate_proj" ? "mlp1_weight" : "mlp2_weight"; }
void stack_experts(Tensors& t, const std::string& to_prefix, const std::string& sep, bool original) {
    Tensors out;
    for (const std::string p : {"gate_proj", "up_proj", "down_proj"}) {
        if (original && p == "up_proj") continue;
        Tensor b{"U8", {}, {}}, sc{"U8", {}, {}};
        for (int e = 0; e < 4; ++e) {
            const std::string m = fmt::format("model.layers.0.mlp.experts.{}.{}", e, p);
            const auto& w = t.at(m + ".weight_packed");
            const auto& s = t.at(m + ".weight_scale");
            const std::size_t rows = w.shape[0].get<std::size_t>(), g = s.shape[1].get<std::size_t>();
            b.shape = nlohmann::json::array({std::size_t(4), rows, g, std::size_t(16)});
            sc.shape = nlohmann::json::array({std::size_t(4), rows, g});
            b.bytes.insert(b.bytes.end(), w.bytes.begin(), w.bytes.end());
            sc.bytes.insert(sc.bytes.end(), s.bytes.begin(), s.bytes.end());
        }
        const std::string n = original ? gpt_oss_name(p) : p;
        out[to_prefix + n + sep + "blocks"] = b;
        out[to_prefix + n + sep + "scales"] = sc;
    }
    t = std::move(out);
}
}  // namespace

TEST_CASE("gpt-oss original/: read from the tensor names; stacked experts against per-expert and stacked originals",
          "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    // original/: block.N.mlp.mlp1_weight.blocks, config.json without quantization_config.
    const auto d = planted(s, "moe_ct_mxfp4", [](Tensors& t) { stack_experts(t, "block.0.mlp.", ".", true); });
    std::ofstream(fs::path(d) / "config.json") << nlohmann::json{{"num_hidden_layers", 1}, {"num_experts", 4}}.dump();
    const Folder F(d);
    CHECK(F.producer() == Producer::gpt_oss);
    CHECK(F.layout_from_names);
    std::size_t stacked = 0;
    for (const auto& L : F.layers())
        if (L.scheme == Scheme::mxfp4) {
            ++stacked;
            CHECK(L.experts == 4);
        }
    CHECK(stacked == 2);
    const Report r = check(d);
    CHECK_FALSE(r.failed());
    // The stacked original under the same name ([E, rows, cols]) and, for the HF layout, the
    // per-expert original (transformers' save_pretrained): every code lines up with its weight.
    const auto ref = planted(s, "moe_original", [](Tensors& t) {
        for (const std::string p : {"gate_proj", "up_proj", "down_proj"}) {
            Tensor st{"BF16", {}, {}};
            for (int e = 0; e < 4; ++e) {
                const auto& w = t.at(fmt::format("model.layers.0.mlp.experts.{}.{}.weight", e, p));
                st.shape = nlohmann::json::array({4, w.shape[0].get<std::size_t>(), w.shape[1].get<std::size_t>()});
                st.bytes.insert(st.bytes.end(), w.bytes.begin(), w.bytes.end());
            }
            if (p != "up_proj") t["block.0.mlp." + gpt_oss_name(p)] = st;
        }
    });
    fp8kit::test::ScratchDir s2("ckpt");
    const auto hf =
        planted(s2, "moe_ct_mxfp4", [](Tensors& t) { stack_experts(t, "model.layers.0.mlp.experts.", "_", false); });
    std::ofstream(fs::path(hf) / "config.json")
        << nlohmann::json{{"quantization_config", {{"quant_method", "mxfp4"}}}}.dump();
    for (const auto& [dir, what] : {std::pair{d, "stacked"}, std::pair{hf, "per expert"}}) {
        INFO(what);
        const Report c = check(dir, ref);
        REQUIRE(c.comparisons.size() == (dir == d ? 2u : 3u));
        for (const auto& x : c.comparisons) {
            INFO(x.module);
            const bool down = x.module.find("down") != std::string::npos || x.module.find("mlp2") != std::string::npos;
            CHECK(x.elements == 4 * (down ? 128 * 64 : 64 * 128));
            CHECK(x.code_mismatches == 0);  // codes under the stored scales: the layout lines up
        }
    }
}

TEST_CASE("a layer quantised outside the config's targets is noted", "[checkpoint]") {
    // llm-compressor model_free_ptq quantises by tensor name: embed_tokens too, under targets [Linear].
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "ct_fp8", [](Tensors& t) {
        auto& e = t.at("model.embed_tokens.weight");
        const std::size_t n = e.bytes.size() / 2;
        e.dtype = "F8_E4M3";
        e.bytes.assign(n, 0x38);
        t["model.embed_tokens.weight_scale"] = {"BF16", {1}, {0x23, 0x3c}};
    });
    const Report r = check(d);
    CHECK(has_note(r, "outside targets", "model.embed_tokens"));
    for (const auto& f : r.findings) CHECK_FALSE((f.check == "outside targets" && f.tensor != "model.embed_tokens"));
}

// gpt-oss experts written by triton_kernels' own downcast_to_mxfp (scripts/fixtures/
// make_gptoss_triton_checkpoints.py): each commit's folders are bit-exact under its own tie rule
// (the rules are tried ties to even first: a ties-away verdict means ties to even was not).
TEST_CASE("gpt-oss: triton_kernels' rule, ties to even (d80d2866) and ties away (9e1e203f), both layouts",
          "[checkpoint]") {
    for (const auto& [q, ref, rule] :
         {std::tuple{"gptoss_triton_original", "gptoss_triton_original_ref", "ties to even"},
          std::tuple{"gptoss_triton_hf", "gptoss_triton_hf_ref", "ties to even"},
          std::tuple{"gptoss_triton_aug25_original", "gptoss_triton_original_ref", "ties away (before triton #8110)"},
          std::tuple{"gptoss_triton_aug25_hf", "gptoss_triton_hf_ref", "ties away (before triton #8110)"}}) {
        INFO(q);
        const Report r = check(kData + q, kData + ref);
        CHECK_FALSE(r.failed());
        REQUIRE(r.comparisons.size() == 2);
        for (const auto& c : r.comparisons) {
            INFO(c.module);
            CHECK(c.verdict == "bit-exact");
            CHECK(c.variant == fmt::format("gpt-oss (triton_kernels downcast_to_mxfp ROUND_UP, {})", rule));
            CHECK(c.scale_mismatches == 0);
        }
    }
}
