// The reference FP8 GEMM: D = (A . B^T) * (scale_a (x) scale_b), TN layout (cuBLASLt,
// torch._scaled_mm): A is M x K codes, B is N x K codes, both row-major uint8.
// Codes decode through emu's traits (any format of at most 8 bits except E8M0); outputs are
// rounded by emu::convert. Rows of D are computed in parallel (OpenMP); every element is a
// sequential function of its own row and column, so D is identical for any thread count.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/gemm/model.hpp"

namespace fp8kit::gemm {

// tensor: one scale. row: one per row of the operand (M for A, N for B).
// block: A 1x128 (M x ceil(K/128)), B 128x128 (ceil(N/128) x ceil(K/128)), row-major,
// as DeepSeek-V3 and TransformerEngine's Float8BlockScaling.
// (numerics/gemm_model.hpp: shared with the CUDA model.)
using numerics::gemm::OutType;
using numerics::gemm::ScaleKind;

struct Operand {
    const std::uint8_t* codes = nullptr;  // rows x k
    std::size_t rows = 0;
    Format format = Format::e4m3;
    ScaleKind scale_kind = ScaleKind::tensor;
    const float* scales = nullptr;
    std::size_t scale_count = 0;
};

struct GemmRequest {
    Operand a, b;  // a.rows = M, b.rows = N
    std::size_t k = 0;
    OutType out = OutType::f32;
};

// How many scales an operand needs (throws std::invalid_argument for a kind it cannot have).
std::size_t scale_count_for(ScaleKind kind, bool is_b, std::size_t rows, std::size_t k);

// Checks the request (formats, scale counts, the exact model's width limit); throws
// std::invalid_argument naming the operand and what is wrong.
void check_request(const GemmRequest& rq, const AccumModel& m);

// D as bit patterns, M x N row-major: float32 bits, or bfloat16 bits in the low 16.
std::vector<std::uint32_t> gemm(const GemmRequest& rq, const AccumModel& m);

// The number of bits the exact model's fixed-point sum needs for this request (docs/gemm.md):
// it must be at most 127.
int exact_width(const GemmRequest& rq);

}  // namespace fp8kit::gemm
