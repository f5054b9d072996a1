// TensorRT-LLM checkpoints (issue 51), as ModelOpt 0.47's export_tensorrt_llm_checkpoint writes
// them (modelopt/torch/export/model_config_export.py): config.json (tensorrt_llm_utils.py
// convert_to_tensorrt_llm_config: "architecture", "mapping" {world_size, tp_size, pp_size},
// "quantization" {quant_algo, kv_cache_quant_algo, exclude_modules, ...}) and one
// rank<N>.safetensors per rank. Tensor names are TensorRT-LLM's (model_config_utils.py
// split_config_and_weights over ModelConfig): <module>.weight, .weights_scaling_factor,
// .weights_scaling_factor_2 (NVFP4), .per_channel_scale (FP8 per channel: pack_linear_weights),
// .activation_scaling_factor, .prequant_scaling_factor, and per attention
// .kv_cache_scaling_factor (max of .k_cache_scaling_factor and .v_cache_scaling_factor, also
// written). Modules (layer_utils.py build_decoder_config, build_mlp_config, build_moe_config):
// transformer.vocab_embedding, transformer.layers.N.attention.qkv (q, k, v rows concatenated:
// model_config.py QKVConfig.weight) and .dense, .mlp.fc / .mlp.gate / .mlp.proj (the
// Hugging Face gate_proj / up_proj / down_proj), MoE .mlp.router and stacked experts .mlp.fc
// [E, 2I, H] (per expert w3 then w1: build_stacked_experts) and .mlp.proj [E, H, I], lm_head.
#include <fmt/format.h>

#include <filesystem>
#include <regex>

#include "checkpoint/folder_internal.hpp"
#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint {
namespace fs = std::filesystem;

namespace detail {

TrtllmOrigin trtllm_origin(const std::string& module, std::uint64_t experts, const std::string& architecture,
                           Scheme scheme) {
    if (module == "transformer.vocab_embedding") return {{"model.embed_tokens"}, {}};
    if (module == "lm_head") return {{"lm_head"}, {}};
    static const std::regex kLayer(R"(^transformer\.layers\.(\d+)\.(attention\.qkv|attention\.dense|mlp\.[a-z]+)$)");
    std::smatch m;
    if (!std::regex_match(module, m, kLayer)) return {};
    const std::string hf = "model.layers." + m[1].str() + ".", part = m[2].str();
    const std::string attn = hf + "self_attn.";
    if (part == "attention.qkv") return {{attn + "q_proj", attn + "k_proj", attn + "v_proj"}, {}};
    if (part == "attention.dense") return {{attn + "o_proj"}, {}};
    // Mixtral's block (transformers' checkpoint names; ModelOpt treats Mixtral as decoder "llama").
    const std::string moe = hf + "block_sparse_moe.";
    if (architecture == "MixtralForCausalLM" && part == "mlp.router") return {{moe + "gate"}, {}};
    if (experts > 0) {
        if (architecture != "MixtralForCausalLM") return {};
        TrtllmOrigin o;
        for (std::uint64_t e = 0; e < experts; ++e) {
            const std::string ex = moe + fmt::format("experts.{}.", e);
            if (part == "mlp.fc") {  // build_stacked_experts: concat([w3, w1], dim=-2)
                o.sources.push_back(ex + "w3");
                o.sources.push_back(ex + "w1");
            } else if (part == "mlp.proj") {
                o.sources.push_back(ex + "w2");
            }
        }
        return o;
    }
    // build_mlp_config: fc_keywords "gate_proj", gate_keywords "up_proj", proj_keywords
    // "down_proj"; for FP8 and NVFP4 preprocess_linear_fusion([fc, gate]) gives both one amax.
    const std::string mlp = hf + "mlp.";
    const bool fused = scheme == Scheme::fp8_tensor || scheme == Scheme::nvfp4;
    std::vector<std::string> group;
    if (fused) group = {mlp + "gate_proj", mlp + "up_proj"};
    if (part == "mlp.fc") return {{mlp + "gate_proj"}, group};
    if (part == "mlp.gate") return {{mlp + "up_proj"}, group};
    if (part == "mlp.proj") return {{mlp + "down_proj"}, {}};
    return {};
}

}  // namespace detail

namespace {

bool trt_ends_with(const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

std::uint64_t json_count(const nlohmann::json& j, const char* key) {
    return j.contains(key) && j[key].is_number_unsigned() ? j[key].get<std::uint64_t>() : 1;
}

}  // namespace

// A TensorRT-LLM checkpoint is told by its config.json: a string "architecture" (a Hugging Face
// config has "architectures", a list) and a "mapping" object.
bool Folder::read_trtllm_config() {
    const fs::path cfg = fs::path(dir_) / "config.json";
    if (!fs::exists(cfg)) return false;
    const auto c = detail::read_json(cfg);
    if (!c.is_object() || !c.contains("architecture") || !c["architecture"].is_string() || !c.contains("mapping"))
        return false;
    trtllm = true;
    architecture = c["architecture"];
    const auto& map = c["mapping"];
    const std::uint64_t world = json_count(map, "world_size"), tp = json_count(map, "tp_size"),
                        pp = json_count(map, "pp_size");
    if (world != 1 || tp != 1 || pp != 1) {
        std::string missing;
        for (std::uint64_t r = 0; r < world && r < 1024; ++r)
            if (!fs::exists(fs::path(dir_) / fmt::format("rank{}.safetensors", r)))
                missing += fmt::format("{}rank{}.safetensors", missing.empty() ? "" : ", ", r);
        throw CheckpointError(
            fmt::format("{}: a TensorRT-LLM checkpoint of {} ranks (tp_size {}, pp_size {}){}; fp8kit reads "
                        "single-rank TensorRT-LLM checkpoints only (world_size 1, rank0.safetensors)",
                        cfg.string(), world, tp, pp, missing.empty() ? "" : "; missing: " + missing));
    }
    if (!fs::exists(fs::path(dir_) / "rank0.safetensors"))
        throw CheckpointError(fmt::format("{}: a TensorRT-LLM checkpoint config.json without rank0.safetensors", dir_));
    const std::string producer = c.contains("producer") && c["producer"].is_object()
                                     ? c["producer"].value("name", std::string())
                                     : std::string();
    if (producer != "modelopt")
        throw CheckpointError(fmt::format(
            "{}: a TensorRT-LLM checkpoint whose producer is '{}'; fp8kit checks ModelOpt's export "
            "(config.json \"producer\": {{\"name\": \"modelopt\"}}, modelopt/torch/export/tensorrt_llm_utils.py)",
            cfg.string(), producer.empty() ? "not named" : producer));
    producer_ = Producer::modelopt;
    const auto q = c.value("quantization", nlohmann::json::object());
    if (!q.is_object()) throw CheckpointError(fmt::format("{}: \"quantization\" is not an object", cfg.string()));
    if (q.contains("quant_algo") && q["quant_algo"].is_string()) quant_algo = q["quant_algo"];
    if (q.contains("kv_cache_quant_algo") && q["kv_cache_quant_algo"].is_string())
        kv_cache_algo = q["kv_cache_quant_algo"];
    exclude_ = detail::strings(q.value("exclude_modules", nlohmann::json::array()));
    // The schemes whose TensorRT-LLM tensors fp8kit reads; INT4 AWQ / W4A8 (int8-packed,
    // model_config_utils.py pack_linear_weights), INT8 SmoothQuant and the rest are not.
    if (!quant_algo.empty() && quant_algo != "FP8" && quant_algo != "NVFP4" &&
        quant_algo != "FP8_PER_CHANNEL_PER_TOKEN")
        throw CheckpointError(
            fmt::format("{}: quant_algo '{}' in a TensorRT-LLM checkpoint is not one fp8kit reads "
                        "(FP8, FP8_PER_CHANNEL_PER_TOKEN, NVFP4)",
                        cfg.string(), quant_algo));
    if (quant_algo == "FP8_PER_CHANNEL_PER_TOKEN") weight_strategy_ = "channel";
    return true;
}

// Layers from TensorRT-LLM's names: <m>.weight (F8_E4M3, or U8 two E2M1 per byte) with
// <m>.weights_scaling_factor (FP8 per tensor, one element, or [E] for stacked experts; NVFP4
// F8_E4M3 per 16) or <m>.per_channel_scale, <m>.weights_scaling_factor_2 (NVFP4),
// <m>.activation_scaling_factor, <m>.prequant_scaling_factor.
void Folder::list_trtllm_layers() {
    auto opt = [&](const std::string& n) { return has(n) ? n : std::string(); };
    for (const auto& [n, t] : tensors_) {
        if (!trt_ends_with(n, ".weight")) continue;
        Layer L;
        L.module = n.substr(0, n.size() - 7);
        L.weight = n;
        const std::string m = L.module;
        if (t.dtype == "F8_E4M3") {
            L.scale = opt(m + ".per_channel_scale");
            L.scheme = L.scale.empty() ? Scheme::fp8_tensor : Scheme::fp8_channel;
            if (L.scale.empty()) L.scale = opt(m + ".weights_scaling_factor");
        } else if (t.dtype == "U8") {
            L.scale = opt(m + ".weights_scaling_factor");
            L.global_scale = opt(m + ".weights_scaling_factor_2");
            L.scheme = Scheme::nvfp4;
        } else if (t.shape.size() != 2) {
            continue;  // norms
        }
        L.input_scale = opt(m + ".activation_scaling_factor");
        L.pre_quant_scale = opt(m + ".prequant_scaling_factor");
        L.excluded = detail::excluded_by(exclude_, m);
        set_extent(L, t);
        auto origin = detail::trtllm_origin(m, L.experts, architecture, L.scheme);
        L.sources = std::move(origin.sources);
        L.amax_group = std::move(origin.amax_group);
        layers_.push_back(std::move(L));
    }
}

}  // namespace fp8kit::checkpoint
