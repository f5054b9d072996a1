// The reference FP8 GEMM's accumulation models on the GPU (docs/gemm.md, "The CUDA model"):
// D = (A . B^T) * (scale_a (x) scale_b) under the `aligned` model (every named instance: sm90,
// sm90-fast, deepseek-128, h100tc, the split-K models, any aligned: parameter list with
// group <= 32) and `fp32`, bit for bit what lib's fp8kit::gemm::gemm gives (tests/gpu). The
// rules are numerics/gemm_model.hpp's, the code lib's CPU model runs. Plain C++ types: including
// this needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/numerics/gemm_model.hpp"

namespace fp8kit::cuda {

// One operand in device memory: rows x k codes, row-major, and its scales in the layout of
// numerics::gemm::ScaleKind (tensor: 1; row: rows; block: A 1x128 rows x ceil(k/128), B 128x128
// ceil(rows/128) x ceil(k/128)).
struct GemmOperand {
    const std::uint8_t* codes = nullptr;
    std::size_t rows = 0;
    Format format = Format::e4m3;
    numerics::gemm::ScaleKind scale_kind = numerics::gemm::ScaleKind::tensor;
    const float* scales = nullptr;
};

// The largest `group` the kernel's stage holds.
inline constexpr int kGemmMaxGroup = 32;

// Whether the CUDA model computes this model; false with the reason in *why (the `exact` model,
// group > kGemmMaxGroup, inconsistent parameters).
bool gemm_model_supported(const numerics::gemm::ModelParams& m, std::string* why = nullptr);

// d: device, a.rows x b.rows uint32 bit patterns (float32 bits, or bfloat16 bits in the low 16),
// row-major, as fp8kit::gemm::gemm returns them. Throws std::invalid_argument for an unsupported
// model, a format that is not an element format of at most 8 bits (E8M0), or block scales on one
// operand only; std::runtime_error for CUDA errors. Synchronous (the code tables are freed).
void gemm_model(const GemmOperand& a, const GemmOperand& b, std::size_t k, const numerics::gemm::ModelParams& m,
                numerics::gemm::OutType out, std::uint32_t* d, Stream stream = nullptr);

// sum, magnitude: device, a.rows x b.rows binary64, row-major: per element the binary64 sum of the
// scaled products and of their magnitudes (numerics::gemm::binary64_add_product / _run, the rule
// of lib's gemm::binary64_sums, in the same k order: the same bits; tests/gpu).
// Every format of at most 8 bits but E8M0, every scale kind. Synchronous.
void gemm_binary64_sums(const GemmOperand& a, const GemmOperand& b, std::size_t k, double* sum, double* magnitude,
                        Stream stream = nullptr);

}  // namespace fp8kit::cuda
