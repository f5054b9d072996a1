// Block-scaled quantisation of a 2-D tensor with a BlockRecipe: the codes and the per-block
// scales a framework stores (MX: E8M0 bytes; NVFP4: E4M3 bytes plus the tensor's amax), so that
// they can be compared bit for bit with the framework's own output. Every scale comes from
// numerics::rule_scale (numerics/scale_rules.hpp), the same call compute_block_stats makes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fp8kit/stats/statistics.hpp"

namespace fp8kit {

struct BlockQuantized {
    std::size_t rows = 0, cols = 0;
    std::size_t tile_rows = 0, tile_cols = 0;  // the block one scale covers
    std::size_t grid_rows = 0, grid_cols = 0;  // blocks down and across (edge blocks partial)
    std::vector<std::uint8_t> codes;           // rows x cols, one code per byte (low bits)
    // One entry per block, grid_rows x grid_cols row-major:
    std::vector<std::uint8_t> scale_codes;  // E8M0 (MX rules), E4M3 (NVFP4 rules), 0 otherwise
    std::vector<float> scale;               // the factor the elements are multiplied by
    std::vector<float> scale_inv;           // the factor a code is multiplied by to dequantise
    float global_amax = 0;                  // amax_of the whole tensor (NVFP4's second level)
    // br.columnwise_rht: everything above is of the column-wise copy (columnwise_rht_copy): rows
    // and cols are the input's cols and rows, codes are TE's columnwise data (qx_t), global_amax
    // is taken after the transform (TE's global_amax_col).
    bool columnwise_rht = false;
};

// codes[i] = encode(fl32(x[i] * scale of its block)) under br.policy; float32, bfloat16 and
// float16 inputs widen exactly to float32 (float64 inputs are rounded to float32 first, RNE).
// Stochastic rounding: element i (row-major) draws emu::stochastic_bits(seed, i) (with
// br.columnwise_rht, i indexes the column-wise copy).
// Same result for any thread count.
BlockQuantized quantize_blocks(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br,
                               std::uint64_t seed = 0);

// The dequantised elements of q (rows x cols, row-major) as `to`'s bits (float32, float16 or
// bfloat16; little-endian bytes): to(fl32(decode(code) * f)), f its block's scale_inv, or with
// block_part numerics::rule_block_factor (the operand of a block-scaled GEMM, whose tensor part is
// tensor_factor below; numerics/block_factor.hpp). A NaN code gives its own decode in `to`, a NaN
// product 0x7FC00000 before the rounding. cuda::dequantize_blocks and fake_quantize_blocks compute
// the same bits (cuda/blocks.hpp).
std::vector<std::uint8_t> dequantize_blocks(const BlockQuantized& q, const BlockRecipe& br, Wide to,
                                            bool block_part = false);

// numerics::rule_tensor_factor of q's global amax under br's rule (NVFP4's per-tensor factor; 1
// for every other rule).
float tensor_factor(const BlockQuantized& q, const BlockRecipe& br);

}  // namespace fp8kit
