// KV / attention scale names and what three serving engines do with each (issue 28 item 2), for
// Llama-style models (attention under "<layer>.self_attn"). Each rule is transcribed from the
// engine's loader; the stored versions read are named with their commit where they differ.
//
// vLLM   (current main: vllm/model_executor/model_loader/weight_utils.py maybe_remap_kv_scale_name
//        as rendered at docs.vllm.ai/en/latest/api/vllm/model_executor/model_loader/weight_utils/,
//        fetched 2026-05-07; the repository snapshot was too large to fetch, so no commit): called
//        from models/llama.py LlamaModel.load_weights for every name holding "scale" or
//        "zero_point". ".kv_scale" -> ".attn.k_scale"; a name ending in .{k,v,q}_scale,
//        .{k,v,q}_zero_point, .q.scale or .{k,v}_cache.scale is rewritten by the first matching
//        pattern of scale_mapping_patterns: .self_attn.{k,v}_proj.{k,v}_scale -> .self_attn.attn.
//        {k,v}_scale; .self_attn.qkv_proj.{k,v}_scale and .self_attn.qkqkv_proj.{k,v}_scale ->
//        .self_attn.attn.{k,v}_scale; .mixer.{k,v}_proj.{k,v}_scale -> .mixer.attn.{k,v}_scale;
//        .self_attn.q.scale -> .self_attn.attn.q_scale; .self_attn.{k,v}_cache.scale ->
//        .self_attn.attn.{k,v}_scale; .{q,k,v}_scale -> .attn.{q,k,v}_scale; .{q,k,v}_zero_point ->
//        .attn.{q,k,v}_zero_point. A rewritten name that is no parameter: a warning, not loaded.
//        Parameters (layers/quantization/kv_cache.py BaseKVCacheMethod.create_weights): <attn>.attn.
//        {q,k,v,prob}_scale, scalars (torch.tensor(-1.0)); compressed-tensors adds {q,k,v}_zero_point
//        and, under kv_cache_scheme strategy "attn_head", makes q/k/v scales [num_kv_heads]
//        (compressed_tensors.py CompressedTensorsKVCacheMethod.create_weights, which asserts
//        layer.impl.supports_per_head_quant_scales). A name not rewritten reaches the stacked
//        ".{q,k,v}_proj" -> ".qkv_proj" rename and params_dict[name]: KeyError when no parameter.
//        So q_scale is loaded as <attn>.attn.q_scale (older vLLM, e.g. stored 0a1ee72e, remapped
//        only .kv_scale/.k_scale/.v_scale and left q_scale to the KeyError), prob_scale is never
//        rewritten (KeyError). Missing scales (kv_cache.py process_weights_after_loading, stored
//        0531c222): both missing -> 1.0; only k -> v = k; only v -> `assert layer.k_scale > 0.0`.
//        A scale of more than one element into a scalar parameter: weight_utils.py
//        default_weight_loader `assert param.size() == loaded_weight.size()` (and kv_cache.py:
//        "Only support per-tensor scaling factor for fp8 KV cache").
// SGLang python/sglang/srt/model_loader/weight_utils.py maybe_remap_kv_scale_name (stored
//        00b08c49; older versions, e.g. 57003bea, lack the ModelOpt branch): the same remapping as
//        vLLM's, called from python/sglang/srt/models/llama.py LlamaForCausalLM.load_weights for
//        every name holding "scale"; then stacked_params_mapping renames ".q_proj"/".k_proj"/
//        ".v_proj" -> ".qkv_proj", ".gate_proj"/".up_proj" -> ".gate_up_proj" and indexes
//        params_dict[name] (KeyError when absent, unless the name ends in ".bias"); a name outside
//        the stacked mapping and not a parameter: logger.warning "Parameter ... not found", skipped.
//        The attention holds only k_scale and v_scale (python/sglang/srt/layers/quantization/
//        kv_cache.py BaseKVCacheMethod.create_weights, -1.0 until loaded), so q_scale and
//        prob_scale are never loaded; missing scales as vLLM's (process_weights_after_loading:
//        both -> 1.0, only k -> v = k, only v -> assert fails). The parameters are scalars
//        (torch.tensor(-1.0)); a scale of more than one element fails weight_utils.py
//        default_weight_loader's `assert param.size() == loaded_weight.size()` (stored 00b08c49).
// TensorRT-LLM (PyTorch backend) tensorrt_llm/_torch/models/modeling_utils.py _load_weights_impl
//        hands each module the tensors under its own prefix (filter_weights), the fused qkv_proj
//        those of "<attn>.q_proj", ".k_proj", ".v_proj"; tensorrt_llm/_torch/modules/linear.py
//        load_kv_scales (FP8QDQLinearMethod and NVFP4LinearMethod; UnquantizedLinearMethod reads
//        none) takes only the keys "k_scale" and "v_scale" there, and
//        process_weights_after_loading_fused_qkv_linear (NVFP4: load_weights_fused_qkv_linear)
//        sets qkv_proj.kv_scales = [1, max k, max v] (`assert v_scales, "k_scale and v_scale
//        must be loaded together"`; TRTLLM_LOAD_KV_SCALES=0 skips it); these are used
//        only for an NVFP4 KV cache (tensorrt_llm/_torch/modules/attention.py: has_fp4_kv_cache).
//        An FP8 KV cache keeps kv_cache_scaling_factor = 1.0 (tensorrt_llm/_torch/
//        attention_backend/trtllm.py TrtllmAttention: "Stay at 1.0 (no-op) for the PyTorch
//        backend, which never overrides them"). Any other name is never read: dropped silently.
//        load_kv_scales (FP8QDQLinearMethod, stored 00bbf71e, called from
//        load_weights_fused_qkv_linear whatever the KV cache) takes each as
//        `w["k_scale"][...].reshape([])`: a scale of more than one element raises there. The
//        "max" is over the k_scales of q/k/v_proj, each one value, not over heads.
// Affine KV (ModelOpt FP8_AFFINE_KV_CFG / NVFP4_AFFINE_KV_CFG): modelopt/torch/export/
//        quant_utils.py _KV_CACHE_REPLACEMENTS writes k_bmm_quantizer._bias_value as
//        "k_proj.k_bias" (v likewise); the bias is a per (KV head, channel) mean, reduced over the
//        batch and sequence axes with keepdim (quant_utils kv_fp8_affine bias axes -2, -4;
//        modelopt/torch/quantization/calib/bias.py compute_mean_bias): num_kv_heads * head_dim
//        elements, the k_proj / v_proj output rows.
#include "checkpoint/findings.hpp"
#include "checkpoint/kv_names.hpp"

#include <cmath>
#include <map>
#include <regex>

#include <fmt/format.h>

namespace fp8kit::checkpoint {

const char* name(KvFate f) {
    switch (f) {
        case KvFate::loaded: return "loaded";
        case KvFate::renamed: return "renamed";
        case KvFate::replaced: return "replaced";
        case KvFate::dropped: return "dropped";
        case KvFate::rejected: return "rejected";
        default: return "undetermined";
    }
}

namespace detail {
namespace {

bool ends_with(const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}
bool contains(const std::string& s, const std::string& t) { return s.find(t) != std::string::npos; }
// Python's str.replace: every occurrence.
std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
        s.replace(p, from.size(), to);
    return s;
}

// maybe_remap_kv_scale_name as vLLM and SGLang (00b08c49) write it: the remapped name, or the
// name unchanged when it ends in none of the suffixes. The caller checks the parameter exists.
std::string remap_kv_scale_name(const std::string& n) {
    if (ends_with(n, ".kv_scale")) return replace_all(n, ".kv_scale", ".attn.k_scale");
    for (const std::string s : {".k_scale", ".v_scale"}) {
        if (!ends_with(n, s)) continue;
        if (contains(n, ".self_attn.k_proj.k_scale") || contains(n, ".self_attn.v_proj.v_scale"))
            return replace_all(n, ".self_attn." + s.substr(1, 1) + "_proj" + s, ".self_attn.attn" + s);
        return replace_all(n, s, ".attn" + s);
    }
    return n;
}

bool is_bias(const std::string& suf) { return suf == "k_bias" || suf == "v_bias"; }
// A K or V cache scale under any of the names the engines know (q, prob and zero points are not).
bool is_kv_scale(const std::string& suf) {
    for (const char* k :
         {"k_scale", "v_scale", "kv_scale", "k_cache_scale", "v_cache_scale", "k_cache.scale", "v_cache.scale",
          "kv_cache_scaling_factor", "k_cache_scaling_factor", "v_cache_scaling_factor"})
        if (suf == k) return true;
    return false;
}

// vLLM's current maybe_remap_kv_scale_name (see the top): {rewritten?, name}. No MLA ("mla_attn"
// parameters) in the Llama-style models checked here, so attn_str is "attn".
std::pair<bool, std::string> vllm_remap(const std::string& n) {
    if (ends_with(n, ".kv_scale")) return {true, replace_all(n, ".kv_scale", ".attn.k_scale")};
    bool listed = false;
    for (const char* s : {".k_scale", ".v_scale", ".q_scale", ".k_zero_point", ".v_zero_point", ".q_zero_point",
                          ".q.scale", ".k_cache.scale", ".v_cache.scale"})
        listed = listed || ends_with(n, s);
    if (!listed) return {false, n};
    static const std::pair<std::regex, const char*> kPatterns[] = {
        {std::regex(R"(\.self_attn\.([kv])_proj\.([kv])_scale$)"), ".self_attn.attn.$2_scale"},
        {std::regex(R"(\.self_attn\.qkv_proj\.([kv])_scale$)"), ".self_attn.attn.$1_scale"},
        {std::regex(R"(\.self_attn\.qkqkv_proj\.([kv])_scale$)"), ".self_attn.attn.$1_scale"},
        {std::regex(R"(\.mixer\.[kv]_proj\.([kv])_scale$)"), ".mixer.attn.$1_scale"},
        {std::regex(R"(\.self_attn\.q\.scale$)"), ".self_attn.attn.q_scale"},
        {std::regex(R"(\.self_attn\.([kv])_cache\.scale$)"), ".self_attn.attn.$1_scale"},
        {std::regex(R"(\.([qkv])_scale$)"), ".attn.$1_scale"},
        {std::regex(R"(\.([qkv])_zero_point$)"), ".attn.$1_zero_point"},
    };
    for (const auto& [re, rep] : kPatterns)
        if (std::regex_search(n, re)) return {true, std::regex_replace(n, re, rep)};
    return {false, n};
}

// The attention parameters vLLM creates (kv_cache.py; zero points only under compressed-tensors).
bool vllm_param(const Folder& F, const std::string& n) {
    static const std::regex kScale(R"(^.*\.self_attn\.attn\.(q|k|v|prob)_scale$)");
    static const std::regex kZero(R"(^.*\.self_attn\.attn\.(q|k|v)_zero_point$)");
    return std::regex_match(n, kScale) || (F.producer() == Producer::compressed_tensors && std::regex_match(n, kZero));
}

KvOutcome vllm(const Folder& F, const std::string& n) {
    const auto [rewritten, name] =
        contains(n, "scale") || contains(n, "zero_point") ? vllm_remap(n) : std::pair<bool, std::string>{false, n};
    if (rewritten) {
        if (vllm_param(F, name))
            return {KvFate::renamed,
                    "loaded as " + name + (ends_with(n, ".kv_scale") ? " (and copied to v_scale)" : "")};
        return {KvFate::dropped,
                fmt::format("dropped: remapped to '{}', which is no parameter (maybe_remap_kv_scale_name: a warning, "
                            "not loaded; the scale stays at its default)",
                            name)};
    }
    // llama.py LlamaModel.load_weights: the stacked rename, then params_dict[name].
    for (const char* w : {".q_proj", ".k_proj", ".v_proj", ".gate_proj", ".up_proj"}) {
        if (!contains(name, w)) continue;
        const std::string stacked = replace_all(
            name, w, std::string(w) == ".gate_proj" || std::string(w) == ".up_proj" ? ".gate_up_proj" : ".qkv_proj");
        if (ends_with(stacked, ".bias"))
            return {KvFate::dropped,
                    "dropped silently: renamed to '" + stacked + "', an extra bias (load_weights skips it)"};
        return {KvFate::rejected, fmt::format("load fails: '{}' is no parameter (params_dict[name] raises KeyError, "
                                              "models/llama.py LlamaModel.load_weights)",
                                              stacked)};
    }
    if (vllm_param(F, name)) return {KvFate::loaded, "loaded as " + name};
    return {KvFate::rejected,
            fmt::format("load fails: '{}' is not rewritten by maybe_remap_kv_scale_name and is no parameter "
                        "(params_dict[name] raises KeyError, models/llama.py LlamaModel.load_weights)",
                        name)};
}

KvOutcome sglang(const std::string& n) {
    static const std::regex kParam(R"(^.*\.self_attn\.attn\.(k|v)_scale$)");
    std::string name = n;
    if (contains(name, "scale")) {
        name = remap_kv_scale_name(n);
        if (name != n && !std::regex_match(name, kParam))
            return {KvFate::dropped,
                    fmt::format("dropped: remapped to '{}', which is no parameter (maybe_remap_kv_scale_name: "
                                "a warning, not loaded)",
                                name)};
    }
    static const std::pair<const char*, const char*> kStacked[] = {{".q_proj", ".qkv_proj"},
                                                                   {".k_proj", ".qkv_proj"},
                                                                   {".v_proj", ".qkv_proj"},
                                                                   {".gate_proj", ".gate_up_proj"},
                                                                   {".up_proj", ".gate_up_proj"}};
    for (const auto& [w, p] : kStacked) {
        if (!contains(name, w)) continue;
        const std::string stacked = replace_all(name, w, p);
        if (std::regex_match(stacked, kParam)) return {KvFate::renamed, "loaded as " + stacked};
        if (ends_with(stacked, ".bias"))
            return {KvFate::dropped,
                    "dropped silently: renamed to '" + stacked + "', an extra bias (load_weights skips it)"};
        return {KvFate::rejected,
                fmt::format("load fails: renamed to '{}' by stacked_params_mapping, no such parameter "
                            "(params_dict[name] raises KeyError, llama.py load_weights)",
                            stacked)};
    }
    if (std::regex_match(name, kParam))
        return {name == n ? KvFate::loaded : KvFate::renamed,
                "loaded as " + name + (ends_with(n, ".kv_scale") ? " (and copied to v_scale by kv_cache.py)" : "")};
    return {KvFate::dropped, "dropped: no parameter '" + name +
                                 "' (llama.py load_weights: warning 'Parameter ... not found in params_dict')"};
}

bool nvfp4_kv(const Folder& F) {
    return F.kv_cache_algo.rfind("NVFP4", 0) == 0 || F.kv_cache_algo.rfind("nvfp4", 0) == 0;
}

KvOutcome trtllm(const Folder& F, const std::string& n) {
    static const std::regex kRead(R"(^.*\.self_attn\.(q|k|v)_proj\.(k|v)_scale$)");
    const bool read = std::regex_match(n, kRead);
    if (!read)
        return {KvFate::dropped,
                "dropped silently: never read (modeling_utils.py _load_weights_impl hands qkv_proj only "
                "'<attn>.{q,k,v}_proj.*'; linear.py load_kv_scales reads only 'k_scale' / 'v_scale' there)"};
    if (F.kv_cache_algo == "NVFP4_AFFINE")
        return {KvFate::undetermined,
                "not determined: read into qkv_proj.kv_scales (linear.py load_kv_scales), but whether "
                "TensorRT-LLM accepts kv_cache_quant_algo NVFP4_AFFINE is not in the transcribed source"};
    if (!nvfp4_kv(F))
        return {KvFate::replaced,
                fmt::format(
                    "replaced by 1.0: read into qkv_proj.kv_scales (linear.py load_kv_scales), used only for an "
                    "NVFP4 KV cache; the {} KV cache keeps kv_cache_scaling_factor = 1.0 (attention_backend/trtllm.py)",
                    F.kv_cache_algo.empty() ? "FP8 (assumed: none declared)" : F.kv_cache_algo)};
    return {KvFate::renamed,
            "loaded into qkv_proj.kv_scales = [1, max k_scale, max v_scale] of the layer (linear.py "
            "process_weights_after_loading_fused_qkv_linear)"};
}

struct Names : Findings {
    float max_value(const std::string& n) {
        const RawTensor t = F.read(n);
        float m = 0;
        for (std::uint64_t i = 0; i < t.numel(); ++i) m = std::max(m, std::fabs(t.at(i)));
        return m;
    }

    // A scale of more than one element (one per KV head, as llm-compressor's strategy "attn_head"
    // writes it): what each engine that would load it does instead. No engine takes the max over
    // heads; each rejects it at load, except vLLM under a compressed-tensors attn_head scheme,
    // whose parameters are per head. `spread` is min/max over the values (how far one scale is
    // from the per-head ones).
    void per_head(KvScale& k, const std::string& suf) {
        const RawTensor t = F.read(k.name);
        const std::uint64_t n = t.numel();
        if (n <= 1 || is_bias(suf)) return;
        float lo = INFINITY, hi = 0;
        for (std::uint64_t i = 0; i < n; ++i)
            lo = std::min(lo, std::fabs(t.at(i))), hi = std::max(hi, std::fabs(t.at(i)));
        const std::string spread =
            fmt::format("a per-head scale of {} values (min/max {:.4g})", n, hi > 0 ? lo / hi : 0.0f);
        auto reaches = [](KvFate f) { return f == KvFate::loaded || f == KvFate::renamed; };
        KvOutcome& v = k.engines[0];
        const bool head_param =
            F.producer() == Producer::compressed_tensors && F.kv_cache_strategy == "attn_head" && suf != "prob_scale";
        if (reaches(v.fate) && head_param)
            v.detail += fmt::format(
                ", {} (compressed_tensors.py CompressedTensorsKVCacheMethod.create_weights makes it "
                "[num_kv_heads] under strategy attn_head, on backends with supports_per_head_quant_scales)",
                spread);
        else if (reaches(v.fate))
            v = {KvFate::rejected,
                 fmt::format("load fails: {} into the scalar parameter (weight_utils.py default_weight_loader: "
                             "assert param.size() == loaded_weight.size(); kv_cache.py: 'Only support per-tensor "
                             "scaling factor')",
                             spread)};
        if (reaches(k.engines[1].fate))
            k.engines[1] = {KvFate::rejected,
                            fmt::format("load fails: {} into the scalar parameter (weight_utils.py "
                                        "default_weight_loader: assert param.size() == loaded_weight.size())",
                                        spread)};
        if (k.engines[2].fate != KvFate::dropped)  // read by load_kv_scales
            k.engines[2] = {KvFate::rejected,
                            fmt::format("load fails: {}; linear.py load_kv_scales takes w[\"{}\"][...].reshape([]), "
                                        "a RuntimeError for more than one element",
                                        spread, suf)};
    }

    // The findings of one name under one engine's outcome (severity as for vLLM before: a k/v
    // scale an engine does not use is a failure; q_scale / prob_scale only notes).
    void judge(const KvScale& k, const std::string& suf, int e) {
        // What engine e does is a failure only when the check targets e (CheckOptions::engine).
        // A TensorRT-LLM checkpoint is for TensorRT-LLM whatever engine the check names.
        const bool target = R.engine == kEngineKeys[e] || R.engine == "all" || (F.trtllm && e == 2);
        auto fail = [&](const std::string& t, const std::string& c, const std::string& m) {
            if (target) return this->fail(t, c, m);
            this->note(t, c, m + fmt::format(" (a failure under --engine {})", kEngineKeys[e]));
        };
        const KvOutcome& o = k.engines[e];
        const std::string msg = fmt::format("{} {}", kKvEngines[e], o.detail);
        std::uint64_t numel = 1;
        for (auto d : k.shape) numel *= d;
        if (numel > 1 && !is_bias(suf) &&
            (o.fate == KvFate::rejected || o.fate == KvFate::renamed || o.fate == KvFate::loaded))
            return o.fate == KvFate::rejected ? fail(k.name, "kv scale per-head", msg)
                                              : note(k.name, "kv scale per-head", msg);
        if (o.fate == KvFate::rejected)
            return fail(k.name,
                        is_bias(suf)       ? "kv bias rejected"
                        : is_kv_scale(suf) ? "kv scale rejected"
                                           : "attention scale rejected",
                        msg);
        if (is_bias(suf)) {
            if (o.fate == KvFate::dropped)
                fail(k.name, "kv bias ignored", msg + "; the affine offset is not applied");
            else if (o.fate == KvFate::undetermined)
                note(k.name, "kv bias", msg);
            return;
        }
        if (!is_kv_scale(suf)) {
            if (o.fate == KvFate::dropped || o.fate == KvFate::replaced)
                note(k.name, "attention scale not loaded", msg);
            return;
        }
        if (o.fate == KvFate::dropped) return fail(k.name, "kv scale dropped", msg);
        if (o.fate == KvFate::undetermined) return note(k.name, "kv scale undetermined", msg);
        if (o.fate == KvFate::replaced) {
            const float v = max_value(k.name);
            if (v > 1.0f)
                fail(k.name, "kv scale replaced",
                     fmt::format("{}; the checkpoint's {} > 1: K/V beyond 448 saturate", msg, v));
            else if (v != 1.0f)
                note(k.name, "kv scale replaced", fmt::format("{} (the checkpoint's {})", msg, v));
        }
    }

    void bias_values(const std::string& n, const std::string& suf, const std::string& prefix) {
        const auto& t = F.tensors().at(n);
        if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16")
            return fail(
                n, "kv bias",
                fmt::format("dtype {} (ModelOpt writes the K/V activations' float dtype: F32, BF16 or F16)", t.dtype));
        std::uint64_t numel = 1;
        for (auto d : t.shape) numel *= d;
        // The bias sits on its projection ("<attn>.k_proj.k_bias", as ModelOpt writes it) or on the attention.
        const std::string proj = ends_with(prefix, "_proj") ? prefix : prefix + "." + suf.substr(0, 1) + "_proj";
        for (const std::string w : {".weight", ".weight_packed"})
            if (F.has(proj + w) && !F.tensors().at(proj + w).shape.empty() &&
                F.tensors().at(proj + w).shape[0] != numel)
                fail(n, "kv bias",
                     fmt::format("{} elements; {} has {} output rows (one bias per KV head and channel)", numel,
                                 proj + w, F.tensors().at(proj + w).shape[0]));
        const RawTensor v = F.read(n);
        std::uint64_t bad = 0;
        std::string first;
        for (std::uint64_t i = 0; i < v.numel(); ++i)
            if (!std::isfinite(v.at(i)) && !bad++) first = fmt::format("[{}] = {}", i, v.at(i));
        if (bad)
            fail(n, "kv bias finite",
                 fmt::format("{} of {} bias values are NaN or infinite (first: {})", bad, v.numel(), first));
        const std::string scale = prefix + "." + suf.substr(0, 1) + "_scale";
        if (!F.has(scale)) fail(n, "kv bias", "affine bias without its scale '" + scale + "'");
        // ModelOpt's affine presets put a bias on both the k and the v bmm quantizer.
        const std::string o = suf[0] == 'k' ? "v" : "k";
        const std::string attn = ends_with(prefix, "_proj") ? prefix.substr(0, prefix.rfind('.')) : prefix;
        if (!F.has(attn + "." + o + "_proj." + o + "_bias") && !F.has(attn + "." + o + "_bias"))
            fail(n, "kv bias", fmt::format("{} without {}_bias: ModelOpt's affine KV presets write both", suf, o));
    }

    // Every element of a KV / attention scale: finite and positive. No producer writes another:
    // llm-compressor's KV observer stores max(|min|, |max|) / 448 of the calibrated K/V, with a
    // zero scale replaced by the dtype's eps (compressed-tensors quantization/utils/helpers.py
    // calculate_qparams), ModelOpt amax / 448 (unified_export_hf.py postprocess_state_dict); the
    // engines divide by it (vLLM kv_cache.py process_weights_after_loading asserts k_scale > 0).
    void scale_values(const std::string& n) {
        const auto& t = F.tensors().at(n);
        if (t.dtype != "F32" && t.dtype != "BF16" && t.dtype != "F16") return;
        const RawTensor v = F.read(n);
        std::uint64_t bad = 0;
        std::string first;
        for (std::uint64_t i = 0; i < v.numel(); ++i)
            if (!(std::isfinite(v.at(i)) && v.at(i) > 0.0f) && !bad++) first = fmt::format("[{}] = {}", i, v.at(i));
        if (bad)
            fail(n, "kv scale value",
                 fmt::format("{} of {} values are not finite and positive (first: {}); no producer writes such a "
                             "scale, and the engines divide by it",
                             bad, v.numel(), first));
    }

    // fn(name, prefix, suffix, k) for every tensor whose name `re` matches as (prefix).(suffix),
    // with k begun (name, dtype, shape); k goes to the report after fn.
    template <class Fn>
    void each_kv_name(const std::regex& re, Fn&& fn) {
        for (const auto& [n, t] : F.tensors()) {
            std::smatch m;
            if (!std::regex_match(n, m, re)) continue;
            KvScale k;
            k.name = n, k.dtype = t.dtype, k.shape = t.shape;
            fn(n, m[1].str(), m[2].str(), k);
            R.kv.push_back(std::move(k));
        }
    }

    void found() {
        static const std::regex kKv(
            R"(^(.*)\.(k_scale|v_scale|q_scale|kv_scale|k_bias|v_bias|prob_scale|k_cache_scale|v_cache_scale|q\.scale|k_cache\.scale|)"
            R"(v_cache\.scale|q_zero_point|k_zero_point|v_zero_point)$)");
        each_kv_name(kKv, [&](const std::string& n, const std::string& prefix, const std::string& suf, KvScale& k) {
            k.engines[0] = vllm(F, n);
            k.engines[1] = sglang(n);
            k.engines[2] = trtllm(F, n);
            per_head(k, suf);
            k.vllm = k.engines[0].detail;
            k.dropped = k.engines[0].fate == KvFate::dropped || k.engines[0].fate == KvFate::replaced;
            for (int e = 0; e < 3; ++e) judge(k, suf, e);
            if (is_bias(suf))
                bias_values(n, suf, prefix);
            else if (suf.find("zero_point") == std::string::npos)
                scale_values(n);
        });
    }

    void missing();
    void trtllm_found();
    void trtllm_missing();
};

// TensorRT-LLM checkpoints (Folder::trtllm): the KV scale names of that layout, read only by
// TensorRT-LLM's checkpoint loader (the TensorRT flow, trtllm-build):
// tensorrt_llm/models/modeling_utils.py (stored 01ea6d79) PretrainedModel.from_checkpoint loads
// rank<N>.safetensors, preprocess_weights, then load(). preprocess_weights'
// process_kv_scaling_factor replaces every <attn>.k_cache_scaling_factor by
// <attn>.kv_cache_scaling_factor = torch.max(k, v) (`assert v_name in weights, f"{v_name} not
// found"`), deletes both, and adds kv_cache_rcp_scaling_factor = 1 / kv_cache_scaling_factor where
// absent. The attention holds kv_cache_scaling_factor (shape (1,), float32, the cache's
// dequantisation scale) only when config.json declares a KV cache quantisation
// (quantization/quantize.py kv_cache_quantize; layers/attention.py passes it as
// kv_quant_orig_scale and its reciprocal as kv_orig_quant_scale). load(): a required name not
// provided raises RuntimeError("Required but not provided tensors"); a provided name not
// required only logs "Provided but not required tensors" and is not loaded. vLLM and SGLang
// load Hugging Face folders; this layout is not theirs.
KvOutcome trtllm_checkpoint_fate(const Folder& F, const std::string& n, const std::string& suf) {
    const bool kv_quant = !F.kv_cache_algo.empty();
    if (suf == "k_cache_scaling_factor") {
        const std::string v = n.substr(0, n.size() - suf.size()) + "v_cache_scaling_factor";
        if (!F.has(v))
            return {KvFate::rejected, fmt::format("load fails: preprocess_weights asserts '{} not found' "
                                                  "(modeling_utils.py process_kv_scaling_factor)",
                                                  v)};
    }
    if (suf == "k_cache_scaling_factor" ||
        (suf == "v_cache_scaling_factor" && F.has(n.substr(0, n.size() - suf.size()) + "k_cache_scaling_factor")))
        return {
            kv_quant ? KvFate::renamed : KvFate::dropped,
            std::string("combined: kv_cache_scaling_factor = max(k_cache_scaling_factor, v_cache_scaling_factor), "
                        "both deleted (modeling_utils.py preprocess_weights process_kv_scaling_factor)") +
                (kv_quant ? "" : "; no KV cache quantisation declared, so not loaded ('Provided but not required')")};
    if (suf == "v_cache_scaling_factor")
        return {KvFate::dropped,
                "dropped: no k_cache_scaling_factor to combine with, and no parameter of this "
                "name (load: 'Provided but not required tensors', a warning)"};
    if (!kv_quant)
        return {KvFate::dropped,
                "dropped: config.json declares no kv_cache_quant_algo, so the attention has no "
                "kv_cache_scaling_factor (load: 'Provided but not required tensors', a warning)"};
    const std::string k = n.substr(0, n.size() - suf.size()) + "k_cache_scaling_factor";
    return {KvFate::loaded,
            std::string("loaded as the attention's kv_cache_scaling_factor, the ") + F.kv_cache_algo +
                " cache's dequantisation scale; kv_cache_rcp_scaling_factor = 1 / it "
                "(modeling_utils.py preprocess_weights)" +
                (F.has(k) ? "; overwritten by max(k_cache_scaling_factor, v_cache_scaling_factor)" : "")};
}

void Names::trtllm_found() {
    static const std::regex kKv(R"(^(.*\.attention)\.((?:kv|k|v)_cache_scaling_factor)$)");
    const KvOutcome other{KvFate::undetermined,
                          "not this engine's format: a TensorRT-LLM checkpoint (rank<N>.safetensors under "
                          "TensorRT-LLM's names, a config.json without model_type), where it loads Hugging Face "
                          "folders"};
    each_kv_name(kKv, [&](const std::string& n, const std::string&, const std::string& suf, KvScale& k) {
        k.engines[0] = k.engines[1] = other;
        k.engines[2] = trtllm_checkpoint_fate(F, n, suf);
        k.vllm = k.engines[0].detail;
        judge(k, suf, 2);  // vLLM and SGLang do not read this layout: nothing to judge
        scale_values(n);
        // ModelOpt's TensorRT-LLM export raises an FP8 cache's k/v scale to at least 1
        // (quant_utils.py get_kv_cache_scaling_factor: torch.max(factor, tensor([1.0]))).
        if (F.producer() == Producer::modelopt && F.kv_cache_algo == "FP8" && k.dtype == "F32") {
            const RawTensor v = F.read(n);
            for (std::uint64_t i = 0; i < v.numel(); ++i)
                if (std::isfinite(v.at(i)) && v.at(i) < 1.0f) {
                    note(n, "kv scale below 1",
                         fmt::format("{} < 1: ModelOpt's TensorRT-LLM export clamps an FP8 KV scale to max(amax / "
                                     "448, 1) (quant_utils.py get_kv_cache_scaling_factor); its HF export does not",
                                     v.at(i)));
                    break;
                }
        }
    });
}

// Every attention (<attn>.qkv.weight) needs a kv_cache_scaling_factor once config.json declares a
// KV cache quantisation: TensorRT-LLM's load() requires the parameter.
void Names::trtllm_missing() {
    if (F.kv_cache_algo.empty()) return;
    static const std::regex kAttn(R"(^(.*\.attention)\.qkv\.weight$)");
    for (const auto& [n, t] : F.tensors()) {
        std::smatch m;
        if (!std::regex_match(n, m, kAttn)) continue;
        const std::string a = m[1].str();
        if (F.has(a + ".kv_cache_scaling_factor") || F.has(a + ".k_cache_scaling_factor")) continue;
        KvScale k;
        k.name = a + ".kv_cache_scaling_factor";
        k.present = false;
        k.engines[0] = k.engines[1] = {KvFate::undetermined, "not this engine's format"};
        k.engines[2] = {KvFate::rejected,
                        fmt::format("load fails: the {} KV cache's attention requires kv_cache_scaling_factor "
                                    "(modeling_utils.py load: 'Required but not provided tensors')",
                                    F.kv_cache_algo)};
        k.vllm = k.engines[0].detail;
        k.dropped = true;
        fail(k.name, "kv scale missing", fmt::format("TensorRT-LLM {}", k.engines[2].detail));
        R.kv.push_back(std::move(k));
    }
}

// Every attention layer ("<a>.self_attn" with q/k/v_proj weights) needs a K and a V scale once
// the checkpoint declares a quantised KV cache or holds any KV scale.
void Names::missing() {
    static const std::regex kAttn(R"(^(.*\.self_attn)\.(q|k|v)_proj\.(weight|weight_packed)$)");
    static const std::regex kKScale(
        R"(^(.*\.self_attn)(?:\.k_proj|\.qkv_proj)?\.(?:k_scale|kv_scale|k_cache\.scale)$)");
    static const std::regex kVScale(
        R"(^(.*\.self_attn)(?:\.v_proj|\.qkv_proj)?\.(?:v_scale|kv_scale|v_cache\.scale)$)");
    std::map<std::string, std::pair<std::string, std::string>> layers;  // attn -> (k name, v name)
    bool any = false;
    for (const auto& [n, t] : F.tensors()) {
        std::smatch m;
        if (std::regex_match(n, m, kAttn)) layers[m[1].str()];
        if (std::regex_match(n, m, kKScale)) layers[m[1].str()].first = n, any = true;
        if (std::regex_match(n, m, kVScale)) layers[m[1].str()].second = n, any = true;
    }
    if (!any && F.kv_cache_algo.empty()) return;
    const bool nvfp4 = nvfp4_kv(F);
    for (const auto& [attn, kv] : layers) {
        if (!kv.first.empty() && !kv.second.empty()) continue;
        const bool modelopt = F.producer() == Producer::modelopt;
        for (const char c : {'k', 'v'}) {
            const std::string& have = c == 'k' ? kv.first : kv.second;
            const std::string& other = c == 'k' ? kv.second : kv.first;
            if (!have.empty()) continue;
            KvScale k;
            k.name = attn + (modelopt ? fmt::format(".{}_proj.{}_scale", c, c) : fmt::format(".{}_scale", c));
            k.present = false;
            const std::string src = "kv_cache.py process_weights_after_loading";
            if (other.empty()) {
                k.engines[0] = k.engines[1] = {KvFate::replaced,
                                               "replaced by 1.0: no k_scale and no v_scale loaded (" + src + ")"};
                k.engines[2] = {KvFate::replaced,
                                "replaced by 1.0 (kv_scales / kv_cache_scaling_factor keep their 1.0)"};
            } else if (c == 'v') {
                k.engines[0] = k.engines[1] = {
                    KvFate::replaced, "replaced by k_scale: only k_scale loaded, duplicated to v (" + src + ")"};
                const bool read = std::regex_match(other, std::regex(R"(^.*\.self_attn\.(q|k|v)_proj\.k_scale$)"));
                k.engines[2] =
                    nvfp4 && read
                        ? KvOutcome{KvFate::rejected,
                                    "load fails: assert v_scales, 'k_scale and v_scale must be loaded together' "
                                    "(linear.py process_weights_after_loading_fused_qkv_linear)"}
                        : KvOutcome{KvFate::replaced,
                                    "replaced by 1.0 (kv_scales / kv_cache_scaling_factor keep their 1.0)"};
            } else {
                k.engines[0] = k.engines[1] = {
                    KvFate::rejected, "load fails: only v_scale loaded, `assert layer.k_scale > 0.0` (" + src + ")"};
                k.engines[2] = {KvFate::replaced,
                                "replaced by 1.0: without k_scale no kv_scales are set (linear.py), FP8 keeps 1.0"};
            }
            k.vllm = k.engines[0].detail;
            k.dropped = true;
            const std::string msg = fmt::format("no {}_scale for {} ({}); vLLM {}; SGLang {}; TensorRT-LLM {}", c, attn,
                                                other.empty() ? "nor the other" : "but " + other, k.engines[0].detail,
                                                k.engines[1].detail, k.engines[2].detail);
            if (other.empty())
                note(k.name, "kv scale missing", msg);
            else
                fail(k.name, "kv scale missing", msg);
            R.kv.push_back(std::move(k));
        }
    }
}

}  // namespace

void check_kv_names(const Folder& F, Report& R) {
    Names N{F, R};
    if (F.trtllm) {
        N.trtllm_found();
        N.trtllm_missing();
        return;
    }
    N.found();
    N.missing();
}

}  // namespace detail
}  // namespace fp8kit::checkpoint
