// The reference FP8 GEMM: request checks, the per-element loop over the models, OpenMP over rows.
#include "fp8kit/gemm/gemm.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>

#include "accumulate.hpp"
#include "fp8kit/convert/names.hpp"
#include "operands.hpp"
#include "panel.hpp"

namespace fp8kit::gemm {

std::size_t scale_count_for(ScaleKind kind, bool is_b, std::size_t rows, std::size_t k) {
    const std::size_t kb = (k + 127) / 128;
    switch (kind) {
        case ScaleKind::tensor: return 1;
        case ScaleKind::row: return rows;
        case ScaleKind::block: return (is_b ? (rows + 127) / 128 : rows) * kb;
    }
    return 0;
}

int detail::exact_width(const CodeTable& a, const CodeTable& b, std::size_t k) {
    // |sum| <= K * max|a| * max|b| in units of 2^(qa + qb); one more bit for the sign.
    const double units = a.max_units * b.max_units * static_cast<double>(std::max<std::size_t>(k, 1));
    return static_cast<int>(std::ceil(std::log2(units + 1))) + 1;
}

int exact_width(const GemmRequest& rq) {
    return detail::exact_width(detail::decode_table(rq.a.format), detail::decode_table(rq.b.format), rq.k);
}

void check_request(const GemmRequest& rq, const AccumModel& m) {
    const bool block_a = rq.a.scale_kind == ScaleKind::block, block_b = rq.b.scale_kind == ScaleKind::block;
    if (block_a != block_b)
        throw std::invalid_argument("block scales: A and B must both have block scales (1x128 and 128x128)");
    for (int which = 0; which < 2; ++which) {
        const Operand& op = which ? rq.b : rq.a;
        const char* label = which ? "B" : "A";
        if (op.format == Format::e8m0)
            throw std::invalid_argument(fmt::format("{}: format e8m0 is a scale format, not a GEMM operand", label));
        if (!op.codes && op.rows != 0 && rq.k != 0) throw std::invalid_argument(fmt::format("{}: no codes", label));
        const std::size_t want = scale_count_for(op.scale_kind, which == 1, op.rows, rq.k);
        if (!op.scales || op.scale_count != want)
            throw std::invalid_argument(
                fmt::format("scale-{}: {} scales given, a {} x {} operand with {} scales needs {}", which ? "b" : "a",
                            op.scale_count, op.rows, rq.k,
                            op.scale_kind == ScaleKind::tensor ? "tensorwise"
                            : op.scale_kind == ScaleKind::row  ? "rowwise"
                                                               : "block",
                            want));
    }
    if (m.kind == AccumKind::aligned) {
        if (m.group < 1 || m.align_bits < 2 || m.align_bits + std::log2(m.group + 1.0) + 2 > 53)
            throw std::invalid_argument(
                fmt::format("accumulation model {}: bits + log2(group + 1) + 2 must be at most 53", describe(m)));
        if (m.promote % m.group)
            throw std::invalid_argument(
                fmt::format("accumulation model {}: promote is not a multiple of group", describe(m)));
    }
    if (m.kind == AccumKind::exact && exact_width(rq) > 127)
        throw std::invalid_argument(
            fmt::format("exact model: {} x {} with K = {} needs {} bits, more than the 127 of its "
                        "128-bit accumulator",
                        name(rq.a.format), name(rq.b.format), rq.k, exact_width(rq)));
}

std::vector<std::uint32_t> gemm(const GemmRequest& rq, const AccumModel& m) {
    check_request(rq, m);
    const detail::Tables t{detail::decode_table(rq.a.format), detail::decode_table(rq.b.format)};
    const std::size_t M = rq.a.rows, N = rq.b.rows;
    const detail::Decoded what = detail::decoded_for(m);
    // An element holding a NaN or Inf code (in its row of A or its column of B) takes the
    // per-element path, whose special_result decides it; the others are computed in tiles.
    const std::vector<char> special_a = detail::special_rows(rq.a, t.a, rq.k);
    const std::vector<char> special_b = detail::special_rows(rq.b, t.b, rq.k);
    std::vector<std::uint32_t> d(M * N);
    // A decoded once when its entries are small (float32 values, and field exponents: 4 or 8
    // bytes a code); CodeTerms (16 bytes) one row at a time, again for every panel.
    const bool whole_a = what != detail::Decoded::terms;
    detail::DecodedRows all_a;
    if (whole_a) detail::decode_rows(rq, t, what, 0, M, all_a);
    detail::Panel panel;
    // Each element depends only on its row of A and column of B, computed in k order: the same
    // bits for any thread count, schedule, panel and tile.
    for (std::size_t j0 = 0; j0 < N; j0 += detail::kPanel) {
        detail::decode_panel(rq, t, what, j0, panel);
#pragma omp parallel
        {
            detail::DecodedRows own;
#pragma omp for schedule(dynamic, 1)
            for (std::ptrdiff_t si = 0; si < static_cast<std::ptrdiff_t>(M); ++si) {
                const auto i = static_cast<std::size_t>(si);
                if (!whole_a) detail::decode_rows(rq, t, what, i, 1, own);
                const detail::DecodedRow row = whole_a ? detail::row_of(all_a, i, rq.k) : detail::row_of(own, 0, rq.k);
                for (std::size_t jj = 0; jj < panel.count; jj += detail::kTile) {
                    std::uint32_t out[detail::kTile];
                    detail::tile(rq, m, t, i, row, panel, jj, out);
                    for (std::size_t j = 0; j < detail::kTile && jj + j < panel.count; ++j) {
                        const std::size_t col = j0 + jj + j;
                        d[i * N + col] = special_a[i] || special_b[col] ? detail::element(rq, m, t, i, col) : out[j];
                    }
                }
            }
        }
    }
    return d;
}

}  // namespace fp8kit::gemm
