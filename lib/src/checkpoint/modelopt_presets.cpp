// ModelOpt 0.47's NVFP4-family presets as its HF export writes them (modelopt_presets.hpp).
#include "checkpoint/modelopt_presets.hpp"

#include <cmath>

#include <algorithm>
#include <cctype>
#include <set>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/producer_rules.hpp"
#include "convert/float_bits.hpp"
#include "fp8kit/io/printable.hpp"
#include "producers/modelopt_nvfp4.hpp"

namespace fp8kit::checkpoint::detail {
namespace {

bool has_suffix(const std::string& s, const std::string& t) {
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
    if (!q.is_object() || !q.contains("quantized_layers")) return out;
    // ModelOpt writes {module: {"quant_algo": ..., ["group_size": N]}} (unified_export_hf.py,
    // MIXED_PRECISION); anything else would leave layers checked under the wrong scheme.
    const nlohmann::json& layers = q["quantized_layers"];
    if (!layers.is_object())
        throw std::invalid_argument(
            fmt::format("quantized_layers is not an object of modules: a JSON {}", layers.type_name()));
    for (const auto& [m, v] : layers.items()) {
        const std::string where = fmt::format("quantized_layers[{}]", io::quoted(m, 200));
        if (!v.is_object() || !v.contains("quant_algo") || !v["quant_algo"].is_string())
            throw std::invalid_argument(where + ": no quant_algo string");
        std::uint64_t g = 0;
        if (v.contains("group_size")) {
            if (!v["group_size"].is_number_unsigned() || v["group_size"].get<std::uint64_t>() == 0)
                throw std::invalid_argument(where + ": group_size is not a whole number from 1");
            g = v["group_size"].get<std::uint64_t>();
        }
        out[m] = {v["quant_algo"].get<std::string>(), g};
    }
    return out;
}

bool modelopt_nvfp4_algo(const std::string& algo) { return nvfp4_family(algo); }

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

namespace {

// An activation-quantising algo's layer needs its input_scale; a weight-only one has none.
void input_scale_presence(const Layer& L, Findings& C) {
    if (modelopt_needs_input_scale(L) && L.input_scale.empty())
        C.fail(L.module + ".input_scale", "missing input_scale",
               fmt::format("quant_algo {} quantises this layer's input statically; ModelOpt writes its input_scale "
                           "(quant_utils.py get_activation_scaling_factor), the checkpoint has none",
                           L.quant_algo));
    if (upper(L.quant_algo) == "W4A16_NVFP4" && !L.input_scale.empty())
        C.note(L.input_scale, "weight-only input_scale",
               "W4A16_NVFP4 quantises weights only; ModelOpt writes no input_scale for it (its input quantizer is "
               "disabled, quant_utils.py get_quantization_format)");
}

// weight_scale_2 and input_scale: float32 (`.float()`), and 0-dim for a 2-D weight (the
// quantizer's per-tensor amax; quant_utils.py get_weight_scaling_factor_2,
// get_activation_scaling_factor).
void per_tensor_scale_form(const Folder& F, const Layer& L, Findings& C) {
    for (const std::string* n : {&L.global_scale, &L.input_scale}) {
        if (n->empty()) continue;
        const auto& t = F.tensors().at(*n);
        if (L.experts <= 1 && !t.shape.empty())
            C.fail(*n, "scale shape",
                   fmt::format("shape [{}]: ModelOpt's HF export writes this per-tensor scale 0-dim ([]), the "
                               "amax / divisor of quant_utils.py get_weight_scaling_factor_2 / "
                               "get_activation_scaling_factor",
                               fmt::join(t.shape, ", ")));
        if (t.dtype != "F32")
            C.fail(*n, "scale dtype",
                   fmt::format("dtype {}: ModelOpt writes this scale as float32 (quant_utils.py "
                               "get_weight_scaling_factor_2 / get_activation_scaling_factor: `.float()`)",
                               t.dtype));
    }
}

// SVDQuant keeps every pre_quant_scale (its kernel applies it: unified_export_hf.py
// requantize_resmooth_fused_llm_layers fuses none) and both low-rank factors.
void svdquant_tensors_present(const Folder& F, const Layer& L, Findings& C) {
    if (upper(L.quant_algo) != "NVFP4_SVD") return;
    const std::string q = L.module + ".weight_quantizer._svdquant_lora_";
    for (const std::string& n : {L.module + ".pre_quant_scale", q + "a", q + "b"})
        if (!F.has(n) && !(n != L.module + ".pre_quant_scale" && F.has(L.module + ".svdquant_lora_" + n.back())))
            C.fail(n, "missing svdquant tensor",
                   "quant_algo NVFP4_SVD: ModelOpt writes this tensor for every SVDQuant linear; the checkpoint has "
                   "none");
}

// AWQ's pre_quant_scale: one factor per input channel.
void pre_quant_scale_shape(const Folder& F, const Layer& L, Findings& C) {
    if (L.pre_quant_scale.empty()) return;
    const auto& t = F.tensors().at(L.pre_quant_scale);
    if (t.shape.size() != 1 || t.shape[0] != L.cols)
        C.fail(L.pre_quant_scale, "pre_quant_scale shape",
               fmt::format("shape [{}]: AWQ's pre_quant_scale holds one factor per input channel, [{}] "
                           "(quant_utils.py get_prequant_scaling_factor)",
                           fmt::join(t.shape, ", "), L.cols));
}

}  // namespace

void modelopt_nvfp4_companions(const Folder& F, const Layer& L, Findings& C) {
    if (F.producer() != Producer::modelopt || F.trtllm || L.scheme != Scheme::nvfp4) return;
    input_scale_presence(L, C);
    per_tensor_scale_form(F, L, C);
    svdquant_tensors_present(F, L, C);
    pre_quant_scale_shape(F, L, C);
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
                "(qtensor/nvfp4_tensor.py; the static presets' 4/6, clipped and searched scales where a layer's "
                "scales show them)");
    }
    if (!said.empty())
        C.note(F.dir(), "modelopt preset",
               fmt::format("{}{}", fmt::join(said, "; "),
                           F.kv_cache_algo.empty() ? "" : fmt::format("; KV cache {}", F.kv_cache_algo)));
}

namespace {

// SVDQuant's low-rank factor n of module m: named, and its shape checked against the layer's
// (A [rank, in_features], B [out_features, rank]).
void svdquant_factor(const Folder& F, const std::string& n, const std::string& m, bool a, Findings& C) {
    const auto& shape = F.tensors().at(n).shape;
    C.note(n, "svdquant low-rank",
           fmt::format("SVDQuant's low-rank factor {} (model_calib.py svdquant; the HF export keeps the weight "
                       "quantizer's buffer, unified_export_hf.py): a bfloat16 side path added to the NVFP4 GEMM, "
                       "not quantised",
                       a ? "A [rank, in_features]" : "B [out_features, rank]"));
    for (const auto& L : F.layers())
        if (L.module == m && L.scheme != Scheme::none &&
            (shape.size() != 2 || (a ? shape[1] != L.cols : shape[0] != L.rows)))
            C.fail(n, "svdquant shape",
                   fmt::format("shape [{}] for a {} x {} weight: {} holds {}", fmt::join(shape, ", "), L.rows, L.cols,
                               a ? "A" : "B", a ? "[rank, in_features]" : "[out_features, rank]"));
}

// ModelOpt's KV scales: float32 and 0-dim, the bmm quantizer's per-tensor amax / 448
// (quant_utils.py postprocess_state_dict: `value.float() / kv_cache_max_bound`).
void kv_scale_form(const std::string& n, const TensorRef& t, Findings& C) {
    if (!has_suffix(n, ".k_proj.k_scale") && !has_suffix(n, ".v_proj.v_scale")) return;
    if (t.dtype != "F32")
        C.fail(n, "scale dtype",
               fmt::format("dtype {}: ModelOpt writes its KV scales as float32 (quant_utils.py "
                           "postprocess_state_dict: amax.float() / 448)",
                           t.dtype));
    if (!t.shape.empty())
        C.fail(n, "scale shape",
               fmt::format("shape [{}]: ModelOpt writes its KV scales 0-dim (the bmm quantizer's per-tensor amax / "
                           "448, quant_utils.py postprocess_state_dict)",
                           fmt::join(t.shape, ", ")));
}

}  // namespace

void modelopt_companion_tensors(const Folder& F, Findings& C) {
    if (F.producer() != Producer::modelopt || F.trtllm) return;
    std::set<std::string> quantised;
    for (const auto& L : F.layers())
        if (L.scheme != Scheme::none) quantised.insert(L.module);
    // ModelOpt 0.47's transformers export writes `<m>.weight_quantizer._svdquant_lora_a`; its
    // diffusers export promotes them to `<m>.svdquant_lora_a`.
    for (const auto& [n, t] : F.tensors()) {
        for (const char* suffix : {".weight_quantizer._svdquant_lora_a", ".weight_quantizer._svdquant_lora_b",
                                   ".svdquant_lora_a", ".svdquant_lora_b"}) {
            const std::string sf = suffix;
            if (!has_suffix(n, sf)) continue;
            svdquant_factor(F, n, n.substr(0, n.size() - sf.size()), sf.back() == 'a', C);
            break;
        }
        kv_scale_form(n, t, C);
        if (has_suffix(n, ".pre_quant_scale") && !quantised.count(n.substr(0, n.size() - 16)))
            C.note(
                n, "pre_quant_scale",
                "AWQ's smoothing factor (input_quantizer._pre_quant_scale, quant_utils.py _KV_CACHE_REPLACEMENTS) of "
                "a module with no quantised weight here");
    }
}

void modelopt_unread_tensors(const Folder& F, Findings& C) {
    if (F.producer() != Producer::modelopt || F.trtllm) return;
    std::set<std::string> read;
    for (const auto& L : F.layers())
        for (const std::string* n : {&L.weight, &L.scale, &L.global_scale, &L.input_scale, &L.pre_quant_scale})
            if (!n->empty()) read.insert(*n);
    static const char* const kKnown[] = {".weight",          ".bias",           "k_scale",         "v_scale",
                                         "q_scale",          "kv_scale",        "prob_scale",      "k_bias",
                                         "v_bias",           "_zero_point",     "pre_quant_scale", "_svdquant_lora_a",
                                         "_svdquant_lora_b", "svdquant_lora_a", "svdquant_lora_b"};
    for (const auto& entry : F.tensors()) {
        const std::string& n = entry.first;  // a named reference: C++17 lambdas cannot capture a binding
        if (read.count(n) ||
            std::any_of(std::begin(kKnown), std::end(kKnown), [&](const char* k) { return has_suffix(n, k); }))
            continue;
        const bool quantizer = n.find("_quantizer.") != std::string::npos;
        C.note(n, "unread tensor",
               quantizer ? "a quantizer's buffer, which ModelOpt's HF export strips (quant_utils.py "
                           "postprocess_state_dict: _amax, _bias_value, output_quantizer)"
                         : "no layer of this checkpoint reads it: ModelOpt's HF export writes it only beside a "
                           "quantised weight (weight_scale, weight_scale_2, input_scale) and KV scales beside "
                           "k_proj / v_proj");
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

namespace {

// Each block's amax (max |x| over its elements), row-major over the block grid.
std::vector<float> block_amaxes(const Layer& L, const std::vector<float>& x, const Scales& st) {
    std::vector<float> a(st.grid_rows * st.grid_cols, 0.0f);
    for (std::uint64_t r = 0; r < L.rows; ++r)
        for (std::uint64_t c = 0; c < L.cols; ++c) {
            float& m = a[(r / st.block_rows) * st.grid_cols + c / st.block_cols];
            m = std::max(m, std::fabs(x[r * L.cols + c]));
        }
    return a;
}

float e4m3_block_scale(float v) { return decode_element(Scheme::fp8_tensor, producers::modelopt_e4m3_block_code(v)); }

// torch divides a tensor by a Python number on CUDA as a multiply by its float32 reciprocal.
float by_number(float a, float b, bool cuda) { return cuda ? a * (1.0f / b) : a / b; }

// NVFP4_FOUR_OVER_SIX_CFG's static export: per_block_amax / 6, 0 -> 1.0, then
// `per_block_scale.float() * 256 / (global_amax / 6)`, clamped and cast to E4M3.
bool four_over_six(const std::vector<float>& bamax, float amax, const Scales& st, bool cuda) {
    if (st.global != by_number(amax, 1536.0f, cuda)) return false;
    const float psm = by_number(amax, 6.0f, cuda);
    for (std::size_t i = 0; i < bamax.size(); ++i) {
        bool one = false;
        for (const float m : {1.0f, 1.5f}) {
            float ps = by_number(bamax[i] * m, 6.0f, cuda);
            if (ps == 0.0f) ps = 1.0f;
            one = one || e4m3_block_scale(ps * 256.0f / psm) == st.block[i];
        }
        if (!one) return false;
    }
    return true;
}

// awq_clip's NVFP4 weight_scale_2: fl32(amax_m * shrink, rounded to the weight's dtype) / 2688 for
// a member m and a shrink of its grid (model_calib.py awq_clip: `round(float(k), 2) for k in
// torch.arange(min_clip_ratio, 1.0, shrink_step)` + [1.0]; `w_amax * shrink` in the weight's dtype).
bool clipped_amax(const std::vector<float>& member_amax, const std::string& weight_dtype, float global) {
    if (weight_dtype != "BF16" && weight_dtype != "F32") return false;
    for (const float m : member_amax)
        for (int k = 10; k <= 20; ++k) {
            const float shrink = k == 20 ? 1.0f : static_cast<float>(k * 5 / 100.0);
            float c = m * shrink;
            if (weight_dtype == "BF16") c = fp8kit::detail::round_to_bf16(c);
            if (global == c / 2688.0f || global == c * (1.0f / 2688.0f)) return true;
        }
    return false;
}

}  // namespace

void modelopt_max_code_rule(const Folder& F, const Layer& L, const Scales& st, Findings& C) {
    if (modelopt_not_replayable(F, L).empty()) return;
    const RawTensor w = F.read(L.weight);
    if (w.dtype != "U8" || w.bytes.size() * 2 != L.rows * L.cols) return;
    std::vector<std::uint8_t> top(st.block.size(), 0);  // largest code magnitude per block
    for (std::uint64_t i = 0; i < L.rows * L.cols; ++i) {
        const std::uint8_t code = (i % 2 ? w.bytes[i / 2] >> 4 : w.bytes[i / 2]) & 0x7;
        const std::uint64_t r = i / L.cols, c = i % L.cols;
        std::uint8_t& t = top[(r / st.block_rows) * st.grid_cols + c / st.block_cols];
        t = std::max(t, code);
    }
    std::uint64_t short_of_6 = 0, first = 0;
    for (std::size_t b = 0; b < top.size(); ++b)
        if (top[b] != 0 && top[b] != 7 && st.block[b] >= 0.015625f && st.block[b] < 448.0f && !short_of_6++) first = b;
    if (short_of_6)
        C.fail(
            L.weight, "max code",
            fmt::format("{} blocks with nonzero codes reach no +-6 under a normal E4M3 scale below 448 (first: block "
                        "{}, row {}): ModelOpt's max rule puts a 6 in each (nvfp4_tensor.py "
                        "get_weights_scaling_factor); a code was changed",
                        short_of_6, first, first / st.grid_cols));
}

SearchedScales modelopt_searched_scales(const Layer& L, const std::vector<float>& x,
                                        const std::vector<float>& member_amax, const std::string& weight_dtype,
                                        const Scales& st) {
    SearchedScales out;
    float amax = 0;
    for (const float m : member_amax) amax = std::max(amax, m);
    if (L.scheme != Scheme::nvfp4 || !(amax > 0.0f) || !(st.global > 0.0f)) return out;
    const auto bamax = block_amaxes(L, x, st);
    if (bamax.size() != st.block.size()) return out;
    for (std::size_t i = 0; i < bamax.size(); ++i)
        out.blocks_off_max_rule += decode_element(Scheme::fp8_tensor, producers::modelopt_nvfp4_block_code(
                                                                          bamax[i], st.global)) != st.block[i];
    if (four_over_six(bamax, amax, st, false) || four_over_six(bamax, amax, st, true)) {
        out.rule = "4/6 block scales (NVFP4_FOUR_OVER_SIX_CFG)";
        out.replayed = true;
        return out;
    }
    const bool max_global = st.global == producers::modelopt_nvfp4_scale_2(amax, false) ||
                            st.global == producers::modelopt_nvfp4_scale_2(amax, true);
    if (!max_global && clipped_amax(member_amax, weight_dtype, st.global) && out.blocks_off_max_rule == 0) {
        out.rule = "clipped amax (NVFP4_AWQ_CLIP_CFG)";
        out.replayed = true;
        return out;
    }
    if (max_global && out.blocks_off_max_rule >= std::max<std::uint64_t>(2, bamax.size() / 100))
        out.rule = "searched block amax (NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG / NVFP4_W4A4_WEIGHT_LOCAL_HESSIAN_CFG)";
    return out;
}

}  // namespace fp8kit::checkpoint::detail
