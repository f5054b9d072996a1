// The KV cache before serving (issue 28, item 4): K, V (and Q) as the cache holds them (after the
// rotary embedding, per layer and head: what fp8kit.torch.Monitor(attention=True) dumps), cast to
// an E4M3, E5M2, E4M3FNUZ or NVFP4 cache under each scale policy a serving engine uses, with
// saturation, underflow and error against the BF16 values per layer, head and position bucket, and
// FP8 attention's numerics (Q K^T, P in E4M3, P V) through the reference GEMM.
// Every rule and its source file: docs/inference.md, "The KV cache: fp8kit kv".
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/io/dump.hpp"

namespace fp8kit::kv {

// Bad input (no Q/K/V tensors, a shape that is not [batch, heads, positions, head_dim], a name):
// the CLI exits 2.
struct KvError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class CacheFormat { e4m3, e5m2, e4m3fnuz, nvfp4 };
enum class ScalePolicy {
    one,               // no scales in the checkpoint, calculate_kv_scales off: 1.0
    vllm_first_batch,  // vLLM calculate_kv_scales: max|x| of the first batch / 200 (K, Q) or / 100 (V)
    tensor,            // calibrated per tensor: amax / 448 (llm-compressor's k_scale); FNUZ x2
    head,              // calibrated per KV head (llm-compressor strategy attn_head): amax_h / 448; FNUZ x2
    token_head,        // dynamic per (token, head): max(amax / QMAX, 1e-6), vLLM's per-token cache kernel
    modelopt_trtllm,   // ModelOpt's TensorRT-LLM checkpoint / Megatron export of an FP8 k/v scale:
                       // max(amax / 448, 1.0) (quant_utils.py get_kv_cache_scaling_factor, called with
                       // clamp_fp8_scales=True by layer_utils.py build_attention_config and
                       // unified_export_megatron.py; data/checkpoints/modelopt_trtllm_fp8); FNUZ x2
    modelopt_hf,       // ModelOpt's HF export (unified_export_hf.py -> postprocess_state_dict):
                       // amax / 448, never clamped (data/checkpoints/modelopt_fp8 stores 0.0045); FNUZ x2
    llmc_minmax,       // llm-compressor's KV observer (observers/min_max.py MinMaxObserver, moving average
                       // 0.01, in bfloat16, stored BF16): calibrate's llmc_minmax, one batch per step; FNUZ x2
};
// Names (kv/names.cpp), with aliases accepted when parsing: e4m3 (fp8, fp8_e4m3), e5m2 (fp8_e5m2),
// e4m3fnuz (fnuz), nvfp4 (fp4); one (1.0), vllm_first_batch (first_batch), tensor (calibrated),
// modelopt_trtllm, modelopt_hf (modelopt, modelopt_hf_export), llmc_minmax (llmc), head
// (per_head), token_head (per_token_head). parse_X throws std::invalid_argument listing the names.
const char* name(CacheFormat f);
const char* name(ScalePolicy p);
CacheFormat parse_format(std::string_view s);
ScalePolicy parse_policy(std::string_view s);
std::string format_names();              // "e4m3, e5m2, e4m3fnuz, nvfp4"
std::string policy_names();              // "one, vllm_first_batch, ..., token_head"
std::vector<CacheFormat> all_formats();  // in the order of the names
std::vector<ScalePolicy> all_policies();

// The rules, one value at a time (float32 as the kernels compute them; exposed for the tests).
// vLLM calc_kv_scales: float32(max|x|) / range, range K 200, Q 200, V 100 (vllm/envs.py).
float vllm_first_batch_scale(float amax, char which);  // which: 'q', 'k', 'v'
// A calibrated checkpoint scale amax / 448 (float32), doubled on FNUZ by vLLM's loader.
float calibrated_scale(float amax, CacheFormat f);
// ModelOpt's export of an FP8 KV scale: max(amax / 448, 1.0) (float32), doubled on FNUZ by vLLM.
float modelopt_kv_scale(float amax, CacheFormat f);
// vLLM's dynamic per-token scale: max(amax / QMAX, 1e-6) in float32, QMAX 448 (E4M3), 240 (FNUZ);
// E5M2 (not in vLLM's table) 57344.
float token_head_scale(float amax, CacheFormat f);

// Cast statistics of a set of values against their BF16 originals.
struct CastStats {
    std::uint64_t elements = 0, nonzero = 0;
    std::uint64_t saturated = 0;   // x / s rounds beyond the largest finite value (an unsaturated cast overflows)
    std::uint64_t underflow = 0;   // x != 0 whose code decodes to zero
    double signal = 0, noise = 0;  // sum x^2, sum (deq - x)^2 (binary64)
    double max_abs_err = 0;
    double sqnr_db() const;  // 10 log10(signal / noise); +inf when exact
    void add(const CastStats& o);
};

// One [batch, heads, positions, head_dim] tensor (bfloat16 or float32 widened to float32).
struct Tensor4 {
    std::vector<float> data;
    std::size_t batch = 0, heads = 0, positions = 0, dim = 0;
    float at(std::size_t b, std::size_t h, std::size_t p, std::size_t d) const {
        return data[((b * heads + h) * positions + p) * dim + d];
    }
};
// llm-compressor's k_scale / v_scale of the steps (each step one calibration batch, step 0 first):
// calibrate::calibrate(Method::llmc_minmax, ..., DType::bf16) (the captured K/V are bfloat16), its
// BF16 scale widened; doubled on FNUZ by vLLM. NVFP4: the observer's amax / 2688.
float llmc_minmax_scale(const std::vector<Tensor4>& steps, CacheFormat f);

// The cache cast of one tensor (all its steps, step 0 first: the first batch) under (format,
// policy): the scale(s) used and the statistics per head and per position bucket.
// which: 'q', 'k' or 'v' (vLLM's first-batch range differs for V).
struct CastResult {
    std::vector<float> scales;          // one (tensor policies) or one per head; empty for token_head
    std::vector<CastStats> per_head;    // over every step
    std::vector<CastStats> per_bucket;  // positions [i*bucket, (i+1)*bucket), all heads and steps
};
CastResult cast_cache(const std::vector<Tensor4>& steps, char which, CacheFormat f, ScalePolicy p, std::size_t bucket);

struct Row {            // one (layer, tensor, head, format, policy)
    std::string layer;  // the attention module ("model.layers.0.self_attn")
    char tensor = 'k';
    std::size_t head = 0;
    CacheFormat format{};
    ScalePolicy policy{};
    float scale = 0;  // the head's scale (token_head: 0, the scales are per token)
    CastStats stats;
};
struct BucketRow {  // one (layer, tensor, format, policy, position bucket)
    std::string layer;
    char tensor = 'k';
    CacheFormat format{};
    ScalePolicy policy{};
    std::size_t first = 0, last = 0;  // positions, inclusive
    CastStats stats;
};
// FP8 attention (FlashAttention-3 / ModelOpt p_bmm_quantizer numerics), E4M3 Q/K/V under a
// policy, against attention computed in binary64 on the BF16 values, per layer and query head.
struct AttentionRow {
    std::string layer;
    std::size_t head = 0, kv_head = 0;
    ScalePolicy policy{};
    float q_scale = 0, k_scale = 0, v_scale = 0;
    double scores_sqnr_db = 0;          // S = Q K^T / sqrt(d) against binary64
    double probs_sqnr_db = 0;           // FA3's P~ cast to E4M3 (no descale), / rowsum, against the exact softmax
    double out_sqnr_db = 0;             // FA3: O = (P~c . Vc) v_scale / rowsum against binary64
    double out_normalized_sqnr_db = 0;  // ModelOpt: softmax normalised, then cast; O = (Pc . Vc) v_scale
    std::uint64_t p_underflow = 0, p_nonzero = 0;  // probabilities > 0 whose E4M3 code is zero
};
struct Options {
    std::vector<std::string> files;
    std::vector<CacheFormat> formats;   // empty: all
    std::vector<ScalePolicy> policies;  // empty: all
    std::size_t bucket = 32;            // positions per bucket
    bool attention = true;              // FP8 attention where Q, K and V are all captured
};
struct Report {
    std::vector<Row> rows;
    std::vector<BucketRow> buckets;
    std::vector<AttentionRow> attention;
    std::vector<std::string> layers;
    std::size_t steps = 0, batch = 0, positions = 0, dim = 0;
    std::vector<std::string> notes;
    std::vector<dump::Problem> skipped;  // datasets the dump reader skipped on purpose (dump::skipped())
};
Report run(const Options& o);  // throws KvError on bad input

// The FP8 attention of one layer (all steps), E4M3 under policy p (not token_head).
std::vector<AttentionRow> fp8_attention(const std::string& layer, const std::vector<Tensor4>& q,
                                        const std::vector<Tensor4>& k, const std::vector<Tensor4>& v, ScalePolicy p);

std::string to_json(const Report& r);
std::string to_csv(const Report& r);  // the per-head rows
// The text of `fp8kit kv`: per (layer, tensor, format, policy) the heads summed and the worst
// head's SQNR, FP8 attention's SQNR per head, then the notes.
void write_text(const Report& r, std::FILE* out);

}  // namespace fp8kit::kv
