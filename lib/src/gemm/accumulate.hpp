// One element of D under each accumulation model (docs/gemm.md gives the definitions).
#pragma once

#include <cstdint>

#include "fp8kit/gemm/gemm.hpp"
#include "operands.hpp"

namespace fp8kit::gemm::detail {

struct Tables {
    CodeTable a, b;
};

std::uint32_t element(const GemmRequest& rq, const AccumModel& m, const Tables& t, std::size_t i, std::size_t j);

// One step of the aligned model: `acc` and the products p[0..n) (e[q]: the exponent product q
// brings to the alignment) aligned, summed exactly, truncated to sum_bits and rounded to float32.
float aligned_step(float acc, const float* p, const int* e, int n, const AccumModel& m);

}  // namespace fp8kit::gemm::detail
