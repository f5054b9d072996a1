// ModelOpt 0.47's NVFP4-family presets as its HF export writes them (modelopt_presets.hpp).
#include "checkpoint/modelopt_presets.hpp"

#include <algorithm>
#include <set>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace fp8kit::checkpoint::detail {
namespace {

bool ends_with(const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

std::string upper(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}

bool nvfp4_family(const std::string& algo) {
    const std::string a = upper(algo);
    return a == "NVFP4" || a == "NVFP4_AWQ" || a == "NVFP4_SVD" || a == "W4A16_NVFP4" || a == "W4A8_NVFP4_FP8";
}

// The algos of the folder: its quant_algo, or under MIXED_PRECISION every layer's.
std::set<std::string> folder_algos(const Folder& F) {
    std::set<std::string> s;
    if (F.quantized_layers.empty()) s.insert(upper(F.quant_algo));
    for (const auto& [m, a] : F.quantized_layers) s.insert(upper(a.first));
    return s;
}

}  // namespace

std::map<std::string, std::pair<std::string, std::uint64_t>> modelopt_quantized_layers(const nlohmann::json& q) {
    std::map<std::string, std::pair<std::string, std::uint64_t>> out;
    if (!q.is_object() || !q.contains("quantized_layers") || !q["quantized_layers"].is_object()) return out;
    for (const auto& [m, v] : q["quantized_layers"].items()) {
        if (!v.is_object() || !v.contains("quant_algo") || !v["quant_algo"].is_string()) continue;
        const std::uint64_t g =
            v.contains("group_size") && v["group_size"].is_number_unsigned() ? v["group_size"].get<std::uint64_t>() : 0;
        out[m] = {v["quant_algo"].get<std::string>(), g};
    }
    return out;
}

std::string modelopt_layer_algo(const Folder& F, const std::string& module) {
    const auto it = F.quantized_layers.find(module);
    return it != F.quantized_layers.end() ? it->second.first : F.quant_algo;
}

std::uint64_t modelopt_nvfp4_block(const Folder& F, const std::string& module, std::uint64_t folder_group) {
    const auto it = F.quantized_layers.find(module);
    const std::uint64_t g = it != F.quantized_layers.end() ? it->second.second : folder_group;
    return g == 32 ? 32 : 16;  // configs/numerics: nvfp4 (16) and nvfp4_bs32 (32)
}

bool modelopt_fp8_stage_scale_2(const Layer& L) {
    return L.scheme == Scheme::nvfp4 && upper(L.quant_algo) == "W4A8_NVFP4_FP8";
}

bool modelopt_needs_input_scale(const Layer& L) {
    const std::string a = upper(L.quant_algo);
    return L.scheme == Scheme::nvfp4 && (a == "NVFP4" || a == "NVFP4_AWQ" || a == "NVFP4_SVD" || a == "W4A8_NVFP4_FP8");
}

void modelopt_nvfp4_companions(const Folder& F, const Layer& L, Findings& C) {
    if (F.producer() != Producer::modelopt || F.trtllm || L.scheme != Scheme::nvfp4) return;
    if (modelopt_needs_input_scale(L) && L.input_scale.empty())
        C.fail(L.module + ".input_scale", "missing input_scale",
               fmt::format("quant_algo {} quantises this layer's input statically; ModelOpt writes its input_scale "
                           "(quant_utils.py get_activation_scaling_factor), the checkpoint has none",
                           L.quant_algo));
    if (upper(L.quant_algo) == "W4A16_NVFP4" && !L.input_scale.empty())
        C.note(L.input_scale, "weight-only input_scale",
               "W4A16_NVFP4 quantises weights only; ModelOpt writes no input_scale for it (its input quantizer is "
               "disabled, quant_utils.py get_quantization_format)");
    for (const std::string* n : {&L.global_scale, &L.input_scale})
        if (!n->empty() && F.tensors().at(*n).dtype != "F32")
            C.fail(*n, "scale dtype",
                   fmt::format("dtype {}: ModelOpt writes this scale as float32 (quant_utils.py "
                               "get_weight_scaling_factor_2 / get_activation_scaling_factor: `.float()`)",
                               F.tensors().at(*n).dtype));
    if (!L.pre_quant_scale.empty()) {
        const auto& t = F.tensors().at(L.pre_quant_scale);
        std::uint64_t n = 1;
        for (auto d : t.shape) n *= d;
        if (n != L.cols || t.shape.size() != 1)
            C.fail(L.pre_quant_scale, "pre_quant_scale shape",
                   fmt::format("shape [{}]: AWQ's pre_quant_scale holds one factor per input channel, [{}] "
                               "(quant_utils.py get_prequant_scaling_factor)",
                               fmt::join(t.shape, ", "), L.cols));
    }
}

void modelopt_preset_note(const Folder& F, Findings& C) {
    if (F.producer() != Producer::modelopt || F.trtllm) return;
    std::vector<std::string> said;
    for (const auto& a : folder_algos(F)) {
        if (!nvfp4_family(a)) continue;
        if (a == "W4A16_NVFP4")
            said.push_back(
                "W4A16_NVFP4: NVFP4 weights only, no input_scale (W4A16_NVFP4_CFG; "
                "NVFP4_MLP_WEIGHT_ONLY_CFG in blocks of 32)");
        else if (a == "W4A8_NVFP4_FP8")
            said.push_back(
                "W4A8_NVFP4_FP8: NVFP4 weights in blocks of 32 with weight_scale_2 = amax / 448 "
                "(quant_utils.py get_weight_scaling_factor_2), FP8 per-tensor input_scale = amax / 448");
        else if (a == "NVFP4_AWQ")
            said.push_back(
                "NVFP4_AWQ: NVFP4 on the AWQ-smoothed weight, pre_quant_scale per input channel or folded "
                "into the layernorm (model_calib.py awq; unified_export_hf.py)");
        else if (a == "NVFP4_SVD")
            said.push_back(
                "NVFP4_SVD: NVFP4 on the AWQ-smoothed weight less its low-rank branch "
                "(model_calib.py svdquant; svdquant_lora_a / svdquant_lora_b)");
        else
            said.push_back(
                "NVFP4: weight_scale_2 = amax / 2688 over the fused group, block scales amax / (6 * weight_scale_2) "
                "(qtensor/nvfp4_tensor.py)");
    }
    if (!said.empty())
        C.note(F.dir(), "modelopt preset",
               fmt::format("{}{}", fmt::join(said, "; "),
                           F.kv_cache_algo.empty() ? "" : fmt::format("; KV cache {}", F.kv_cache_algo)));
}

void modelopt_companion_tensors(const Folder& F, Findings& C) {
    if (F.producer() != Producer::modelopt || F.trtllm) return;
    std::set<std::string> quantised;
    for (const auto& L : F.layers())
        if (L.scheme != Scheme::none) quantised.insert(L.module);
    for (const auto& [n, t] : F.tensors()) {
        for (const char* suffix : {".svdquant_lora_a", ".svdquant_lora_b", ".weight_quantizer.svdquant_lora_a",
                                   ".weight_quantizer.svdquant_lora_b"})
            if (ends_with(n, suffix))
                C.note(n, "svdquant low-rank",
                       fmt::format("SVDQuant's low-rank branch ({}; model_calib.py svdquant, unified_export_hf.py "
                                   "_promote_quantizer_tensors_to_module): a bfloat16 side path the engine adds to the "
                                   "NVFP4 GEMM, not quantised",
                                   ends_with(n, "lora_a") ? "A: [rank, in_features]" : "B: [out_features, rank]"));
        if (ends_with(n, ".pre_quant_scale") && !quantised.count(n.substr(0, n.size() - 16)))
            C.note(
                n, "pre_quant_scale",
                "AWQ's smoothing factor (input_quantizer._pre_quant_scale, quant_utils.py _KV_CACHE_REPLACEMENTS) of "
                "a module with no quantised weight here");
    }
}

std::string modelopt_not_replayable(const Folder& F, const Layer& L) {
    if (F.producer() != Producer::modelopt || L.scheme != Scheme::nvfp4) return "";
    const std::string a = upper(L.quant_algo);
    if (a == "NVFP4_AWQ")
        return "ModelOpt NVFP4_AWQ quantised the weight times 1 / pre_quant_scale computed in float32 (model_calib.py "
               "awq_lite / awq_clip; q/k/v and gate/up resmoothed at export, quant_utils.py "
               "preprocess_linear_fusion) and stores that factor only rounded to bfloat16 or folded into the "
               "layernorm: the smoothed weight is not in the files, so its codes are not compared";
    if (a == "NVFP4_SVD")
        return "ModelOpt NVFP4_SVD quantised the AWQ-smoothed weight less its float32 low-rank branch (model_calib.py "
               "svdquant); the files hold both only rounded to bfloat16, so its codes are not compared";
    return "";
}

}  // namespace fp8kit::checkpoint::detail
