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

// One step of the aligned model: `acc` and the products p[0..n) aligned to the largest exponent
// among them, `align_bits` bits kept, summed exactly and rounded to float32 by `step_round`.
float aligned_step(float acc, const float* p, int n, const AccumModel& m);

}  // namespace fp8kit::gemm::detail
