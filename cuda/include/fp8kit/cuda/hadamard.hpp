// TransformerEngine NVFP4's random Hadamard transform of the column-wise operand on the GPU, equal
// bit for bit to lib's fp8kit::te_rht16_columnwise (lib/include/fp8kit/convert/hadamard.hpp has
// the steps and the source); the group transform is numerics::te_rht16_group, shared by both.
#pragma once

#include <cstddef>

#include "fp8kit/cuda/kernels.hpp"

namespace fp8kit::cuda {

// in: row-major rows x cols of `type` (f32, f16, bf16) on the device; out: cols x rows of the same
// type (x^T with every 16 consecutive elements of a row multiplied by diag(s) H16 / 4).
// std::invalid_argument when rows is not a multiple of 16 or the type is f64.
void te_rht16_columnwise(Wide type, const void* in, std::size_t rows, std::size_t cols, void* out,
                         bool random_signs = true, Stream stream = nullptr);

}  // namespace fp8kit::cuda
