// Operands of the reference GEMM decoded once per request into contiguous arrays: a row of A,
// and a panel of B's columns transposed to k-major order, so the models' loops over k read
// several output columns' operands side by side (the compiler vectorises across columns) and
// look nothing up per product. Every entry is the code table's entry for that code (the
// float32 value of the fp32 and exact models, the CodeTerm of the aligned model): the same
// numbers the per-element loop reads, so the arithmetic on them gives the same bits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "accumulate.hpp"
#include "operands.hpp"

namespace fp8kit::gemm::detail {

// Output columns computed together (one tile of accumulators per row): 32 float32 sums are two
// AVX-512 vectors, so two independent chains of adds (16 columns, one chain, waited on the
// add's latency: fp32 took twice as long).
inline constexpr std::size_t kTile = 32;
// Columns of B decoded together: a panel is reused by every row of A while it stays in cache
// (32 columns x K = 4096: 512 KiB of float32, 2 MiB of CodeTerms).
inline constexpr std::size_t kPanel = 32;

// What a model reads: float32 values (fp32, exact), values and field exponents (the aligned
// models that aligned_fast() takes) or CodeTerms (the other aligned ones).
enum class Decoded { values, values_exps, terms };
Decoded decoded_for(const AccumModel& m);
// The aligned models whose step accumulator.cpp computes in binary64 (aligned_fast_step):
// terms truncated toward zero without a sticky bit, every aligned term below 2^30.
bool aligned_fast(const AccumModel& m);

// Rows [first, first + count) of A decoded, row r at r * k (the fields `what` asks for).
struct DecodedRows {
    std::vector<float> value;
    std::vector<std::int32_t> field_exp;  // CodeTerm::field_exp
    std::vector<numerics::gemm::CodeTerm> term;
};
void decode_rows(const GemmRequest& rq, const Tables& t, Decoded what, std::size_t first, std::size_t count,
                 DecodedRows& rows);

// One decoded row of A as the tiles read it.
struct DecodedRow {
    const float* value = nullptr;
    const std::int32_t* field_exp = nullptr;
    const numerics::gemm::CodeTerm* term = nullptr;
};
DecodedRow row_of(const DecodedRows& rows, std::size_t r, std::size_t k);

// Columns [j0, j0 + count) of B, entry (k, j) at k * stride + j; stride = count rounded up to
// kTile, the padding columns zero (their outputs are never stored).
struct Panel {
    std::size_t j0 = 0, count = 0, stride = 0;
    std::vector<float> value;
    std::vector<std::int32_t> field_exp;
    std::vector<numerics::gemm::CodeTerm> term;
};
void decode_panel(const GemmRequest& rq, const Tables& t, Decoded what, std::size_t j0, Panel& p);

// Whether each row of an operand holds a NaN or Inf code (its elements take special_result).
std::vector<char> special_rows(const Operand& op, const CodeTable& t, std::size_t k);

}  // namespace fp8kit::gemm::detail
