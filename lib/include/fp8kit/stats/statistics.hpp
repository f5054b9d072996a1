// FP8 statistics of a tensor for a format, a scale and a policy (docs/statistics.md defines each
// number exactly). Inputs are raw bits as in quantize.hpp. The computation is exact where it can
// be (counts, codes, amax) and accumulates sums in binary64 over fixed-size blocks reduced in a
// fixed order, so every result is bitwise identical for any OpenMP thread count.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/numerics/element_stats.hpp"
#include "fp8kit/recipes.hpp"

namespace fp8kit {

// Exponent histogram of s = fl32(x * scale): bin kExpHistZeroBin holds s == +-0, bins
// exp_hist_bin(e) hold floor(log2|s|) = e for e in [-149, 127] (float32 subnormals included,
// read from the bits), kExpHistNonfiniteBin holds NaN/Inf inputs and finite x with Inf s.
// The binning and the per-element definitions are numerics/element_stats.hpp.
inline constexpr int kExpHistMinExp = numerics::kHistogramMinExp;
inline constexpr int kExpHistMaxExp = numerics::kHistogramMaxExp;
inline constexpr std::size_t kExpHistZeroBin = numerics::kHistogramZeroBin;
inline constexpr std::size_t kExpHistNonfiniteBin = numerics::kHistogramNonfiniteBin;  // 278
inline constexpr std::size_t kExpHistBins = numerics::kHistogramBins;                  // 279
constexpr std::size_t exp_hist_bin(int e) { return static_cast<std::size_t>(numerics::histogram_bin_of_exponent(e)); }
constexpr int exp_hist_exponent(std::size_t bin) { return numerics::histogram_exponent(static_cast<int>(bin)); }

// numel, zeros, nan, inf, underflow, subnormal, overflow, te_underflow, te_overflow, amax,
// min_nonzero, sum_x2, sum_err2, exp_hist; finite(), mse(), sqnr_db(), dynamic_range_binades(),
// merge(): the type the CUDA statistics kernel returns too (numerics/element_stats.hpp).
using numerics::QuantStats;

struct QuantConfig {
    Format format;
    float scale;  // finite and > 0 (std::invalid_argument otherwise)
    Policy policy;
    float scale_inv = 0;     // 0: fl32(1 / scale); recipes whose dequantisation scale is primary
                             // (DeepGEMM, MX) pass theirs
    std::uint64_t seed = 0;  // stochastic rounding: element i draws emu::stochastic_bits(seed, i)
};

// The element loop compute_stats and compute_block_stats use. `fast` (the default) serves
// float32, bfloat16 and float16 inputs under deterministic rounding with branch-free integer
// tests on the bits and 8 interleaved binary64 accumulators per sum; everything else, and all of
// it under `general`, goes through the per-element loop the fast one is tested against. Counts,
// amax, min_nonzero and histograms are identical; the sums may differ in their last bits
// (different addition order). For tests and benchmarks; process-wide.
enum class StatsPath { fast, general };
void set_stats_path(StatsPath p);
StatsPath stats_path();
// The loop compute_stats would use now for these inputs: "avx512" or "general".
const char* stats_loop(Format format, Wide type, const Policy& policy);

// All statistics of n elements of `type` (raw bits) cast with `cfg`.
QuantStats compute_stats(const void* data, Wide type, std::size_t n, const QuantConfig& cfg);

// The statistics of n copies of the elements `s` describes (a fill-value run: s from
// compute_stats on the one value). Counts and the histogram are multiplied, exactly; amax and
// min_nonzero are unchanged; the binary64 sums are n * sum, one rounding: the correctly rounded
// sum of the n copies, where a loop over them rounds at every addition (they agree to within
// n * 2^-53 relative, and exactly when the sum is 0 or n and the sum are powers of two).
// n == 0 gives empty statistics. A count past 2^64 is std::overflow_error.
QuantStats times(const QuantStats& s, std::uint64_t n);

// max |x| as TE's amax reduction (fmaxf) gives it: NaN ignored, +-Inf gives +Inf, 0 for n == 0
// or all NaN. f64 data: the binary64 maximum rounded once to float32 (RNE, Inf past FLT_MAX).
float amax_of(const void* data, Wide type, std::size_t n);
// The same on the calling thread only (no OpenMP team): for pieces of a tensor on the workers of
// the thread pool (parallel/pool.hpp), whose maxima combine exactly in any order.
float amax_of_here(const void* data, Wide type, std::size_t n);
// Whether elements [first, first + count) hold a NaN (the block amax of the rules whose amax keeps
// NaN: numerics::rule_amax_keeps_nan, rule_block_amax).
bool any_nan(const void* data, Wide type, std::size_t first, std::size_t count);

// ---- Block recipes --------------------------------------------------------------------------

// One block-scaled cast: tiles of block_rows x block_cols over a row-major (rows, cols) tensor,
// edge tiles partial, each with its own scale from `rule` applied to the tile's amax_of.
struct BlockRecipe {
    Format format;
    int block_rows, block_cols;  // >= 1 (1 x cols is rowwise, 1 x 32 MX, 128 x 128 DeepSeek
                                 // weights), or 0 x 0 for one block covering the whole tensor
    ScaleRule rule;              // te, torchao, deepseek, mx_roundup, mx_ocp_floor (msamp: in-time)
    double epsilon;              // te: fl32(eps); torchao: binary64 clamp; deepseek: fl32 amax floor
    bool pow2;                   // te/torchao: power-of-two floor; deepseek: UE8M0 round-up
    float value_for_inf;         // te only
    Policy policy;
    // RoleSpec::columnwise_rht: the blocks are those of the column-wise copy (columnwise_rht_copy:
    // cols x rows, TE's random Hadamard transform applied), not of the data as given. Needs 1 x 16
    // blocks (TE's RHT dimension is the NVFP4 tile length) and a row count that is a multiple of 16.
    bool columnwise_rht = false;
};
// The column-wise copy TE's NVFP4 recipe quantises for the wgrad GEMM, of a row-major rows x cols
// tensor: te_rht16_columnwise (convert/hadamard.hpp) of the data, i.e. x^T (cols x rows) with
// every 16 elements along a row multiplied by diag(s) H16 / 4 and rounded once to the input type
// (f64 data is first rounded to f32, RNE, as quantize_blocks reads it). TE
// custom_recipes/quantization_nvfp4.py NVFP4QuantizerRef._quantize: col_input =
// _apply_rht(tensor.t()), global_amax_col = max |col_input|. std::invalid_argument naming the row
// count when it is not a multiple of 16 (TE asserts the same).
struct ColumnwiseCopy {
    std::vector<unsigned char> bytes;
    Wide type;
    std::size_t rows, cols;  // the copy's: the input's cols and rows
};
ColumnwiseCopy columnwise_rht_copy(const void* data, Wide type, std::size_t rows, std::size_t cols);
// std::invalid_argument when br cannot be applied to a rows x cols tensor (columnwise_rht: a
// row count that is not a multiple of 16); the message says why and names the remedy.
void check_block_input(const BlockRecipe& br, std::size_t rows, std::size_t cols);
// The block cast of a preset for one role on a tensor with `cols` columns: tensor granularity
// gives 0 x 0, rowwise 1 x cols (std::invalid_argument for delayed/windowed recipes).
BlockRecipe block_recipe(const RecipeSpec& r, Role role, std::size_t cols);

struct BlockStats {
    // Tile: the rows x cols one scale covers (BlockRecipe's 0 x 0 resolved to the whole tensor);
    // grid: how many tiles down and across, edge tiles partial (ceil(rows / tile_rows), ...).
    std::size_t tile_rows = 0, tile_cols = 0;
    std::size_t grid_rows = 0, grid_cols = 0;
    std::size_t blocks = 0;  // grid_rows * grid_cols
    QuantStats total;        // the whole tensor cast with per-block scales (per-block stats merged in order)
    // Distribution of scale_inv over blocks: exponent histogram from the bits (same bins as
    // QuantStats::exp_hist), minimum and maximum.
    std::array<std::uint64_t, kExpHistBins> scale_inv_exp_hist{};
    double scale_inv_min = 0, scale_inv_max = 0;
    // Per-block dynamic range log2(block amax) - log2(block min nonzero), over blocks with a
    // nonzero finite value: maximum (TE's max_blockwise_dynamic_range), mean, and a histogram of
    // its floor in binades (bins 0..kDrBins-2, last bin for >= kDrBins-1).
    static constexpr std::size_t kDrBins = 64;
    std::size_t blocks_with_range = 0;
    double dr_max = 0, dr_mean = 0;
    std::array<std::uint64_t, kDrBins> dr_hist{};
    std::vector<float> scale_inv;  // one per block: grid_rows x grid_cols, row-major
    // BlockRecipe::columnwise_rht: every field above describes the column-wise copy (cols x rows,
    // after TE's RHT); its blocks run along the input's columns.
    bool columnwise_rht = false;
};

BlockStats compute_block_stats(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br);

// BlockStats' per-tile fields (scale_inv_exp_hist, scale_inv_min/max, blocks_with_range, dr_max,
// dr_mean, dr_hist) from out.scale_inv and each tile's extremes over its finite |x| (tile_amax[t],
// tile_min_nonzero[t]: 0 when the tile has no nonzero finite value), out.blocks tiles in row-major
// order; the other fields are left as they are. compute_block_stats calls it; so does the GPU path
// of fp8kit.stats (the tiles' extremes from cuda::block_statistics_async).
void summarize_tiles(BlockStats& out, const double* tile_amax, const double* tile_min_nonzero);

// A strip of whole tile rows of a larger tensor (sweep's DumpedBlocks, which bounds the memory of
// the block presets): what its statistics take from the rest of the tensor, so that the strips'
// statistics are the whole tensor's.
struct BlockStrip {
    // Rules with a second-level scale (numerics::rule_uses_global_amax: NVFP4's S_enc, torchao's
    // per_tensor_scale): the whole tensor's block_global_amax, used instead of the strip's own.
    float global_amax = 0;
    // The merged totals of the strips above this one (null for the first): the result's total
    // continues them, its binary64 sums added to theirs block after block, so strips in order give
    // compute_block_stats' total on the whole tensor bit for bit. With columnwise_rht the copy's
    // blocks run down the input's columns, across the strips: counts, histogram and extremes are
    // still exact; sum_x2 and sum_err2 are the same nonnegative terms grouped otherwise (within
    // 2 * blocks * 2^-53 of each other, relative; docs/statistics.md).
    const QuantStats* before = nullptr;
    // Where the strip lies: its first row and the whole tensor's row count (0: this strip's own,
    // a strip that is the whole tensor). Stochastic rounding draws each element's bits by its
    // row-major index in the whole tensor (with columnwise_rht: in the whole column-wise copy), so
    // strips give the codes of the whole-tensor call.
    std::size_t first_row = 0;
    std::size_t total_rows = 0;
};
// compute_block_stats on one strip: total is `before` merged with this strip (the other fields
// describe this strip alone).
BlockStats compute_block_stats(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br,
                               const BlockStrip& strip);
// The amax a rule with a second-level scale takes of the data: amax_of, or with
// br.columnwise_rht that of the column-wise copy (TE's global_amax_col). A maximum: that of a
// tensor is the maximum of its strips' (strips of a multiple of 16 rows with columnwise_rht).
float block_global_amax(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br);

}  // namespace fp8kit
