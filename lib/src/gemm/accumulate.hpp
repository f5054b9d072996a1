// One element of D under each accumulation model (docs/gemm.md gives the definitions).
#pragma once

#include <cstdint>

#include "fp8kit/gemm/gemm.hpp"
#include "operands.hpp"

namespace fp8kit::gemm::detail {

struct Tables {
    CodeTable a, b;
};

// gemm::exact_width from the decoded tables.
int exact_width(const CodeTable& a, const CodeTable& b, std::size_t k);

std::uint32_t element(const GemmRequest& rq, const AccumModel& m, const Tables& t, std::size_t i, std::size_t j);

struct DecodedRow;
struct Panel;
// The elements (i, p.j0 + jj + j) for j < kTile (panel.hpp) of an element without NaN or Inf
// codes, each equal to element(): out[j] (the padding columns' entries are meaningless).
void tile(const GemmRequest& rq, const AccumModel& m, const Tables& t, std::size_t i, const DecodedRow& row,
          const Panel& p, std::size_t jj, std::uint32_t* out);

}  // namespace fp8kit::gemm::detail
