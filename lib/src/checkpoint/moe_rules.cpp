// Mixture-of-experts rules (see moe_rules.hpp).
#include "checkpoint/moe_rules.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>
#include <regex>

#include <fmt/format.h>

namespace fp8kit::checkpoint::detail {
namespace {

// An expert's projection as every exporter here names it: <block>.experts.<e>.<proj>.
const std::regex& expert_re() {
    static const std::regex r(R"(^(.*\.experts\.)(\d+)\.([A-Za-z0-9_]+)$)");
    return r;
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, 4) == 0; }

}  // namespace

// ModelOpt 0.47:
//  - Dense linears reading one input share the weight amax of NVFP4's second level
//    (weight_scale_2), and of a one-element FP8_PB_WO block scale: q/k/v and gate/up
//    (modelopt/torch/export/quant_utils.py preprocess_linear_fusion, called from
//    unified_export_hf.py for the fused groups of layer_utils.py). FP8 per-tensor weight scales
//    stay per linear (only their input_scale is shared). W4A8's FP8-stage weight_scale_2 is
//    shared over the same groups (the same preprocess_linear_fusion).
//  - Fused experts (transformers 5 keeps gate_up_proj [E, 2I, H] as one 3-D parameter):
//    _QuantFusedExperts (modelopt/torch/quantization/plugins/huggingface.py) calibrates ONE
//    weight quantizer per expert over the whole fused gate_up slice, and _export_fused_experts
//    (modelopt/torch/export/moe_utils.py) deep-copies it for the gate and the up half, so the two
//    halves keep the fused amax: FP8 per-tensor weight_scale, NVFP4 weight_scale_2 and the
//    one-element FP8_PB_WO scale are shared by experts.<e>.gate_proj and experts.<e>.up_proj
//    (Mixtral: experts.<e>.w1 and experts.<e>.w3). An
//    expert that saw no calibration token gets the fused slice's amax too (same file: "derive
//    its amax once from the FUSED tensor so gate and up share the same weight_scale_2").
std::vector<std::string> modelopt_amax_group(const std::string& module, Scheme s) {
    std::smatch m;
    if (std::regex_match(module, m, expert_re())) {
        // Mixtral's experts are exported under its checkpoint names w1 (gate), w3 (up), w2 (down):
        // ModelOpt's export applies transformers' reverse conversion mapping.
        const std::string p = m[3].str();
        const bool gu = p == "gate_proj" || p == "up_proj", w13 = p == "w1" || p == "w3";
        // fp8_channel: the amax is shared row by row (check.cpp variants, sync_moe_gate_up_amax).
        if ((!gu && !w13) ||
            (s != Scheme::fp8_tensor && s != Scheme::nvfp4 && s != Scheme::fp8_block && s != Scheme::fp8_channel))
            return {};
        const std::string e = m[1].str() + m[2].str() + ".";
        return gu ? std::vector<std::string>{e + "gate_proj", e + "up_proj"}
                  : std::vector<std::string>{e + "w1", e + "w3"};
    }
    if (s != Scheme::nvfp4 && s != Scheme::fp8_block && s != Scheme::w4a8) return {};
    static const std::regex kFused(R"(^(.*\.)(q_proj|k_proj|v_proj|gate_proj|up_proj|w1|w3)$)");
    if (!std::regex_match(module, m, kFused)) return {};
    const std::string t = m[2].str(), b = m[1].str();
    if (t == "gate_proj" || t == "up_proj") return {b + "gate_proj", b + "up_proj"};
    if (t == "w1" || t == "w3") return {b + "w1", b + "w3"};
    return {b + "q_proj", b + "k_proj", b + "v_proj"};
}

// llm-compressor (modifiers/utils/helpers.py update_fused_layer_weight_global_scales, called for
// every submodule by QuantizationModifier before the weight qparams; modeling/fused_modules.py
// get_fused_attention_linears: q/k/v or MLA's q_a_proj + kv_a_proj_with_mqa; get_fused_mlp_linears:
// gate_proj + up_proj, Mixtral's expert w1 + w3) sets every member's weight_global_scale to the
// minimum over the members. That global is generate_gparam's bf16(2688 * bf16(1/amax)), which
// never rises with amax, so the minimum is the global of the group's largest amax (both the older
// helper, torch.min of the globals, and the current one). Only TENSOR_GROUP (NVFP4) layers.
std::vector<std::string> fused_amax_group(Producer p, const std::string& module, Scheme s) {
    if (p == Producer::modelopt) return modelopt_amax_group(module, s);
    if (p != Producer::compressed_tensors || s != Scheme::nvfp4) return {};
    static const std::regex kFused(
        R"(^(.*\.)(q_proj|k_proj|v_proj|q_a_proj|kv_a_proj_with_mqa|gate_proj|up_proj|w1|w3)$)");
    std::smatch m;
    if (!std::regex_match(module, m, kFused)) return {};
    const std::string t = m[2].str(), b = m[1].str();
    if (t == "gate_proj" || t == "up_proj") return {b + "gate_proj", b + "up_proj"};
    if (t == "w1" || t == "w3") return {b + "w1", b + "w3"};
    if (t == "q_a_proj" || t == "kv_a_proj_with_mqa") return {b + "q_a_proj", b + "kv_a_proj_with_mqa"};
    return {b + "q_proj", b + "k_proj", b + "v_proj"};
}

// Engines fuse an expert's gate and up into one w13 GEMM with one per-tensor scale per expert
// (vllm/model_executor/layers/quantization/fp8.py and modelopt.py, process_weights_after_loading):
// vLLM's FP8 MoE takes the larger of the two weight scales and re-quantises each half to it; its
// NVFP4 MoE keeps w13_weight_scale_2[:, 0], the gate's global scale, for both halves, warning
// "w1_weight_scale_2 must match w3_weight_scale_2. Accuracy may be affected." (so up_proj is
// dequantised with the gate's factor: llm-compressor equalises the two before export). For the
// input scales of one projection vLLM takes the largest over the experts ("Found input_scales
// that are not equal for fp8 MoE layer. Using the maximum across experts"). These are notes: the
// file holds what its producer wrote; the cost is at load time.
std::vector<Finding> expert_scale_notes(const Folder& F, const std::vector<Layer>& layers) {
    std::vector<Finding> out;
    std::map<std::string, std::map<std::string, float>> w13;    // "<block>.experts.<e>." -> proj -> scale
    bool global = false;                                        // NVFP4: the second-level scales
    std::map<std::string, std::map<std::string, float>> input;  // "<block>.experts.*.<proj>" -> expert -> input_scale
    auto one = [&](const std::string& n) {
        if (n.empty() || !F.has(n)) return NAN;
        std::uint64_t k = 1;
        for (auto d : F.tensors().at(n).shape) k *= d;
        return k == 1 ? F.read(n).at(0) : NAN;
    };
    for (const auto& L : layers) {
        std::smatch m;
        if (L.scheme == Scheme::none || !std::regex_match(L.module, m, expert_re())) continue;
        const std::string p = m[3].str();
        if (p == "gate_proj" || p == "up_proj" || p == "w1" || p == "w3") {
            const float s = L.scheme == Scheme::nvfp4        ? one(L.global_scale)
                            : L.scheme == Scheme::fp8_tensor ? one(L.scale)
                                                             : NAN;
            global = global || L.scheme == Scheme::nvfp4;
            if (s == s) w13[m[1].str() + m[2].str() + "."][p] = s;
        }
        const float i = one(L.input_scale);
        if (i == i) input[m[1].str() + "*." + p][m[2].str()] = i;
    }
    for (const auto& [e, ps] : w13) {
        if (ps.size() != 2) continue;
        const float a = ps.begin()->second, b = ps.rbegin()->second;
        if (!same_bits(a, b))
            out.push_back(
                {e + ps.begin()->first, "expert gate/up scales differ",
                 fmt::format(
                     "{} {} and {} {} {} differ: an engine fusing the two into one w13 GEMM keeps one "
                     "(vLLM: FP8 the larger, re-quantising; NVFP4 the gate's, up_proj then dequantised with it)",
                     ps.begin()->first, a, ps.rbegin()->first, b,
                     global ? "global scales" : "per-tensor weight scales"),
                 false});
    }
    for (const auto& [k, es] : input) {
        float lo = es.begin()->second, hi = lo;
        for (const auto& [x, v] : es) lo = std::min(lo, v), hi = std::max(hi, v);
        if (!same_bits(lo, hi))
            out.push_back(
                {k + ".input_scale", "expert input scales differ",
                 fmt::format("the {} experts' input_scale ranges over [{}, {}]: vLLM uses the largest for all",
                             es.size(), lo, hi),
                 false});
    }
    return out;
}

std::optional<RawTensor> stacked_reference(const Folder& ref, const Layer& L) {
    static const std::regex kStack(R"(^(.*\.experts)\.([A-Za-z0-9_]+)$)");
    std::smatch m;
    if (L.experts == 0 || !std::regex_match(L.module, m, kStack)) return std::nullopt;
    RawTensor out;
    for (std::uint64_t e = 0; e < L.experts; ++e) {
        const std::string n = fmt::format("{}.{}.{}.weight", m[1].str(), e, m[2].str());
        if (!ref.has(n)) return std::nullopt;
        RawTensor t = ref.read(n);
        if (e == 0) {
            out.dtype = t.dtype;
            out.shape = t.shape;
            out.shape.insert(out.shape.begin(), L.experts);
        } else if (t.dtype != out.dtype ||
                   t.shape != std::vector<std::uint64_t>(out.shape.begin() + 1, out.shape.end())) {
            return std::nullopt;
        }
        out.bytes.insert(out.bytes.end(), t.bytes.begin(), t.bytes.end());
    }
    return out;
}

}  // namespace fp8kit::checkpoint::detail
