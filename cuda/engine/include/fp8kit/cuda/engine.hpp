// The host side of the GPU statistics and GEMM models, written once for the CLI (--device cuda:
// inspect, sweep, validate, gemm) and the Python module (fp8kit.stats on device arrays, fp8kit.gemm
// and validate_gemm with device='cuda'): lib's recipe and statistics
// types in and out, fp8kit::cuda's kernels underneath. fp8kit::core never links CUDA
// (fp8kit/stats/device.hpp) and fp8kit::cuda never links fp8kit::core, so this layer, which needs
// both, is a library of its own (fp8kit::cuda_engine).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "fp8kit/cuda/statistics_async.hpp"
#include "fp8kit/gemm/device.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace fp8kit::cuda {

// The GPU plan of a block recipe's cast from `from`, or nullopt where the GPU does not serve it:
// tensor-wide and row-wise scales (block_rows < 1: the per-tensor statistics kernel serves
// those), formats without cast kernels, E8M0 elements, f64 inputs, and the rules that keep a NaN
// block amax (torchao's MX and single-level NVFP4), which block_statistics_async refuses.
std::optional<BlockStatsPlan> block_stats_plan(const BlockRecipe& br, Wide from);

// The grid of tiles block_statistics_async writes for a rows x cols tensor (columnwise_rht: that
// of the cols x rows copy), as (grid_rows, grid_cols).
std::pair<std::size_t, std::size_t> block_grid(const BlockStatsPlan& plan, std::size_t rows, std::size_t cols);

// compute_block_stats(x, plan.from, rows, cols, recipe) of the device tensor d_in (row-major
// rows x cols), from one block_statistics_async and a wait: the record's totals, and the per-tile
// fields by lib's summarize_tiles from each tile's scale_inv and extremes (copied to the host, one
// value each). d_scale_inv: grid_rows x grid_cols float32 on the device that receives each tile's
// scale_inv, or null (a temporary). Counts, extremes, histograms and scales are lib's bits; the two
// binary64 sums within the order tolerance of docs/cuda.md.
BlockStats block_stats(const BlockStatsPlan& plan, const void* d_in, std::size_t rows, std::size_t cols,
                       float* d_scale_inv = nullptr, std::uint64_t seed = 0, Stream stream = nullptr);

// gemm::gemm(rq, m) on the GPU (gemm_model): host operands copied in, host bits out; the same
// bits as lib's CPU model. std::invalid_argument for a model it does not compute (`exact`).
std::vector<std::uint32_t> gemm_on_gpu(const gemm::GemmRequest& rq, const gemm::AccumModel& m);
// gemm::binary64_sums(rq) on the GPU (gemm_binary64_sums): the same bits.
gemm::Binary64Sums gemm_sums_on_gpu(const gemm::GemmRequest& rq);

// Registers this process's GPU engines with lib:
// - statistics (fp8kit::register_stats_engine): per-tensor casts by cuda::statistics and block
//   recipes by block_stats above, host data copied to one device buffer;
// - GEMM (gemm::register_gemm_engine): gemm_on_gpu and gemm_sums_on_gpu.
// After it, select_device / gemm::select_gemm_device with Device::cuda use the GPU where one can
// be used. The CLI calls it at start-up; the Python module on import.
void use_gpu();
void register_gemm_engine();  // the GEMM half of use_gpu (gemm_engine.cpp)

}  // namespace fp8kit::cuda
