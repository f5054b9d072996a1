// Listing a quantised checkpoint folder: configs, shard headers (the project's safetensors
// reader, raw mode: stored bytes as they are), and the layers the tensor names make up.
#include <fnmatch.h>

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <new>
#include <utility>
#include <cctype>
#include <cmath>
#include <set>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "checkpoint/folder_internal.hpp"
#include "checkpoint/modelopt_presets.hpp"
#include "fp8kit/checkpoint.hpp"
#include "fp8kit/convert/names.hpp"
#include "fp8kit/emu/formats.hpp"
#include "checkpoint/name_pattern.hpp"
#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/printable.hpp"
#include "io/dump_internal.hpp"

namespace fp8kit::checkpoint {
namespace fs = std::filesystem;

const char* name(Producer p) {
    switch (p) {
        case Producer::modelopt: return "modelopt";
        case Producer::compressed_tensors: return "compressed-tensors";
        case Producer::deepseek: return "deepseek-v3";
        case Producer::gpt_oss: return "gpt-oss";
        default: return "unknown";
    }
}
const char* name(Scheme s) {
    switch (s) {
        case Scheme::fp8_tensor: return "fp8-per-tensor";
        case Scheme::fp8_channel: return "fp8-per-channel";
        case Scheme::fp8_block: return "fp8-block";
        case Scheme::nvfp4: return "nvfp4";
        case Scheme::mxfp4: return "mxfp4";
        case Scheme::mxfp8: return "mxfp8";
        case Scheme::w4a8: return "w4a8-int4";
        case Scheme::int4: return "w4a16-int4";
        case Scheme::int8: return "int8-per-channel";
        default: return "unquantized";
    }
}
const char* name(Convention c) { return c == Convention::dequant ? "dequant (x = q*s)" : "reciprocal (x = q/s)"; }

std::uint64_t RawTensor::numel() const {
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

float RawTensor::at(std::uint64_t i) const {
    auto u16 = [&] { return std::uint32_t(bytes[2 * i]) | std::uint32_t(bytes[2 * i + 1]) << 8; };
    float f;
    if (dtype == "F32") {
        std::memcpy(&f, &bytes[4 * i], 4);
        return f;
    }
    if (dtype == "BF16") {
        const std::uint32_t b = u16() << 16;
        std::memcpy(&f, &b, 4);
        return f;
    }
    if (dtype == "F16") {
        const std::uint32_t h = u16();
        const int e = (h >> 10) & 31, m = h & 1023;
        const float v = e == 0    ? std::ldexp(float(m), -24)
                        : e == 31 ? (m ? NAN : INFINITY)
                                  : std::ldexp(float(m | 1024), e - 25);
        return (h & 0x8000) ? -v : v;
    }
    if (dtype == "F8_E4M3") {
        const auto b = static_cast<std::uint32_t>(emu::decode(Format::e4m3, Wide::f32, bytes[i]));
        std::memcpy(&f, &b, 4);
        return f;
    }
    if (dtype == "F8_E8M0") {
        const auto b = static_cast<std::uint32_t>(emu::decode(Format::e8m0, Wide::f32, bytes[i]));
        std::memcpy(&f, &b, 4);
        return f;
    }
    return float(bytes[i]);  // U8: the byte itself
}

std::vector<float> RawTensor::to_floats() const {
    std::vector<float> v(numel());
    if (dtype == "BF16") {
        for (std::size_t i = 0; i < v.size(); ++i) {
            const std::uint32_t b = (std::uint32_t(bytes[2 * i]) | std::uint32_t(bytes[2 * i + 1]) << 8) << 16;
            std::memcpy(&v[i], &b, 4);
        }
    } else if (dtype == "F32") {
        if (!v.empty()) std::memcpy(v.data(), bytes.data(), v.size() * 4);  // (never memcpy from a null data())
    } else {
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = at(i);
    }
    return v;
}

struct Folder::Shards {
    std::vector<std::unique_ptr<dump::Source>> src;
};

Folder::~Folder() = default;
Folder::Folder(Folder&&) noexcept = default;

namespace detail {

nlohmann::json read_json(const fs::path& p) {
    std::string text;
    try {
        // config.json, hf_quant_config.json, the index: regular files only, at most 256 MiB.
        text = io::read_input_text(p.string(), std::uint64_t(256) << 20, "a checkpoint's JSON file");
    } catch (const io::InputError& e) {
        throw CheckpointError(e.what());
    }
    try {
        return nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
        // nlohmann's message ends with the token it last read, which can be the whole file: cut.
        throw CheckpointError(fmt::format("{}: not JSON ({})", io::quoted(p.string()), io::quoted(e.what(), 300)));
    }
}

std::vector<std::string> strings(const nlohmann::json& j) {
    std::vector<std::string> v;
    if (j.is_array())
        for (const auto& e : j)
            if (e.is_string()) v.push_back(e.get<std::string>());
    return v;
}

// ModelOpt exclude_modules are fnmatch patterns ("*lm_head*"); compressed-tensors' ignore list
// holds names and "re:" regular expressions (compressed_tensors/utils/match.py).
bool excluded_by(const std::vector<std::string>& pats, const std::string& module) {
    for (const auto& p : pats) {
        if (p.rfind("re:", 0) == 0) {
            if (detail::re_search(std::string_view(p).substr(3), module)) return true;
        } else if (p == module || fnmatch(p.c_str(), module.c_str(), 0) == 0 ||
                   (module.size() > p.size() &&
                    module.compare(module.size() - p.size() - 1, std::string::npos, "." + p) == 0)) {
            return true;
        }
    }
    return false;
}

}  // namespace detail

namespace {

using detail::excluded_by;
using detail::read_json;
using detail::strings;

bool ends_with(const std::string& s, const std::string& t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
}

// A weight block's rows and columns from the config, where it gives them (null: `rows` and `cols`
// stay). A block of 0 divided by zero (SIGFPE: tests/cli/adversarial.sh); one past 2^20 (a block
// larger than any weight fp8kit reads whole) is refused as well.
void block_size(const nlohmann::json& bs, const char* key, const std::string& dir, std::uint64_t& rows,
                std::uint64_t& cols) {
    if (bs.is_null()) return;
    constexpr std::uint64_t kMax = std::uint64_t(1) << 20;
    auto ok = [&](const nlohmann::json& x) { return x.is_number_unsigned() && x > 0 && x <= kMax; };
    if (!bs.is_array() || bs.size() != 2 || !ok(bs[0]) || !ok(bs[1]))
        throw CheckpointError(fmt::format("{}/config.json: {} {} is not two whole numbers from 1 to {}",
                                          io::quoted(dir), key, io::quoted(bs.dump(), 80), kMax));
    rows = bs[0];
    cols = bs[1];
}

// The longest tensor name a checkpoint may have (see its use in Folder::Folder).
constexpr std::size_t kMaxTensorName = 4096;

std::string upper(std::string s) {
    for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
    return s;
}

// The scheme ModelOpt's quant_algo names for integer-byte weights (U8 / I8) whose scales do not
// tell it (a missing weight_scale): its hf_quant_config.json values
// (modelopt/torch/export/model_config.py QUANTIZATION_*). none: the config names none of them.
Scheme scheme_of_algo(Producer p, const std::string& quant_algo, const std::string& weight_dtype) {
    if (p != Producer::modelopt) return Scheme::none;
    const std::string a = upper(quant_algo);
    if (weight_dtype == "I8") return (a == "W8A16" || a == "W8A8_SQ_PER_CHANNEL") ? Scheme::int8 : Scheme::none;
    if (a == "MXFP4" || a == "W4A8_MXFP4_FP8") return Scheme::mxfp4;
    if (a == "W4A16_AWQ") return Scheme::int4;
    if (a == "W4A8_AWQ") return Scheme::w4a8;
    if (a.rfind("NVFP4", 0) == 0) return Scheme::nvfp4;
    return Scheme::none;
}

// ModelOpt's integer weights (modelopt/torch/export/quant_utils.py to_quantized_weight): I8 codes
// (QUANTIZATION_INT8_SQ / INT8_WO, quant_algo W8A8_SQ_PER_CHANNEL / W8A16), and INT4 packed two
// rows a byte with float32 group scales and no weight_scale_2 (QUANTIZATION_INT4_AWQ, quant_algo
// W4A16_AWQ: INT4_AWQ_CFG and INT4_BLOCKWISE_WEIGHT_ONLY_CFG). none: neither.
Scheme modelopt_integer_scheme(Producer p, const std::string& quant_algo, const std::string& weight_dtype,
                               const TensorRef* scale, bool has_scale_2) {
    if (p != Producer::modelopt) return Scheme::none;
    if (weight_dtype == "I8")  // an MX INT8 weight (E8M0 scales per 32) is none of these
        return scheme_of_algo(p, quant_algo, weight_dtype) == Scheme::int8 || (scale && scale->dtype == "F32")
                   ? Scheme::int8
                   : Scheme::none;
    if (weight_dtype != "U8" || has_scale_2) return Scheme::none;
    if (upper(quant_algo) == "W4A16_AWQ" || (scale && scale->dtype == "F32")) return Scheme::int4;
    return Scheme::none;
}

}  // namespace

Folder::Folder(const std::string& dir, bool unquantized) : dir_(dir), open_(std::make_unique<Shards>()) {
    // error_code forms throughout: a path the system refuses (too long, a loop, no permission)
    // is one named error, never a filesystem_error quoting the whole path.
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
        throw CheckpointError(
            fmt::format("{}: not a folder{}", io::quoted(dir), ec ? ": " + ec.message() : std::string()));
    if (!unquantized) {
        try {
            read_configs();
        } catch (const nlohmann::json::exception& e) {
            // A field of the wrong type (quant_method a number, strategy an array, ...): nlohmann's
            // message names neither the file nor the folder.
            throw CheckpointError(fmt::format("{}: its quantisation config (config.json, hf_quant_config.json): {}",
                                              io::quoted(dir), e.what()));
        } catch (const std::invalid_argument& e) {  // a malformed field the reader checks itself
            throw CheckpointError(fmt::format("{}: its quantisation config (config.json, hf_quant_config.json): {}",
                                              io::quoted(dir), e.what()));
        }
    }
    // 1. The shards: the index's weight_map when there is one, else every *.safetensors file.
    const fs::path index = fs::path(dir) / "model.safetensors.index.json";
    if (trtllm) {
        for (std::uint64_t r = 0; r < tp_; ++r) shards_.push_back(fmt::format("rank{}.safetensors", r));
    } else if (fs::exists(fs::symlink_status(index, ec))) {
        const auto j = read_json(index);
        if (!j.contains("weight_map") || !j["weight_map"].is_object())
            throw CheckpointError(fmt::format("{}: no weight_map object", index.string()));
        std::set<std::string> files;
        for (const auto& [k, v] : j["weight_map"].items()) {
            if (!v.is_string() || v.get<std::string>().find('/') != std::string::npos)
                throw CheckpointError(
                    fmt::format("{}: weight_map entry '{}' is not a file name in the folder", index.string(), k));
            files.insert(v.get<std::string>());
        }
        shards_.assign(files.begin(), files.end());
    } else {
        fs::directory_iterator it(dir, ec), end;
        for (; !ec && it != end; it.increment(ec))
            if (it->path().extension() == ".safetensors") shards_.push_back(it->path().filename().string());
        if (ec) throw CheckpointError(fmt::format("{}: cannot list the folder: {}", io::quoted(dir), ec.message()));
        std::sort(shards_.begin(), shards_.end());
    }
    if (shards_.empty()) throw CheckpointError(fmt::format("{}: no .safetensors files", io::quoted(dir)));
    // 2. Headers only; the reader checks every offset against the file. A TensorRT-LLM
    // checkpoint's ranks all name the same tensors: listed per rank, then merged.
    std::vector<std::map<std::string, TensorRef>> ranks(tp_ > 1 ? shards_.size() : 0);
    for (std::size_t s = 0; s < shards_.size(); ++s) {
        const std::string path = (fs::path(dir) / shards_[s]).string();
        try {
            open_->src.push_back(dump::detail::open_safetensors(path, {}, /*raw=*/true, /*int8_bytes=*/true));
        } catch (const dump::DumpError& e) {
            throw CheckpointError(e.what());
        }
        const auto& src = *open_->src.back();
        if (!src.errors().empty()) throw CheckpointError(src.errors().front().describe());
        for (const auto& t : src.tensors()) {
            // Module names are matched with std::regex (the producers' own patterns), whose
            // libstdc++ matcher recurses once per character: a 100 kB name overflowed the stack
            // (tests/cli/adversarial.sh). No model names a tensor in kilobytes.
            if (t.name.size() > kMaxTensorName)
                throw CheckpointError(
                    fmt::format("{}: tensor name {} is {} bytes, over the {} a checkpoint's names "
                                "may have",
                                io::quoted(path), io::quoted(t.name, 64), t.name.size(), kMaxTensorName));
            (tp_ > 1 ? ranks[s] : tensors_)[t.name] = TensorRef{t.name, t.storage, t.shape, s};
        }
    }
    if (tp_ > 1) merge_trtllm_ranks(ranks);
    if (!unquantized && producer_ == Producer::unknown) {
        for (const auto& [n, t] : tensors_)
            if (ends_with(n, ".blocks") && has(n.substr(0, n.size() - 7) + ".scales")) {
                producer_ = Producer::gpt_oss;
                quant_algo = "mxfp4";
                layout_from_names = true;
                break;
            }
        if (producer_ == Producer::unknown)
            throw CheckpointError(
                fmt::format("{}: neither hf_quant_config.json nor config.json quantization_config, nor gpt-oss "
                            "original/ tensors (<name>.blocks with <name>.scales)",
                            dir));
    }
    if (trtllm)
        list_trtllm_layers();
    else
        list_layers();
}

void Folder::read_configs() {
    if (read_trtllm_config()) return;
    const fs::path d(dir_), hq = d / "hf_quant_config.json", cfg = d / "config.json";
    nlohmann::json qc;
    std::error_code ec;
    if (fs::exists(fs::symlink_status(cfg, ec))) {
        const auto c = read_json(cfg);
        if (c.contains("quantization_config") && c["quantization_config"].is_object()) qc = c["quantization_config"];
    }
    if (fs::exists(fs::symlink_status(hq, ec))) {  // ModelOpt (modelopt/torch/export/unified_export_hf.py)
        const auto j = read_json(hq);
        const auto q = j.value("quantization", nlohmann::json::object());
        producer_ = Producer::modelopt;
        quant_algo = q.value("quant_algo", "");
        if (q.contains("kv_cache_quant_algo") && q["kv_cache_quant_algo"].is_string())
            kv_cache_algo = q["kv_cache_quant_algo"];
        exclude_ = strings(q.value("exclude_modules", nlohmann::json::array()));
        if (q.contains("group_size") && q["group_size"].is_number_unsigned() && q["group_size"] > 0)
            group_size_ = q["group_size"];
        quantized_layers = detail::modelopt_quantized_layers(q);
        std::string algo = quant_algo;  // written "fp8_pb_wo" by ModelOpt 0.47, upper case elsewhere
        for (auto& ch : algo) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
        if (algo == "FP8_PB_WO" || algo == "FP8_BLOCK_SCALES") weight_strategy_ = "block";  // 128x128
        if (algo == "FP8_PER_CHANNEL_PER_TOKEN") weight_strategy_ = "channel";  // weight scale per output row
        return;
    }
    if (qc.is_null()) {
        // gpt-oss's original/ folder (gpt_oss/torch/weights.py Checkpoint) has no quantization
        // config: its MXFP4 tensors are told by their names (`<p>.blocks` + `<p>.scales`), once
        // the shard headers are read (Folder::Folder).
        producer_ = Producer::unknown;
        return;
    }
    const std::string method = qc.value("quant_method", "");
    if (qc.contains("scale_fmt") && qc["scale_fmt"].is_string()) scale_fmt = qc["scale_fmt"];
    if (method == "modelopt") {
        producer_ = Producer::modelopt;
        quant_algo = qc.value("quant_algo", "");
        // ModelOpt 0.47 writes the list as "ignore" in config.json (exclude_modules in hf_quant_config.json).
        exclude_ = strings(qc.value("exclude_modules", qc.value("ignore", nlohmann::json::array())));
        quantized_layers = detail::modelopt_quantized_layers(qc);
        if (quant_algo == "FP8_PER_CHANNEL_PER_TOKEN") weight_strategy_ = "channel";
    } else if (method == "compressed-tensors") {
        producer_ = Producer::compressed_tensors;
        quant_algo = qc.value("format", "");
        exclude_ = strings(qc.value("ignore", nlohmann::json::array()));
        if (qc.contains("kv_cache_scheme") && qc["kv_cache_scheme"].is_object()) {
            kv_cache_algo = "static";
            const auto& ks = qc["kv_cache_scheme"];
            if (ks.contains("strategy") && ks["strategy"].is_string()) kv_cache_strategy = ks["strategy"];
        }
        // The first config group's weight strategy (a one-block 128x128 weight has one scale,
        // and only the config tells FP8_BLOCK from per-tensor).
        if (qc.contains("config_groups") && qc["config_groups"].is_object())
            for (const auto& [g, v] : qc["config_groups"].items())
                if (v.is_object() && v.contains("targets"))
                    for (const auto& t : strings(v["targets"])) targets.push_back(t);
        if (qc.contains("config_groups") && qc["config_groups"].is_object())
            for (const auto& [g, v] : qc["config_groups"].items())
                if (v.is_object() && v.contains("weights") && v["weights"].is_object()) {
                    weight_strategy_ = v["weights"].value("strategy", "");
                    block_size(v["weights"].value("block_structure", nlohmann::json()), "block_structure", dir_,
                               block_rows_, block_cols_);
                    break;
                }
    } else if (method == "fp8") {  // DeepSeek-V3 config.json
        producer_ = Producer::deepseek;
        quant_algo = "fp8-block";
        weight_strategy_ = "block";
        block_size(qc.value("weight_block_size", nlohmann::json()), "weight_block_size", dir_, block_rows_,
                   block_cols_);
        exclude_ = strings(qc.value("modules_to_not_convert", nlohmann::json::array()));
        transformers_fp8 = qc.contains("dequantize");  // utils/quantization_config.py FineGrainedFP8Config
    } else if (method == "mxfp4") {                    // gpt-oss config.json
        producer_ = Producer::gpt_oss;
        quant_algo = "mxfp4";
        exclude_ = strings(qc.value("modules_to_not_convert", nlohmann::json::array()));
    } else {
        throw CheckpointError(
            fmt::format("{}/config.json: quant_method '{}' is not one fp8kit reads "
                        "(modelopt, compressed-tensors, fp8, mxfp4)",
                        dir_, method));
    }
}

// Layer L's logical shape (codes unpacked) and the block one scale covers, from its weight t.
void Folder::set_extent(Layer& L, const TensorRef& t) const {
    // W4A8's INT4 group: hf_quant_config's group_size; where no config gives it (config.json's
    // quantization_config omits it), the columns over the scale's last dimension.
    auto w4a8_group = [&]() -> std::uint64_t {
        if (group_size_) return group_size_;
        if (L.scale.empty()) return std::uint64_t(128);
        const auto& s = tensors_.at(L.scale).shape;
        return (s.size() == 2 && s[1] > 0 && L.cols >= s[1] && L.cols % s[1] == 0) ? L.cols / s[1] : 128;
    };
    const std::string& n = L.weight;
    const auto& w = t.shape;
    if (L.scheme == Scheme::mxfp4 && w.size() >= 2 && (ends_with(n, "blocks"))) {
        L.rows = 1;
        for (std::size_t i = 0; i + 2 < w.size(); ++i) L.rows *= w[i];
        L.cols = w[w.size() - 2] * w.back() * 2;
        if (w.size() == 4) L.experts = w[0];  // gpt-oss [experts, rows, blocks, 16]
    } else if ((L.scheme == Scheme::w4a8 || L.scheme == Scheme::int4) && w.size() == 2) {
        L.rows = w[0] * 2;  // two output rows per byte (quant_utils.py pack_int4_in_uint8)
        L.cols = w[1];
    } else if (w.size() == 2) {
        L.rows = w[0];
        L.cols = (t.dtype == "U8") ? w[1] * 2 : w[1];
    } else if (w.size() == 3) {  // stacked experts [E, r, c] (Layer::experts)
        L.experts = w[0];
        L.rows = w[0] * w[1];
        L.cols = (t.dtype == "U8") ? w[2] * 2 : w[2];
    }
    const std::uint64_t nvfp4_block =
        producer_ == Producer::modelopt ? detail::modelopt_nvfp4_block(*this, L.module, group_size_) : 16;
    L.block_cols = L.scheme == Scheme::nvfp4                                  ? nvfp4_block
                   : (L.scheme == Scheme::mxfp4 || L.scheme == Scheme::mxfp8) ? 32
                   : (L.scheme == Scheme::w4a8 || L.scheme == Scheme::int4)   ? w4a8_group()
                                                                              : 0;
    if (L.scheme == Scheme::fp8_channel || L.scheme == Scheme::int8) L.block_cols = L.cols;
    if (L.scheme == Scheme::fp8_block) {
        L.block_rows = block_rows_;  // DeepSeek-V3 weight_block_size / compressed-tensors block_structure
        L.block_cols = block_cols_;
    }
    if (L.scheme == Scheme::fp8_tensor) {
        // One scale per expert of a stack: a block of one expert's rows.
        const bool per_expert = L.experts > 1 && !L.scale.empty() && [&] {
            std::uint64_t sn = 1;
            for (auto d : tensors_.at(L.scale).shape) sn *= d;
            return sn == L.experts;
        }();
        L.block_rows = per_expert ? L.rows / L.experts : L.rows;
        L.block_cols = L.cols;
    }
}

// 3. Layers from tensor names, per producer's naming:
//    ModelOpt M.weight (F8_E4M3 or U8) + M.weight_scale [+ M.weight_scale_2] + M.input_scale;
//    compressed-tensors M.weight / M.weight_packed + M.weight_scale [+ M.weight_global_scale];
//    DeepSeek M.weight + M.weight_scale_inv; gpt-oss M.blocks / M_blocks + M.scales / M_scales.
void Folder::list_layers() {
    auto opt = [&](const std::string& n) { return has(n) ? n : std::string(); };
    for (const auto& [n, t] : tensors_) {
        Layer L;
        std::string m;
        if (ends_with(n, ".weight_packed")) {
            m = n.substr(0, n.size() - 14);
            L.weight = n;
            L.scale = opt(m + ".weight_scale");
            L.global_scale = opt(m + ".weight_global_scale");
            L.scheme = L.global_scale.empty() ? Scheme::mxfp4 : Scheme::nvfp4;
            L.global_convention = Convention::reciprocal;  // 448*6/amax (utils/helpers.py generate_gparam)
        } else if (ends_with(n, "blocks") && (ends_with(n, ".blocks") || ends_with(n, "_blocks"))) {
            m = n.substr(0, n.size() - 7);
            L.weight = n;
            L.scale = opt(m + n.substr(n.size() - 7, 1) + "scales");
            L.scheme = Scheme::mxfp4;
        } else if (ends_with(n, ".weight")) {
            m = n.substr(0, n.size() - 7);
            L.weight = n;
            if (has(m + ".weight_scale_inv")) {
                L.scale = m + ".weight_scale_inv";
                L.scheme = Scheme::fp8_block;
            } else if (t.dtype == "U8" && has(m + ".weight_scale_2") && has(m + ".weight_scale") &&
                       tensors_.at(m + ".weight_scale").dtype == "F32" &&
                       !(producer_ == Producer::modelopt &&
                         detail::modelopt_nvfp4_algo(detail::modelopt_layer_algo(*this, m)))) {
                // ModelOpt W4A8_AWQ: float32 INT4 group scales (NVFP4's are F8_E4M3).
                L.scale = m + ".weight_scale";
                L.global_scale = m + ".weight_scale_2";
                L.scheme = Scheme::w4a8;
            } else if (const Scheme is = modelopt_integer_scheme(
                           producer_, quant_algo, t.dtype,
                           has(m + ".weight_scale") ? &tensors_.at(m + ".weight_scale") : nullptr,
                           has(m + ".weight_scale_2"));
                       is != Scheme::none) {
                L.scale = opt(m + ".weight_scale");
                L.scheme = is;
            } else if (t.dtype == "U8" && has(m + ".weight_scale_2")) {
                L.scale = opt(m + ".weight_scale");
                L.global_scale = m + ".weight_scale_2";
                L.scheme = Scheme::nvfp4;
            } else if (t.dtype == "U8" && producer_ == Producer::modelopt && has(m + ".weight_scale") &&
                       tensors_.at(m + ".weight_scale").dtype == "F8_E4M3") {
                // E4M3 block scales are NVFP4's (ModelOpt MXFP4's are E8M0 bytes): its
                // weight_scale_2 is missing, which the structure check then names.
                L.scale = m + ".weight_scale";
                L.scheme = Scheme::nvfp4;
            } else if (t.dtype == "U8" && has(m + ".weight_scale")) {
                L.scale = m + ".weight_scale";
                L.scheme = Scheme::mxfp4;
            } else if (t.dtype == "F8_E4M3" && has(m + ".weight_scale") &&
                       (tensors_.at(m + ".weight_scale").dtype == "U8" ||
                        tensors_.at(m + ".weight_scale").dtype == "F8_E8M0")) {
                L.scale = m + ".weight_scale";  // MXFP8: E8M0 scale per 32 (ModelOpt, compressed-tensors)
                L.scheme = Scheme::mxfp8;
            } else if (t.dtype == "F8_E4M3") {
                L.scale = opt(m + ".weight_scale");
                const auto s = has(L.scale) ? tensors_.at(L.scale) : TensorRef{};
                std::uint64_t sn = 1;
                for (auto d : s.shape) sn *= d;
                const bool per_expert = t.shape.size() == 3 && sn == t.shape[0] && sn > 1;  // [E] or [E, 1, 1]
                L.scheme =
                    weight_strategy_ == "block"     ? Scheme::fp8_block
                    : weight_strategy_ == "channel" ? Scheme::fp8_channel
                    : (sn == 1 || per_expert)       ? Scheme::fp8_tensor
                    : (s.shape.size() >= 1 && t.shape.size() == 2 && s.shape[0] == t.shape[0] && sn == t.shape[0])
                        ? Scheme::fp8_channel
                        : Scheme::fp8_block;
            } else if (t.shape.size() == 2 && (t.dtype == "U8" || t.dtype == "I8")) {
                // Integer bytes are codes, never an unquantised weight: a layer whose scale is
                // missing keeps the scheme its config names, so the check fails it.
                L.scale = opt(m + ".weight_scale");
                L.scheme = scheme_of_algo(producer_, quant_algo, t.dtype);
            } else if (t.shape.size() == 2) {
                L.scheme = Scheme::none;
            } else {
                continue;  // norms, biases: no layer
            }
        } else {
            continue;
        }
        L.module = m;
        L.input_scale = opt(m + ".input_scale");
        L.pre_quant_scale = opt(m + ".pre_quant_scale");
        L.excluded = excluded_by(exclude_, m);
        if (producer_ == Producer::modelopt) L.quant_algo = detail::modelopt_layer_algo(*this, m);
        set_extent(L, t);
        layers_.push_back(std::move(L));
    }
}

namespace {
constexpr std::size_t kHuge = std::size_t(2) << 20;  // x86-64 transparent huge page
}

// Freed large buffers are kept (at most 4) and reused by the next read of a layer of the same
// rounded size: a fresh page must be zeroed by the kernel before use, a second pass over every
// byte that a checkpoint's repeated layer shapes make avoidable.
struct BufferCache {
    std::mutex m;
    std::vector<std::pair<void*, std::size_t>> free;  // (buffer, size)
    ~BufferCache() {
        for (auto& b : free) std::free(b.first);
    }
};
BufferCache& buffer_cache() {
    static BufferCache c;
    return c;
}

void* allocate_tensor_bytes(std::size_t n) {
    if (n < 4 * kHuge) {
        void* p = std::malloc(n ? n : 1);
        if (!p) throw std::bad_alloc();
        return p;
    }
    const std::size_t size = (n + kHuge - 1) / kHuge * kHuge;
    {
        auto& c = buffer_cache();
        std::lock_guard<std::mutex> lock(c.m);
        for (auto it = c.free.begin(); it != c.free.end(); ++it)
            if (it->second == size) {
                void* p = it->first;
                c.free.erase(it);
                return p;
            }
    }
    void* p = std::aligned_alloc(kHuge, size);
    if (!p) throw std::bad_alloc();
#ifdef MADV_HUGEPAGE
    madvise(p, size, MADV_HUGEPAGE);  // a hint: where THP is off this changes nothing
#endif
    return p;
}
void free_tensor_bytes(void* p, std::size_t n) {
    if (n >= 4 * kHuge) {
        auto& c = buffer_cache();
        std::lock_guard<std::mutex> lock(c.m);
        if (c.free.size() >= 4) {
            std::free(c.free.front().first);
            c.free.erase(c.free.begin());
        }
        c.free.emplace_back(p, (n + kHuge - 1) / kHuge * kHuge);
        return;
    }
    std::free(p);
}

void release_tensor_buffers() {
    auto& c = buffer_cache();
    std::lock_guard<std::mutex> lock(c.m);
    for (auto& b : c.free) std::free(b.first);
    c.free.clear();
}

void Folder::stream(const std::string& n,
                    const std::function<void(std::uint64_t, const std::uint8_t*, std::size_t)>& fn) const {
    const auto it = tensors_.find(n);
    if (it == tensors_.end()) throw CheckpointError(fmt::format("{}: no tensor '{}'", dir_, n));
    if (splits_.count(n)) {  // a tensor split among TensorRT-LLM ranks: put back together first
        const RawTensor t = read(n);
        fn(0, t.bytes.data(), t.bytes.size());
        return;
    }
    auto& src = *open_->src[it->second.shard];
    const auto& infos = src.tensors();
    const auto ti = std::find_if(infos.begin(), infos.end(), [&](const dump::TensorInfo& t) { return t.name == n; });
    const std::size_t es = dump::detail::stored_size(ti->dtype);
    try {
        src.read(*ti, [&](const dump::Chunk& c) {
            fn(c.first * es, static_cast<const std::uint8_t*>(c.bits), c.count * es);
        });
    } catch (const dump::DumpError& e) {
        throw CheckpointError(e.what());
    }
}

RawTensor Folder::read(const std::string& n) const {
    const auto it = tensors_.find(n);
    if (it == tensors_.end()) throw CheckpointError(fmt::format("{}: no tensor '{}'", dir_, n));
    const auto sp = splits_.find(n);
    if (sp == splits_.end()) return read_shard(it->second.shard, n, it->second);
    // Split among TensorRT-LLM ranks: piece i of rank r goes to offset (sum of earlier pieces *
    // tp + r * parts[i]) along the split dimension, for every index of the dimensions before it.
    const RankSplit& split = sp->second;
    std::vector<RawTensor> per;
    for (std::size_t r = 0; r < shards_.size(); ++r) {
        TensorRef as = it->second;
        as.shape[split.dim] /= shards_.size();
        per.push_back(read_shard(r, n, as));
    }
    RawTensor whole;
    whole.dtype = it->second.dtype;
    whole.shape = it->second.shape;
    whole.bytes.resize(per[0].bytes.size() * per.size());
    const std::uint64_t rank_numel = per[0].numel();
    const std::size_t es = rank_numel ? per[0].bytes.size() / rank_numel : 0;
    std::uint64_t outer = 1, inner = es;
    for (std::size_t d = 0; d < split.dim; ++d) outer *= whole.shape[d];
    for (std::size_t d = split.dim + 1; d < whole.shape.size(); ++d) inner *= whole.shape[d];
    const std::uint64_t rank_dim = whole.shape[split.dim] / per.size();
    for (std::uint64_t o = 0; o < outer; ++o) {
        std::uint64_t from = 0, to = 0;
        for (const std::uint64_t part : split.parts) {
            for (std::size_t r = 0; r < per.size(); ++r)
                std::memcpy(&whole.bytes[(o * whole.shape[split.dim] + to + r * part) * inner],
                            &per[r].bytes[(o * rank_dim + from) * inner], part * inner);
            from += part;
            to += part * per.size();
        }
    }
    return whole;
}

RawTensor Folder::read_shard(std::size_t shard, const std::string& n, const TensorRef& as) const {
    auto& src = *open_->src[shard];
    const auto& infos = src.tensors();
    const auto ti = std::find_if(infos.begin(), infos.end(), [&](const dump::TensorInfo& t) { return t.name == n; });
    if (ti == infos.end())
        throw CheckpointError(fmt::format("{}/{}: no tensor '{}'", dir_, shards_[shard], io::printable(n)));
    RawTensor r;
    r.dtype = as.dtype;
    r.shape = as.shape;
    const std::size_t es = dump::detail::stored_size(ti->dtype);
    r.bytes.resize(ti->numel * es);
    try {
        src.read_into(*ti, r.bytes.data(), nullptr);  // the stored bytes (raw mode), straight into place
    } catch (const dump::DumpError& e) {
        throw CheckpointError(e.what());
    }
    return r;
}

}  // namespace fp8kit::checkpoint
