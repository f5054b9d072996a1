// Block dequantisation with a factor per block, and fake quantisation of a block recipe in one
// call (quantise, then dequantise, the codes kept on the device): the path of fp8kit.torch's
// fake_quantize and Fp8Linear on CUDA tensors (cuda/src/fake_quantize_blocks.cu, docs/cuda.md).
// Plain C++ types: including this needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/cuda/blocks.hpp"

namespace fp8kit::cuda {

// Dequantise codes (one per byte, rows x cols, row-major) block by block, as lib's dequantize with
// a factor per block: out[r][c] = to(fl32(value(code) * d_factor[(r / block_rows) * grid_cols +
// c / block_cols])), value() emu's exact decode, grid_cols = ceil(cols / block_cols); a block shape
// of 0 x 0 is one block over the whole tensor. A NaN code gives its own decode in `to`, a NaN
// product 0x7FC00000 before the rounding to `to` (kernels.hpp dequantize's rule).
void dequantize_blocks(Format from, Wide to, const std::uint8_t* d_codes, std::size_t rows, std::size_t cols,
                       int block_rows, int block_cols, const float* d_factor, void* d_out, Stream stream = nullptr);

// Fake quantisation of one block recipe's role in one call, the codes kept in stream-ordered
// temporaries: quantize_blocks (unpacked codes), then dequantize_blocks into d_out (`to` elements,
// the codes' shape: rows x cols, or cols x rows with spec.columnwise_rht). The factor is
//   - with d_tensor_factor null: each block's scale_inv, so d_out holds lib's dequantised values
//     (fp8kit.torch.fake_quantize's rule);
//   - else numerics::rule_block_factor (the block part: NVFP4's E4M3 scale value, MX's power of
//     two), and *d_tensor_factor (one device float) receives numerics::rule_tensor_factor of the
//     tensor's amax: the operand a block-scaled GEMM sees, exact in bfloat16 under the NVFP4 and
//     MX rules, and the factor its epilogue applies.
// Into bf16, with the NVFP4 and MX blocks and element paths of fp8kit.torch's block-scaled GEMM
// (1 x 16, 16 x 16 and 1 x 32 blocks of e2m1, stochastic rounding in 16-wide blocks only; 1 x 32
// blocks of e4m3 rounded to nearest, saturating, canonical NaN; f32 / bf16 inputs; no
// columnwise_rht), the three steps run as one kernel (cuda/src/block_rows.cu row_fake_kernel),
// with the same output and tensor factor bit for bit.
void fake_quantize_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols, Wide to,
                          void* d_out, float* d_tensor_factor, std::uint64_t seed = 0, Stream stream = nullptr);

// For tests: how many fake_quantize_blocks calls (process-wide, since the library was loaded) ran
// as the one kernel described there rather than as quantize_blocks and dequantize_blocks.
std::uint64_t fake_quantize_blocks_one_kernel_calls();

// fake_quantize_blocks of X^T read where it lies, written in X's layout: X is rows x cols (row-major,
// contiguous), and d_out (bf16, rows x cols) receives (fake_quantize_blocks(spec, X^T, ..., to =
// bf16, d_tensor_factor, seed))^T bit for bit, without X^T being made: blocks are B consecutive
// rows of one column of X (the 1 x B blocks of X^T's rows; the last partial where rows % B != 0),
// and stochastic rounding draws the bits of X^T's element indices (X's (r, c) is c * rows + r).
// The operand of the wgrad GEMM and of dgrad's weight in fp8kit.torch's block-scaled model,
// without the transposed copy. Takes 1 x 16 and 1 x 32 blocks of e2m1 (NVFP4, MXFP4; stochastic
// rounding in 1 x 16 only) and 1 x 32 blocks of e4m3 rounded to nearest, saturating, canonical
// NaN (MXFP8's mxfp8 and mx-ocp presets), f32 / bf16
// inputs, bf16 output, no columnwise_rht: anything else is refused with std::invalid_argument
// naming it (callers then quantise a contiguous copy of X^T with fake_quantize_blocks).
void fake_quantize_blocks_transposed(const BlockSpec& spec, Wide from, const void* in, std::size_t rows,
                                     std::size_t cols, Wide to, void* d_out, float* d_tensor_factor,
                                     std::uint64_t seed = 0, Stream stream = nullptr);

// The epilogue of fp8kit.torch's block-scaled GEMM model in one pass: d_out[i] (bfloat16) =
// cvt.rn.bf16.f32(fl32(d_c[i] * fl32(*d_factor_a * *d_factor_b))), the two tensor factors
// (fake_quantize_blocks' *d_tensor_factor of each operand) applied to the GEMM's float32 result
// as torch's `(c * (fa * fb)).to(torch.bfloat16)` computes it on sm_80 and later (its float ->
// bfloat16 conversion is __float2bfloat16, c10/util/BFloat16.h; a NaN gives its canonical NaN),
// reading c once and writing 2 bytes an element instead of two passes of 4 + 4 and 4 + 2 bytes.
// n elements, contiguous; the factors are device floats.
void times_tensor_factors_bf16(const float* d_c, std::size_t n, const float* d_factor_a, const float* d_factor_b,
                               void* d_out, Stream stream = nullptr);

}  // namespace fp8kit::cuda
