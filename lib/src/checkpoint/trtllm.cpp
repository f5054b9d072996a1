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
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>

#include "checkpoint/folder_internal.hpp"
#include "fp8kit/checkpoint.hpp"
#include "fp8kit/io/printable.hpp"

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

// ModelOpt's split of a TensorRT-LLM tensor among tp ranks (postprocess.py
// _split_model_config_for_tp, LinearConfig / EmbeddingConfig / ExpertConfig branches), from the
// module's linear type (layer_utils.py: qkv, fc, gate column; dense, proj row; router and the
// shared expert gate tp = False): column linears and embeddings split their rows (dim 0),
// row linears their columns (dim 1); stacked experts one dimension later (fc [E, 2I, H] its w3
// and w1 halves each by rank, proj [E, H, I] dim 2). A scale is split with its weight where it
// has that dimension with more than one entry (NVFP4 block scales, per-channel scales of a column
// linear; rule "P0/P1"), and is otherwise the same on every rank (per-tensor scales, global
// scales, activation and KV scales: rule "S"). nullopt: held whole by every rank.
std::optional<RankSplit> trtllm_split(const std::string& name, const std::vector<std::uint64_t>& shape,
                                      std::size_t weight_dims, std::uint64_t q_rows, std::uint64_t kv_rows,
                                      std::uint64_t tp) {
    const auto dot = name.rfind('.');
    if (dot == std::string::npos) return std::nullopt;
    const std::string module = name.substr(0, dot);
    static const std::regex kColumn(
        R"(^(transformer\.vocab_embedding|lm_head|transformer\.layers\.\d+\.(attention\.qkv|mlp\.fc|mlp\.gate))$)");
    static const std::regex kRow(R"(^transformer\.layers\.\d+\.(attention\.dense|mlp\.proj)$)");
    const bool column = std::regex_match(module, kColumn), row = !column && std::regex_match(module, kRow);
    if (!column && !row) return std::nullopt;
    const bool stacked = weight_dims == 3;
    RankSplit s;
    s.dim = (column ? 0 : 1) + (stacked ? 1 : 0);
    if (s.dim >= shape.size() || shape[s.dim] <= 1) return std::nullopt;
    const std::uint64_t n = shape[s.dim];
    if (column && !stacked && module.size() > 14 && module.compare(module.size() - 14, 14, ".attention.qkv") == 0 &&
        q_rows % tp == 0 && kv_rows % tp == 0 && q_rows / tp + 2 * (kv_rows / tp) == n)
        s.parts = {q_rows / tp, kv_rows / tp, kv_rows / tp};  // each rank: its q, k, v rows
    else if (column && stacked && n % 2 == 0)
        s.parts = {n / 2, n / 2};  // each rank: its w3 rows, then its w1 rows
    else
        s.parts = {n};
    return s;
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
    // Tensor parallelism as ModelOpt writes it (one process splitting one model:
    // postprocess.py postprocess_model_config, _split_model_config_for_tp); pipeline stages
    // hold other layers, not pieces of the same ones, and are not read.
    constexpr std::uint64_t kMaxRanks = 1024;
    if (pp != 1 || world != tp || tp == 0 || tp > kMaxRanks)
        throw CheckpointError(fmt::format(
            "{}: a TensorRT-LLM checkpoint of world_size {}, tp_size {}, pp_size {}; fp8kit reads tensor-parallel "
            "ones (world_size = tp_size, from 1 to {}, pp_size 1)",
            cfg.string(), world, tp, pp, kMaxRanks));
    std::vector<std::string> missing;
    for (std::uint64_t r = 0; r < tp; ++r)
        if (!fs::exists(fs::path(dir_) / fmt::format("rank{}.safetensors", r)))
            missing.push_back(fmt::format("rank{}.safetensors", r));
    if (!missing.empty())
        throw CheckpointError(fmt::format("{}: a TensorRT-LLM checkpoint of tp_size {} without {}", io::quoted(dir_),
                                          tp, fmt::join(missing, ", ")));
    tp_ = tp;
    // qkv's rows per rank: q, k, v each split by rank (model_config.py QKVConfig; merge_qkv
    // concatenates each rank's pieces after the split).
    const std::uint64_t heads = json_count(c, "num_attention_heads"),
                        kv_heads = c.contains("num_key_value_heads") ? json_count(c, "num_key_value_heads") : heads,
                        hidden = json_count(c, "hidden_size"),
                        head = c.contains("head_size") ? json_count(c, "head_size")
                                                       : hidden / std::max<std::uint64_t>(heads, 1);
    if (c.contains("vocab_size") && c["vocab_size"].is_number_unsigned()) vocab_size = c["vocab_size"];
    q_rows_ = heads * head;
    kv_rows_ = kv_heads * head;
    head_size = head;
    // tp above the KV heads: each repeated tp / kv_heads times, so every rank holds one
    // (layer_utils.py build_qkv: `if tp_size > num_kv_heads`, dup_kv_weight asserts the division).
    if (kv_heads > 0 && tp > kv_heads && tp % kv_heads == 0) {
        kv_repeats = tp / kv_heads;
        kv_rows_ *= kv_repeats;
    }
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

// Every rank of one export names the same tensors with the same dtypes and shapes (each rank's
// model config is a split copy of one: postprocess.py _split_model_config_for_tp); the split ones
// are listed whole, in rank0's shard slot.
void Folder::merge_trtllm_ranks(const std::vector<std::map<std::string, TensorRef>>& ranks) {
    const auto& r0 = ranks[0];
    for (std::size_t r = 1; r < ranks.size(); ++r) {
        for (const auto& [n, t] : ranks[r])
            if (!r0.count(n))
                throw CheckpointError(fmt::format("{}/{}: tensor {} is not in rank0.safetensors", io::quoted(dir_),
                                                  shards_[r], io::quoted(n)));
        for (const auto& [n, t] : r0) {
            const auto it = ranks[r].find(n);
            if (it == ranks[r].end())
                throw CheckpointError(fmt::format("{}/{}: no tensor {} (rank0.safetensors has it)", io::quoted(dir_),
                                                  shards_[r], io::quoted(n)));
            if (it->second.dtype != t.dtype || it->second.shape != t.shape)
                throw CheckpointError(fmt::format(
                    "{}/{}: tensor {} is {} [{}], rank0.safetensors's {} [{}]: the ranks of one export hold equal "
                    "pieces",
                    io::quoted(dir_), shards_[r], io::quoted(n), it->second.dtype, fmt::join(it->second.shape, ", "),
                    t.dtype, fmt::join(t.shape, ", ")));
        }
    }
    for (const auto& [n, t] : r0) {
        const auto dot = n.rfind('.');
        const auto w = dot == std::string::npos ? r0.end() : r0.find(n.substr(0, dot) + ".weight");
        const auto split =
            detail::trtllm_split(n, t.shape, w == r0.end() ? 0 : w->second.shape.size(), q_rows_, kv_rows_, tp_);
        TensorRef whole = t;
        if (split) {
            whole.shape[split->dim] *= tp_;
            splits_[n] = *split;
        }
        tensors_[n] = whole;
    }
}

std::optional<std::uint64_t> Folder::rank_of(const std::string& name, std::uint64_t index) const {
    const auto sp = splits_.find(name);
    if (sp == splits_.end()) return std::nullopt;
    const auto& shape = tensors_.at(name).shape;
    std::uint64_t inner = 1;
    for (std::size_t d = sp->second.dim + 1; d < shape.size(); ++d) inner *= shape[d];
    const std::uint64_t at = (index / inner) % shape[sp->second.dim];
    std::uint64_t from = 0;
    for (const std::uint64_t part : sp->second.parts) {
        if (at < from + part * tp_) return (at - from) / part;
        from += part * tp_;
    }
    return std::nullopt;
}

std::vector<std::pair<std::string, std::uint64_t>> Folder::rank_differences() const {
    std::vector<std::pair<std::string, std::uint64_t>> out;
    if (tp_ < 2) return out;
    for (const auto& [n, t] : tensors_) {
        if (splits_.count(n)) continue;
        const RawTensor first = read_shard(0, n, t);
        for (std::size_t r = 1; r < shards_.size(); ++r) {
            const RawTensor other = read_shard(r, n, t);
            if (other.bytes.size() != first.bytes.size() ||
                std::memcmp(other.bytes.data(), first.bytes.data(), first.bytes.size()) != 0) {
                out.emplace_back(n, r);
                break;
            }
        }
    }
    return out;
}

}  // namespace fp8kit::checkpoint
