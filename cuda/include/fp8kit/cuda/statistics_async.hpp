// Statistics without a host round trip: the scale comes from a device amax through the recipe's
// rule (numerics::rule_scale on the device), the result goes to a device record, and nothing
// waits, so a training step can queue the statistics of all its tensors and read them once
// (fp8kit.torch.Monitor). Plain C++ types, no CUDA headers (like kernels.hpp).
//
// The numbers are those of statistics() (kernels.hpp): both run the same kernel on the same
// record (statistics() is this call with a host scale, then a copy and a wait), so counts,
// extremes and the histogram are exact and the two binary64 sums have the same bits for the same
// device and launch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::cuda {

// One statistics result in device memory (plain data; copy it to the host and read it with
// stats_of_record). statistics_async fills a record that holds zeros (all bytes) when the call
// runs on the stream: zero an array of them with one cudaMemsetAsync.
struct StatsRecord {
    std::uint64_t counts[16];  // the kernel's counters (its own order; stats_of_record names them)
    std::uint64_t histogram[numerics::kHistogramBins];
    std::uint32_t amax_bits, min_bits;  // float32 bits of amax and min_nonzero of |x| (0xFFFFFFFF: none)
    double sums[2];                     // sum x^2, sum (x - x^)^2
    std::uint64_t numel;                // elements the statistics cover (the sample)
    float scale, scale_inv;             // the scale the statistics used
    std::uint32_t scale_ok;             // 0: the rule gave a scale or scale_inv not finite and > 0
    std::uint32_t sample;               // the `sample` argument
    std::uint32_t min_not;              // working: ~(min |x| bits), max-reduced (0: none yet)
    std::uint32_t ctas_done;            // working: CTAs finished; the last one completes the record
};

// Bytes of the workspace statistics_async needs (the per-CTA partial sums). Calls queued on one
// stream may share one workspace (each call is finished with it before the next starts); calls on
// different streams need their own.
std::size_t statistics_workspace_bytes();

// Elements of a tensor of n elements that `sample` keeps: the elements of the blocks of 16
// consecutive elements whose block index is a multiple of sample (sample = 1: all n).
std::uint64_t sampled_count(std::size_t n, std::uint32_t sample);

// Statistics of `in` (n elements) under format `to` and `policy` with the scale of `rule` at the
// amax *d_amax (read on the device when the stream reaches this call): scale, scale_inv =
// numerics::rule_scale(rule, *d_amax), as recipe_scale gives them on the host. Fills *d_record
// (zeroed, see StatsRecord) with one kernel launch and no allocation.
// sample >= 1: only the blocks of 16 elements at indices 0, sample, 2 * sample, ... are counted
// (stochastic rounding draws the bits of each element's index in the whole tensor); the amax the
// scale comes from is whatever *d_amax holds (the whole tensor's, in the monitor). Rules that need
// a global amax (NVFP4) are rejected (their formats have no statistics kernel). Asynchronous.
void statistics_async(Format to, Wide from, const void* in, std::size_t n, const Policy& policy,
                      const numerics::ScaleParams& rule, const float* d_amax, StatsRecord* d_record, void* d_workspace,
                      std::uint32_t sample = 1, std::uint64_t seed = 0, std::uint64_t first_index = 0,
                      Stream stream = nullptr);

// One tensorwise cast whose statistics statistics_async_multi computes: statistics_async's
// format, input type, policy and rule.
struct StatsPlan {
    Format to;
    Wide from;
    Policy policy;
    numerics::ScaleParams rule;
};

// statistics_async for each of `count` plans on the same tensor and device amax, into the zeroed
// records d_records[0..count) (contiguous), queued on one stream: record k holds what
// statistics_async(plans[k]...) gives (counts, extremes and histogram exact; the two binary64
// sums to the kernel's order tolerance, docs/cuda.md). Plans whose casts give the same numbers
// when their scales agree (same format, input type, rounding and overflow; NaN encodings that
// both give a NaN code: TE, torchao and MS-AMP's E4M3/E5M2 casts) are computed once when their
// rules give the same scale pair at the amax, which the device decides (TE's and torchao's
// current scaling agree at every finite amax >= torchao's epsilon whose scale is finite: fmax / amax
// rounded once to float32, or in binary64 and then to float32, which is the same for a quotient of
// two floats, since 53 >= 2 * 24 + 2; msamp's power of two differs): the later plan's launch then
// copies the earlier plan's finished record (launched before it on the stream) and does nothing
// else; when the pairs differ it computes its own. One
// workspace of statistics_workspace_bytes() serves all (the launches run one after another).
void statistics_async_multi(const StatsPlan* plans, std::size_t count, const void* in, std::size_t n,
                            const float* d_amax, StatsRecord* d_records, void* d_workspace, std::uint32_t sample = 1,
                            std::uint64_t seed = 0, std::uint64_t first_index = 0, Stream stream = nullptr);

// The monitor's whole work for one tensor, queued on one stream with no wait: the amax into
// *d_amax (compute_amax; otherwise *d_amax already holds it, e.g. reduced across ranks), then
// the statistics of every plan at the scale its rule gives at that amax, into the zeroed records
// d_records[0..count) (contiguous). The numbers are statistics_async's for each plan (counts,
// extremes, histogram and scale exact; the two binary64 sums to the 1e-9 relative order
// tolerance of docs/cuda.md).
// How: a float16 or bfloat16 tensor is read once, into a histogram of its 2^15 magnitudes (of the
// sampled blocks only when sample > 1; the other elements are read for the amax alone), and every
// plan whose rounding treats +x and -x alike (nearest-even, nearest-away, toward zero; up to 8
// such plans) is evaluated once per magnitude present (two launches in all, whatever the number of
// plans: docs/cuda.md "Statistics from a histogram of magnitudes").
// Other plans, and float32 tensors, take the amax kernel and statistics_async_multi.
// d_workspace: watch_workspace_bytes() bytes, zeroed (all bytes) before its first use; every call
// leaves it zeroed. Calls on one stream may share it; calls on different streams need their own.
void watch_async(const StatsPlan* plans, std::size_t count, const void* in, std::size_t n, float* d_amax,
                 bool compute_amax, StatsRecord* d_records, void* d_workspace, std::uint32_t sample = 1,
                 std::uint64_t seed = 0, std::uint64_t first_index = 0, Stream stream = nullptr);

// A block-scaled cast (lib's BlockRecipe): tiles of block_rows x block_cols over a row-major
// tensor, edge tiles partial, each scaled by `rule` at the tile's amax (NVFP4's rules also at the
// tensor's global amax: block_statistics_async's d_global_amax).
struct BlockStatsPlan {
    Format to;
    Wide from;
    Policy policy;
    numerics::ScaleParams rule;
    int block_rows, block_cols;  // >= 1
    // lib's BlockRecipe::columnwise_rht (TE NVFP4's input and gradient roles): the statistics of
    // TE's column-wise copy (te_rht16_columnwise, hadamard.hpp: cols x rows), as
    // compute_block_stats gives them. Needs 1 x 16 blocks and a row count that is a multiple of 16.
    bool columnwise_rht = false;
};

// fp8kit::compute_block_stats(in, from, rows, cols, recipe).total on the device, into the zeroed
// *d_record (its scale and scale_inv stay 0: one pair per tile), and each tile's scale_inv into
// d_scale_inv (grid_rows x grid_cols float32, row-major; null: not written; bit for bit lib's,
// except that a NaN scale_inv, which NVFP4's rules give at a global amax of Inf, is the GPU's NaN
// 0x7FFFFFFF where x86 gives 0xFFC00000, as quantize_blocks in blocks.hpp). Counts, extremes and
// histogram exact; the two binary64 sums to the 1e-9 relative order tolerance (docs/cuda.md).
// Stochastic rounding draws element (r, c)'s bits from emu::stochastic_bits(seed, r * cols + c)
// (compute_block_stats: seed 0). d_workspace: statistics_workspace_bytes(). d_tile_amax and
// d_tile_min (both or neither; grid_rows x grid_cols float32): each tile's max and min nonzero |x|
// over its finite x (0 when none), what fp8kit::summarize_tiles takes.
// Rules with a global amax (numerics::rule_uses_global_amax: NVFP4's two-level scale) need
// d_global_amax, one device float the call fills first with the tensor's amax (cuda::amax: NaN
// ignored, Inf kept, as lib's amax_of), which the kernel then passes to numerics::set_global_amax,
// the call lib's block_stats makes (std::invalid_argument when null).
// plan.columnwise_rht: the copy is made on the stream into a stream-ordered temporary
// (cudaMallocAsync / cudaFreeAsync), then everything above runs on it (cols x rows; the global
// amax is the copy's, TE's global_amax_col): the grid, tiles and stochastic indices are the copy's.
// Everything is queued on `stream` with no wait.
void block_statistics_async(const BlockStatsPlan& plan, const void* in, std::size_t rows, std::size_t cols,
                            StatsRecord* d_record, float* d_scale_inv, void* d_workspace, std::uint64_t seed = 0,
                            Stream stream = nullptr, float* d_tile_amax = nullptr, float* d_tile_min = nullptr,
                            float* d_global_amax = nullptr);

// Bytes of watch_async's workspace (statistics_workspace_bytes() and the magnitude histogram).
std::size_t watch_workspace_bytes();

// watch_async for the many tensors of a training step, with the evaluation of the magnitudes (K2
// of docs/cuda.md "Statistics from a histogram of magnitudes") of all of them in one launch:
// add() reads the tensor now (K1, into a histogram of its own) and flush() evaluates every
// histogram added since the last flush. K1 must read a tensor where the caller is (before, say,
// an in-place gradient clip), but K2 reads only the histogram, so one launch at the end of the
// step serves every tensor: one launch instead of one per tensor, with all of them in parallel
// on the GPU instead of a short chain of round trips each.
// Records and amax slots hold watch_async's numbers once the stream reaches the end of the
// flush() after their add(). Tensors that the magnitude path does not serve (float32, a plan it
// cannot evaluate: see watch_async) are computed by add() itself, as watch_async does.
// Everything runs on the stream given at construction, without waiting; the batch owns its device
// memory (one histogram of 160 KiB per tensor added between two flushes, at most kMaxItems: the
// batch flushes itself when full).
class WatchBatch {
public:
    static constexpr std::size_t kMaxItems = 512;  // tensors per K2 launch (its parameter space)
    static constexpr std::size_t kMaxGroups = 4;   // distinct plan lists per K2 launch

    explicit WatchBatch(Stream stream = nullptr);
    ~WatchBatch();
    WatchBatch(const WatchBatch&) = delete;
    WatchBatch& operator=(const WatchBatch&) = delete;

    // watch_async's arguments (the workspace is the batch's).
    void add(const StatsPlan* plans, std::size_t count, const void* in, std::size_t n, float* d_amax, bool compute_amax,
             StatsRecord* d_records, std::uint32_t sample = 1, std::uint64_t seed = 0, std::uint64_t first_index = 0);
    // Queues the evaluation of every tensor added since the last flush (nothing if none).
    void flush();
    // Tensors added whose records wait for flush().
    std::size_t pending() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// The statistics of a record copied to the host (after the stream finished). Throws
// std::invalid_argument when the record's scale was not finite and > 0 (statistics() refuses
// such a scale before it starts).
numerics::QuantStats stats_of_record(const StatsRecord& r);

}  // namespace fp8kit::cuda
