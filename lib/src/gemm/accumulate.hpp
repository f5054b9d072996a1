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

}  // namespace fp8kit::gemm::detail
