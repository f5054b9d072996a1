// Operands of the reference GEMM decoded once per format: every code as an exact integer
// significand times a power of two (emu's unpack, so no format rule is typed here), its float32
// value, and whether it is NaN or Inf.
#pragma once

#include <array>
#include <cstdint>

#include "fp8kit/gemm/gemm.hpp"
#include "fp8kit/numerics/gemm_model.hpp"

namespace fp8kit::gemm::detail {

struct CodeValue {
    std::int32_t sig = 0;  // signed; 0 for zero (and for NaN/Inf, see special)
    int exp = 0;           // value = sig * 2^exp
    float value = 0;       // the same value as float32 (exact: every code of <= 8 bits fits)
    bool special = false;  // NaN or Inf
};

struct CodeTable {
    std::array<CodeValue, 256> code{};
    std::array<numerics::gemm::CodeTerm, 256> term{};  // the aligned model's view (numerics::gemm::code_term)
    int min_exp = 0;                                   // smallest exp of a non-zero finite code (the format's quantum)
    double max_units = 0;                              // largest |sig| * 2^(exp - min_exp)
    bool any_special = false;
};

CodeTable decode_table(Format f);  // throws std::invalid_argument for E8M0 (a scale format)

// Which scale multiplies element (row, k) of an operand.
inline std::size_t scale_index(const Operand& op, bool is_b, std::size_t row, std::size_t kblock, std::size_t kblocks) {
    return numerics::gemm::scale_index(op.scale_kind, is_b, row, kblock, kblocks);
}

// The output rounding of a float32 value (bf16: nearest-even through emu::convert).
std::uint32_t to_output(float v, OutType out);
// A binary64 value rounded once to the output type, nearest-even, through emu::convert.
std::uint32_t round_output(double v, OutType out);

}  // namespace fp8kit::gemm::detail
