// Decoding the GEMM's operands once per request (panel.hpp).
#include "panel.hpp"

#include <algorithm>

namespace fp8kit::gemm::detail {

bool aligned_fast(const AccumModel& m) {
    return m.kind == AccumKind::aligned && m.align == AlignRound::toward_zero && !m.sticky && m.align_bits <= 29;
}

Decoded decoded_for(const AccumModel& m) {
    if (m.kind != AccumKind::aligned) return Decoded::values;
    return aligned_fast(m) ? Decoded::values_exps : Decoded::terms;
}

void decode_rows(const GemmRequest& rq, const Tables& t, Decoded what, std::size_t first, std::size_t count,
                 DecodedRows& rows) {
    const std::uint8_t* a = rq.a.codes + first * rq.k;
    const std::size_t n = count * rq.k;
    if (what != Decoded::terms) {
        rows.value.resize(n);
        for (std::size_t q = 0; q < n; ++q) rows.value[q] = t.a.code[a[q]].value;
    }
    if (what == Decoded::values_exps) {
        rows.field_exp.resize(n);
        for (std::size_t q = 0; q < n; ++q) rows.field_exp[q] = t.a.term[a[q]].field_exp;
    }
    if (what == Decoded::terms) {
        rows.term.resize(n);
        for (std::size_t q = 0; q < n; ++q) rows.term[q] = t.a.term[a[q]];
    }
}

DecodedRow row_of(const DecodedRows& rows, std::size_t r, std::size_t k) {
    DecodedRow row;
    if (!rows.value.empty()) row.value = rows.value.data() + r * k;
    if (!rows.field_exp.empty()) row.field_exp = rows.field_exp.data() + r * k;
    if (!rows.term.empty()) row.term = rows.term.data() + r * k;
    return row;
}

void decode_panel(const GemmRequest& rq, const Tables& t, Decoded what, std::size_t j0, Panel& p) {
    p.j0 = j0;
    p.count = std::min(kPanel, rq.b.rows - j0);
    p.stride = (p.count + kTile - 1) / kTile * kTile;
    const std::size_t size = rq.k * p.stride;
    // The padding columns hold zero codes: value 0, field exponent and term of zero_term().
    const numerics::gemm::CodeTerm zero = numerics::gemm::zero_term();
    if (what != Decoded::terms) p.value.assign(size, 0.0f);
    if (what == Decoded::values_exps) p.field_exp.assign(size, zero.field_exp);
    if (what == Decoded::terms) p.term.assign(size, zero);
    for (std::size_t j = 0; j < p.count; ++j) {
        const std::uint8_t* b = rq.b.codes + (j0 + j) * rq.k;
        for (std::size_t k = 0; k < rq.k; ++k) {
            if (what != Decoded::terms) p.value[k * p.stride + j] = t.b.code[b[k]].value;
            if (what == Decoded::values_exps) p.field_exp[k * p.stride + j] = t.b.term[b[k]].field_exp;
            if (what == Decoded::terms) p.term[k * p.stride + j] = t.b.term[b[k]];
        }
    }
}

std::vector<char> special_rows(const Operand& op, const CodeTable& t, std::size_t k) {
    std::vector<char> special(op.rows, 0);
    if (!t.any_special) return special;
    for (std::size_t r = 0; r < op.rows; ++r)
        for (std::size_t q = 0; q < k && !special[r]; ++q) special[r] = t.code[op.codes[r * k + q]].special;
    return special;
}

}  // namespace fp8kit::gemm::detail
