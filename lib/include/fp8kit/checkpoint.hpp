// Quantised inference checkpoints (issue 28): a folder of safetensors shards (with
// model.safetensors.index.json), config.json and, for ModelOpt, hf_quant_config.json; or a
// TensorRT-LLM checkpoint (issue 51: config.json with "architecture", "mapping" and "quantization",
// weights in rank<N>.safetensors under TensorRT-LLM's names), as ModelOpt's
// export_tensorrt_llm_checkpoint writes it.
// `Folder` lists every quantised layer (scheme, scale convention, excluded modules) without
// reading tensor data; `check` reads one layer at a time, so memory stays bounded by a layer's
// largest tensors, whatever the checkpoint's size. docs/inference.md has every formula and its
// source file.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace fp8kit::checkpoint {

// Bad input (a missing folder, unreadable config, broken shard): the CLI exits 2.
struct CheckpointError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class Producer { modelopt, compressed_tensors, deepseek, gpt_oss, unknown };
// w4a8: ModelOpt W4A8_AWQ: INT4 weights (two per byte, packed along the output rows), one float32
// scale per group of the input dimension, an FP8 per-tensor second stage (weight_scale_2).
// int4: ModelOpt W4A16_AWQ (INT4_AWQ_CFG, INT4_BLOCKWISE_WEIGHT_ONLY_CFG): W4A8's INT4 weights and
// group scales without the second stage. int8: ModelOpt W8A16 / W8A8_SQ_PER_CHANNEL (INT8_*_CFG):
// I8 weights, one float32 scale per output row.
enum class Scheme { none, fp8_tensor, fp8_channel, fp8_block, nvfp4, mxfp4, mxfp8, w4a8, int4, int8 };
// dequant: x = code * scale (ModelOpt weight_scale, DeepSeek weight_scale_inv);
// reciprocal: x = code / scale (compressed-tensors' NVFP4 weight_global_scale).
enum class Convention { dequant, reciprocal };

const char* name(Producer p);
const char* name(Scheme s);
const char* name(Convention c);

// One tensor of the checkpoint as listed in its shard's header.
struct TensorRef {
    std::string name, dtype;  // safetensors dtype string: "F8_E4M3", "U8", "BF16", ...
    std::vector<std::uint64_t> shape;
    std::size_t shard = 0;
};

// A tensor's stored bytes (little-endian, as in the file) and what they are.
// Tensor bytes: large buffers on transparent huge pages where Linux offers them (madvise), so
// reading a layer of tens of MB costs tens of page faults, not tens of thousands
// (scripts/bench/bench_checkpoint_check.sh: most of the time left was the kernel's page faults).
void* allocate_tensor_bytes(std::size_t n);
void free_tensor_bytes(void* p, std::size_t n);  // keeps up to 4 large buffers for reuse
void release_tensor_buffers();                   // frees the kept buffers

// A vector allocator that leaves new elements uninitialised: a tensor read is written whole by the
// reader, so zero-filling it first would be a second pass over every byte (a multi-GB checkpoint:
// half the time of `checkpoint check`, scripts/bench/bench_checkpoint_check.sh).
template <class T>
struct UninitAllocator : std::allocator<T> {
    using value_type = T;
    T* allocate(std::size_t n) { return static_cast<T*>(allocate_tensor_bytes(n * sizeof(T))); }
    void deallocate(T* p, std::size_t n) noexcept { free_tensor_bytes(p, n * sizeof(T)); }
    template <class U>
    struct rebind {
        using other = UninitAllocator<U>;
    };
    UninitAllocator() = default;
    template <class U>
    UninitAllocator(const UninitAllocator<U>&) {}
    template <class U>
    void construct(U* p) noexcept {
        ::new (static_cast<void*>(p)) U;
    }
    template <class U, class... A>
    void construct(U* p, A&&... a) {
        ::new (static_cast<void*>(p)) U(std::forward<A>(a)...);
    }
};

struct RawTensor {
    std::string dtype;
    std::vector<std::uint64_t> shape;
    std::vector<std::uint8_t, UninitAllocator<std::uint8_t>> bytes;
    std::uint64_t numel() const;
    float at(std::uint64_t i) const;       // element i as float32 (exact for every dtype read here)
    std::vector<float> to_floats() const;  // every element, as at() (the dtype tested once)
};

// A quantised (or excluded) linear layer: the module prefix and the tensors that make it up.
struct Layer {
    std::string module;  // "model.layers.0.self_attn.q_proj"
    Scheme scheme = Scheme::none;
    std::string weight;           // codes: F8_E4M3 or packed U8 (two E2M1 per byte)
    std::string scale;            // per tensor / channel / block scale
    std::string global_scale;     // NVFP4 second level (weight_scale_2 / weight_global_scale)
    std::string input_scale;      // static activation scale, if any
    std::string pre_quant_scale;  // ModelOpt AWQ smoothing factor of the input (x * s), if any
    Convention scale_convention = Convention::dequant;
    Convention global_convention = Convention::dequant;
    std::uint64_t rows = 0, cols = 0;              // logical weight shape (unpacked)
    std::uint64_t block_rows = 1, block_cols = 0;  // the block one scale covers (0: whole extent)
    bool excluded = false;                         // listed as not quantised by the config (ignore / exclude_modules)
    // ModelOpt's quant_algo for this layer (hf_quant_config's, or its quantized_layers entry under
    // MIXED_PRECISION): W4A8_NVFP4_FP8's weight_scale_2 is amax / 448, not amax / 2688.
    std::string quant_algo;
    // Stacked experts: a 3-D weight [experts, r, c] is checked as rows = experts * r (its scales
    // [experts, ...] in the same row order); a per-expert per-tensor scale is a block of r x c.
    std::uint64_t experts = 0;
    // TensorRT-LLM checkpoints: the Hugging Face modules whose weights this layer holds, rows in
    // this order (a fused qkv: q_proj, k_proj, v_proj; stacked expert fc: per expert up, gate),
    // where `--reference` finds the original. Empty: the reference holds `module` itself.
    std::vector<std::string> sources;
    // TensorRT-LLM checkpoints: the Hugging Face modules whose weights share one amax with this
    // layer's (ModelOpt's TensorRT-LLM export fuses gate and up: layer_utils.py build_mlp_config).
    std::vector<std::string> amax_group;
};

// How ModelOpt split one tensor of a TensorRT-LLM checkpoint among tp ranks
// (modelopt/torch/export/postprocess.py _split_model_config_for_tp): along `dim`, each rank
// holding, per piece, `parts[i]` of it (qkv: its q, k and v rows; stacked expert fc: its w3 and
// w1 rows; otherwise one piece), so the whole is piece by piece, rank by rank.
struct RankSplit {
    std::size_t dim = 0;
    std::vector<std::uint64_t> parts;
};

// The checkpoint folder, listed (headers and configs only).
class Folder {
public:
    // unquantized: an original (reference) folder: no quantisation config needed.
    explicit Folder(const std::string& dir, bool unquantized = false);  // throws CheckpointError
    ~Folder();
    Folder(Folder&&) noexcept;
    Producer producer() const { return producer_; }
    const std::string& dir() const { return dir_; }
    const std::vector<Layer>& layers() const { return layers_; }
    const std::vector<std::string>& exclude_patterns() const { return exclude_; }
    const std::map<std::string, TensorRef>& tensors() const { return tensors_; }
    bool has(const std::string& name) const { return tensors_.count(name) != 0; }
    RawTensor read(const std::string& name) const;  // throws CheckpointError
    // The stored bytes of `name` in pieces (first byte offset, pointer, byte count), in order,
    // through the reader's reused buffers: a scan that needs no whole layer. Throws CheckpointError.
    void stream(const std::string& name,
                const std::function<void(std::uint64_t first, const std::uint8_t* bytes, std::size_t count)>& fn) const;
    std::string quant_algo;  // as the config names it
    std::string kv_cache_algo;
    std::string kv_cache_strategy;  // compressed-tensors kv_cache_scheme.strategy ("tensor", "attn_head")
    std::string scale_fmt;          // config.json quantization_config.scale_fmt ("ue8m0": power-of-two block scales)
    // A quant_method "fp8" config written by transformers (FineGrainedFP8Config.to_dict writes
    // `dequantize`; DeepSeek-V3's own config.json has `fmt` and no `dequantize`): its block
    // rules are transformers' (detail::block_rules).
    bool transformers_fp8 = false;
    // compressed-tensors config_groups targets (class names "Linear", or names / "re:" patterns):
    // a quantised layer none of them names (llm-compressor model_free_ptq quantises by tensor
    // name, embed_tokens included) is noted. Empty: no targets given.
    std::vector<std::string> targets;
    // ModelOpt MIXED_PRECISION: quantized_layers, module -> (quant_algo, group_size; 0 if none).
    std::map<std::string, std::pair<std::string, std::uint64_t>> quantized_layers;
    // The layout was recognised from the tensor names alone (gpt-oss original/: `.blocks` +
    // `.scales`, config.json without quantization_config).
    bool layout_from_names = false;
    // A TensorRT-LLM checkpoint (config.json "architecture" + rank0.safetensors): its
    // architecture ("LlamaForCausalLM", "MixtralForCausalLM").
    bool trtllm = false;
    std::string architecture;
    // A TensorRT-LLM checkpoint's config.json vocab_size (0: not given): the real rows of
    // vocab_embedding and lm_head, which ModelOpt pads with zero rows (lib/src/checkpoint/trtllm_rows.cpp).
    std::uint64_t vocab_size = 0;
    // A TensorRT-LLM checkpoint of tp_size above num_key_value_heads: ModelOpt repeats each KV
    // head kv_repeats times in qkv (layer_utils.py build_qkv, dup_kv_weight), head_size rows each.
    std::uint64_t kv_repeats = 1, head_size = 0;
    // A TensorRT-LLM checkpoint's tp_size (config.json "mapping"): its rank<r>.safetensors for
    // r < tp, every split tensor listed and read whole (put back together as ModelOpt split it).
    std::uint64_t tp() const { return tp_; }
    // tp > 1: the rank whose file holds stored element `index` (row-major, of the whole tensor)
    // of a split tensor; nullopt for a tensor every rank holds whole.
    std::optional<std::uint64_t> rank_of(const std::string& name, std::uint64_t index) const;
    // tp > 1: the tensors every rank holds whole whose bytes in some rank differ from rank0's:
    // (name, the first such rank). Reads each of them from every rank. Throws CheckpointError.
    std::vector<std::pair<std::string, std::uint64_t>> rank_differences() const;

private:
    void read_configs();
    void list_layers();
    bool read_trtllm_config();  // lib/src/checkpoint/trtllm.cpp; false: not that layout
    void list_trtllm_layers();
    void set_extent(Layer& L, const TensorRef& weight) const;
    void merge_trtllm_ranks(const std::vector<std::map<std::string, TensorRef>>& ranks);
    RawTensor read_shard(std::size_t shard, const std::string& name, const TensorRef& as) const;
    std::uint64_t tp_ = 1;
    std::uint64_t q_rows_ = 0, kv_rows_ = 0;   // TensorRT-LLM: rows of q and of k (= of v) in qkv
    std::map<std::string, RankSplit> splits_;  // tp > 1: the tensors split among the ranks
    std::string dir_;
    Producer producer_ = Producer::unknown;
    std::vector<std::string> exclude_;
    std::string weight_strategy_;                        // compressed-tensors config_groups weights.strategy
    std::uint64_t block_rows_ = 128, block_cols_ = 128;  // weight_block_size / block_structure
    std::uint64_t group_size_ =
        0;  // ModelOpt hf_quant_config group_size (W4A8_AWQ INT4 groups); 0: from the scale's shape
    std::vector<std::string> shards_;
    std::map<std::string, TensorRef> tensors_;
    std::vector<Layer> layers_;
    struct Shards;
    std::unique_ptr<Shards> open_;
};

// One finding of a check. `failed` findings make the CLI exit 1; the others are notes.
struct Finding {
    std::string tensor, check, message;
    bool failed = true;
};

// What a serving engine does with one KV / attention scale name, transcribed from the engine's
// own loader (lib/src/checkpoint/kv_names.cpp cites each file): loaded under the same name,
// renamed (loaded under another), replaced (the engine uses another value: 1.0, or k_scale),
// dropped (never loaded; silently or with a warning), rejected (loading fails: KeyError, assert),
// undetermined (the transcribed source does not decide it).
enum class KvFate { loaded, renamed, replaced, dropped, rejected, undetermined };
const char* name(KvFate f);
struct KvOutcome {
    KvFate fate = KvFate::undetermined;
    std::string detail;  // what happens, with the source function
};
inline constexpr const char* kKvEngines[3] = {"vLLM", "SGLang", "TensorRT-LLM"};

// How the KV/attention scales are named, and what each engine does with the name.
struct KvScale {
    std::string name;
    std::string vllm;      // "loaded as <param>", "dropped (...)" (= engines[0].detail)
    bool dropped = false;  // vLLM does not load it (as before: q_scale replaced by k_scale counts)
    bool present = true;   // false: expected but missing (name: the name the producer would use)
    std::string dtype;
    std::vector<std::uint64_t> shape;
    KvOutcome engines[3];  // vLLM, SGLang, TensorRT-LLM (kKvEngines)
};

// A layer re-quantised from the original weights and compared with the checkpoint.
struct Comparison {
    std::string module;
    std::string verdict;  // "bit-exact", or the class: "scale convention inverted", "rounding",
                          // "saturation", "block layout", "nibble order", "different amax", "codes differ"
    std::uint64_t elements = 0, code_mismatches = 0, scale_mismatches = 0;
    // The fewest scales any of the producer's rules (CPU, CUDA arithmetic, ...) left differing: a
    // GPU-written checkpoint differs from the CPU rule by an ulp in many scales, not by smoothing.
    std::uint64_t fewest_scale_mismatches = 0;
    double sqnr_db = 0, max_rel_error = 0;  // dequantised checkpoint against the original
    // The producer rule the verdict is under: "<producer> (CPU arithmetic)", or, where only the
    // producer's formula under torch's CUDA arithmetic is bit-exact (a checkpoint written on a
    // GPU), "<producer> (CUDA arithmetic)". A layer matching neither keeps the CPU rule's verdict.
    std::string variant;
    // TensorRT-LLM checkpoints of tp > 1: the ranks whose files hold the differing codes and
    // split scales (Folder::rank_of), ascending.
    std::vector<std::uint64_t> ranks;
};

struct Report {
    std::string dir;
    std::string engine;  // the engine named by CheckOptions::engine ("" for none)
    Producer producer = Producer::unknown;
    std::vector<Layer> layers;
    std::vector<Finding> findings;
    std::vector<KvScale> kv;
    std::vector<Comparison> comparisons;
    bool failed() const;
};

// What a check is run for. engine: "" (none), "vllm", "sglang", "trtllm" or "all". What an engine does
// with a name (drops, renames wrongly, rejects at load) is a note about that engine, and a failure
// only for the engine named here ("all": every engine): the checkpoint is not wrong for an engine
// nobody targets.
struct CheckOptions {
    std::optional<std::string> reference;
    std::string engine;
};
// The engines CheckOptions::engine accepts, in kKvEngines order.
inline constexpr const char* kEngineKeys[3] = {"vllm", "sglang", "trtllm"};

Report check(const std::string& dir, const std::optional<std::string>& reference = std::nullopt);
Report check(const std::string& dir, const CheckOptions& options);  // throws CheckpointError (an unknown engine too)
// The verdict line: "OK", or "FAILED (N failed: k <class>, ...)" counting every failed finding by
// its check and every comparison that is not bit-exact by its verdict.
std::string summary(const Report& r);
// Layer L's weight as stored, dequantised: each code's value times the factor of its block
// (block scale; NVFP4 also its global scale, in the producer's convention), one float32 multiply,
// row-major, L.rows x L.cols. For block FP8 this is DeepSeek-V3 inference/kernel.py
// weight_dequant's `x * s` (tests/checkpoint/test_checkpoint_readback.cpp compares the bytes).
// Throws CheckpointError where L's scale tensor is missing or holds too few scales.
std::vector<float> dequantize(const Folder& F, const Layer& L);
std::string to_json(const Report& r);  // one JSON document
std::string to_csv(const Report& r);   // one row per layer: module, scheme, convention, verdict, ...
// The text of `fp8kit checkpoint check`: producer, layers and their schemes, what each engine does
// with each KV / attention scale name, the comparison with the original, findings, summary.
void write_text(const Report& r, std::FILE* out);

}  // namespace fp8kit::checkpoint
