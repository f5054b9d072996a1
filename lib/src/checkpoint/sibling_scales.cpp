// Scales ModelOpt writes alike on linears that read one input, and the ones it writes on every
// quantised linear: a checkpoint whose layers disagree here was changed after export.
#include "checkpoint/sibling_scales.hpp"

#include <map>
#include <regex>
#include <vector>

#include <fmt/format.h>

#include "checkpoint/findings.hpp"

namespace fp8kit::checkpoint::detail {
namespace {

struct Siblings : Findings {
    // ModelOpt exports an input_scale for every quantised linear whose input quantizer is static
    // and calibrated (unified_export_hf.py _export_quantized_weight: get_activation_scaling_factor),
    // and a SmoothQuant checkpoint a pre_quant_scale for every one of them (model_calib.py
    // smoothquant smooths every quantised linear it calibrated); so where the other quantised,
    // not excluded layers of the same scheme carry one, a layer without it lost it. Experts are
    // left to check.cpp (Checker::experts) and moe_rules.cpp.
    void modelopt_companions() {
        if (F.producer() != Producer::modelopt || F.trtllm) return;
        const bool sq = F.quant_algo.find("_SQ_") != std::string::npos;
        // Siblings share the scheme and the layer's quant_algo: under MIXED_PRECISION a weight-only
        // layer (W4A16_NVFP4, e.g. NVFP4_FP8_MHA_CONFIG's embedding) has no input_scale beside
        // NVFP4 layers that do (hf_quant_config quantized_layers).
        using Kind = std::pair<Scheme, std::string>;
        std::map<Kind, std::pair<int, int>> with;  // kind -> (input_scale, pre_quant_scale) count
        auto counted = [](const Layer& L) {
            return L.scheme != Scheme::none && !L.excluded && !L.experts &&
                   L.module.find(".experts.") == std::string::npos;
        };
        auto kind = [](const Layer& L) { return Kind{L.scheme, L.quant_algo}; };
        for (const auto& L : R.layers)
            if (counted(L))
                with[kind(L)].first += !L.input_scale.empty(), with[kind(L)].second += !L.pre_quant_scale.empty();
        for (const auto& L : R.layers) {
            if (!counted(L)) continue;
            const auto [in, pq] = with[kind(L)];
            if (L.input_scale.empty() && in > 0)
                fail(
                    L.module + ".input_scale", "missing input_scale",
                    fmt::format("{} other {} layers have an input_scale, this one none (ModelOpt exports one for every "
                                "statically quantised input: unified_export_hf.py)",
                                in, name(L.scheme)));
            if (sq && L.pre_quant_scale.empty() && pq > 0)
                fail(L.module + ".pre_quant_scale", "missing pre_quant_scale",
                     fmt::format("{} other layers have a pre_quant_scale, this one none (ModelOpt SmoothQuant smooths "
                                 "every quantised linear: model_calib.py smoothquant)",
                                 pq));
        }
    }

    // Linears that read one input tensor (q/k/v of an attention block, gate/up of an MLP) see the
    // same activations, so calibration gives them one input amax, and ModelOpt's HF export makes it
    // one where smoothing made them differ, averaging their smoothing factors too
    // (unified_export_hf.py _fuse_shared_input_modules -> quant_utils.py preprocess_linear_fusion:
    // input amax the max over the group, pre_quant_scale the mean, the weights resmoothed): their
    // input_scales, and pre_quant_scales where they keep them, are the same bytes. One that
    // differs was changed after export.
    void modelopt_shared_input_scales() {
        if (F.producer() != Producer::modelopt) return;
        std::map<std::string, std::vector<const Layer*>> groups;
        for (const auto& L : R.layers)
            if (L.scheme != Scheme::none && !L.excluded && !L.experts)
                if (const std::string g = shared_input_group(L.module, F.trtllm); !g.empty()) groups[g].push_back(&L);
        for (const auto& [g, members] : groups) {
            same_in_group(members, &Layer::input_scale, "shared input_scale");
            same_in_group(members, &Layer::pre_quant_scale, "shared pre_quant_scale");
        }
    }
    // The group of linears reading the same input that `module` belongs to ("" for none): HF
    // names q/k/v and gate/up; TensorRT-LLM names, whose qkv is one layer already, mlp.fc and
    // mlp.gate (layer_utils.py build_mlp_config: gate_proj and up_proj).
    static std::string shared_input_group(const std::string& module, bool trtllm) {
        static const std::regex kHf(R"(^(.*\.)(q_proj|k_proj|v_proj|gate_proj|up_proj)$)");
        static const std::regex kTrt(R"(^(transformer\.layers\.\d+\.mlp\.)(fc|gate)$)");
        std::smatch m;
        if (!std::regex_match(module, m, trtllm ? kTrt : kHf)) return "";
        const std::string t = m[2].str();
        return m[1].str() + (t == "q_proj" || t == "k_proj" || t == "v_proj" ? "q/k/v" : "gate/up");
    }
    // The members of one shared-input group that carry tensor `which` carry the same bytes.
    void same_in_group(const std::vector<const Layer*>& members, std::string Layer::*which, const char* check) {
        std::vector<const Layer*> with;
        for (const Layer* L : members)
            if (!(L->*which).empty()) with.push_back(L);
        if (with.size() < 2) return;
        std::vector<RawTensor> v;
        for (const Layer* L : with) v.push_back(F.read(L->*which));
        for (std::size_t i = 1; i < v.size(); ++i) {
            if (v[i].bytes == v[0].bytes && v[i].shape == v[0].shape) continue;
            // The odd one out: the first member, where the others agree without it.
            const bool first_odd = v.size() > 2 && v[1].bytes == v[2].bytes;
            const Layer* odd = first_odd ? with[0] : with[i];
            fail(odd->*which, check,
                 fmt::format("{} and {} read the same input but differ here (first elements {} and {}); ModelOpt "
                             "gives them one (quant_utils.py preprocess_linear_fusion)",
                             with[0]->module, with[i]->module, v[0].numel() ? v[0].at(0) : 0.0f,
                             v[i].numel() ? v[i].at(0) : 0.0f));
            return;
        }
    }
};

}  // namespace

void check_sibling_scales(const Folder& F, Report& R) {
    Siblings s{{F, R}};
    s.modelopt_companions();
    s.modelopt_shared_input_scales();
}

}  // namespace fp8kit::checkpoint::detail
