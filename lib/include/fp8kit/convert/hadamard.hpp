// The random Hadamard transform (RHT) of TransformerEngine's NVFP4 recipe, on the CPU.
// Source: TransformerEngine transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py
// (NVFP4QuantizerRef._build_hadamard_matrix, _apply_rht, _quantize, get_wgrad_sign_vector), the
// reference TE's NVFP4 kernels are tested against:
//   1. H16 is the Sylvester Hadamard matrix (H_1 = [1], H_2k = [[H_k, H_k], [H_k, -H_k]]);
//   2. with the random sign mask (TE's default), H = diag(s) @ H16 with the fixed sign vector
//      s = TE's get_wgrad_sign_vector() (numerics::te_rht_sign), i.e. row i of H16 multiplied by s[i];
//   3. the transform is H * (1 / sqrt(16)) = H / 4;
//   4. it is applied to the column-wise operand only: for an M x N tensor x, TE quantises
//      x^T (N x M) and first replaces every 16 consecutive elements v of each row of x^T (16
//      consecutive rows of one column of x) by v @ (H / 4); M must be a multiple of 16;
//   5. NVFP4BlockScaling applies it to the column-wise (wgrad GEMM) copies of linear inputs and
//      output gradients, not to weights (nvfp4_ref_rht_2d_quantizer_factory: with_rht for
//      linear_input and linear_grad_output); the column-wise global amax is taken after it.
// Arithmetic here: each output is the exact sum of its 16 terms x * (+-1/4), accumulated in
// binary64 (exact for float32 / bf16 / f16 groups whose exponents span less than about 2^25),
// then rounded once to the input type (nearest even). torch's matmul accumulates in float32 in
// an order of its own and rounds the sum to the tensor's dtype; the two agree bit for bit
// whenever that float32 accumulation is exact, which for bf16 inputs holds for groups whose
// magnitudes span less than 2^12 (typical activations and gradients), not for every input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit {

using emu::Wide;

// The RHT of the column-wise operand of a row-major rows x cols tensor of `type` (f32, f16 or
// bf16): returns cols x rows elements of `type` (raw bytes, row-major), i.e. (x^T) with every
// group of 16 along a row multiplied by diag(s) H16 / 4 (s = numerics::te_rht_sign, or all +1 when
// random_signs is false), by numerics::te_rht16_group (a NaN output is the canonical
// quiet NaN). std::invalid_argument when rows is not a multiple of 16 or type is f64.
std::vector<unsigned char> te_rht16_columnwise(const void* data, Wide type, std::size_t rows, std::size_t cols,
                                               bool random_signs = true);

}  // namespace fp8kit
