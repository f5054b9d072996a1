// The rows of a TensorRT-LLM checkpoint that ModelOpt's export adds to the original's: the
// vocabulary padding of vocab_embedding and lm_head, and the repeated KV heads of qkv.
#include "checkpoint/trtllm_rows.hpp"

#include <algorithm>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "checkpoint/findings.hpp"

namespace fp8kit::checkpoint::detail {
namespace {

// The rows ModelOpt writes for a vocabulary of v tokens at tp ranks: padded with zero rows to a
// multiple of 64 for INT4/W4A8 AWQ (postprocess.py pad_embedding_lm_head, called from
// model_config_export.py torch_to_tensorrt_llm_checkpoint), then to a multiple of tp before the
// embedding and every column linear, lm_head included, are split by rows
// (postprocess.py _split_model_config_for_tp, model_config_utils.py pad_weights).
std::vector<std::uint64_t> padded_vocab_rows(std::uint64_t v, std::uint64_t tp) {
    auto up = [](std::uint64_t n, std::uint64_t m) { return (n + m - 1) / m * m; };
    return {up(v, tp), up(up(v, 64), tp)};
}

// A TensorRT-LLM checkpoint's vocab_embedding and lm_head (unquantised): as many rows as
// ModelOpt pads the config's vocab_size to; the padding rows zero (pad_weights' value 0); with
// a reference, the real rows the original's, bit for bit (ModelOpt copies them in the export dtype).
void vocab_rows(const Folder& F, const Folder* ref, Findings& C) {
    if (!F.trtllm || F.vocab_size == 0) return;
    for (const auto& [n, orig] :
         {std::pair<std::string, std::string>{"transformer.vocab_embedding.weight", "model.embed_tokens.weight"},
          {"lm_head.weight", "lm_head.weight"}}) {
        if (!F.has(n)) continue;
        const auto& t = F.tensors().at(n);
        if (t.shape.size() != 2 || (t.dtype != "BF16" && t.dtype != "F16" && t.dtype != "F32")) continue;
        const std::uint64_t rows = t.shape[0], v = F.vocab_size;
        const auto ok = padded_vocab_rows(v, F.tp());
        if (rows != v && std::find(ok.begin(), ok.end(), rows) == ok.end()) {
            C.fail(
                n, "vocab padding",
                fmt::format("{} rows for config.json vocab_size {} at tp_size {}: ModelOpt writes {} (postprocess.py "
                            "_split_model_config_for_tp, pad_weights)",
                            rows, v, F.tp(), fmt::join(ok, " or ")));
            continue;
        }
        const RawTensor w = F.read(n);
        const std::size_t row_bytes = w.bytes.size() / rows;
        std::uint64_t nonzero = 0;
        for (std::uint64_t r = v; r < rows; ++r)
            for (std::size_t b = 0; b < row_bytes; ++b)
                if (w.bytes[r * row_bytes + b]) {
                    ++nonzero;
                    break;
                }
        if (rows > v)
            C.note(n, "vocab padding",
                   fmt::format("rows {} to {}: ModelOpt's padding of vocab_size {} for tp_size {} (postprocess.py "
                               "_split_model_config_for_tp, model_config_utils.py pad_weights); checked zero, the "
                               "original compared over the {} real rows",
                               v, rows - 1, v, F.tp(), v));
        if (nonzero)
            C.fail(n, "vocab padding",
                   fmt::format("{} of the {} padding rows (past vocab_size {}) are not zero; ModelOpt pads with zeros",
                               nonzero, rows - v, v));
        if (!ref || !ref->has(orig)) continue;
        const RawTensor o = ref->read(orig);
        if (o.dtype != w.dtype || o.shape.size() != 2 || o.shape[0] != v || o.bytes.size() != v * row_bytes) {
            C.fail(n, "reference",
                   fmt::format("{}: {} {} [{}], the checkpoint's real rows {} [{}, {}]", ref->dir(), orig, o.dtype,
                               fmt::join(o.shape, ", "), w.dtype, v, t.shape[1]));
            continue;
        }
        const std::size_t es = row_bytes / t.shape[1];
        std::uint64_t differ = 0;
        for (std::size_t i = 0; i < o.bytes.size(); i += es) differ += std::memcmp(&o.bytes[i], &w.bytes[i], es) != 0;
        if (differ)
            C.fail(n, "vocab rows",
                   fmt::format("{} of the {} elements of the {} real rows differ from {}'s {}", differ, v * t.shape[1],
                               v, ref->dir(), orig));
    }
}

}  // namespace

void check_trtllm_vocab_rows(const Folder& F, const Folder* ref, Report& R) {
    Findings C{F, R};
    vocab_rows(F, ref, C);
}

// A TensorRT-LLM qkv whose KV heads ModelOpt repeated (Folder::kv_repeats): the concatenated
// original [q; k; v] with every head of k and of v repeated in place, as dup_kv_weight does
// (`repeat_interleave(reps, dim=0)` over [heads, head_size, cols]). Anything else: o itself.
RawTensor with_repeated_kv_heads(const Folder& F, const Layer& L, RawTensor o) {
    const std::string qkv = ".attention.qkv";
    if (!F.trtllm || F.kv_repeats < 2 || F.head_size == 0 || L.sources.size() != 3 || o.shape.size() != 2 ||
        L.module.size() < qkv.size() || L.module.compare(L.module.size() - qkv.size(), qkv.size(), qkv) != 0)
        return o;
    const std::uint64_t rows = o.shape[0], row_bytes = o.numel() ? o.bytes.size() / rows : 0,
                        kv = (L.rows > rows) ? (L.rows - rows) / (2 * (F.kv_repeats - 1)) : 0;
    if (kv == 0 || kv % F.head_size != 0 || rows < 2 * kv) return o;
    const std::uint64_t q = rows - 2 * kv, head_bytes = F.head_size * row_bytes;
    RawTensor out;
    out.dtype = o.dtype;
    out.shape = {q + 2 * kv * F.kv_repeats, o.shape[1]};
    out.bytes.insert(out.bytes.end(), o.bytes.begin(), o.bytes.begin() + q * row_bytes);
    for (std::uint64_t h = 0; h < 2 * kv / F.head_size; ++h)  // k's heads, then v's
        for (std::uint64_t r = 0; r < F.kv_repeats; ++r) {
            const auto first = o.bytes.begin() + q * row_bytes + h * head_bytes;
            out.bytes.insert(out.bytes.end(), first, first + head_bytes);
        }
    return out;
}

}  // namespace fp8kit::checkpoint::detail
