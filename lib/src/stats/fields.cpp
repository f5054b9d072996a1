#include "fp8kit/stats/fields.hpp"

namespace fp8kit {

std::vector<StatField> quant_stats_fields(const QuantStats& s) {
    return {{"numel", std::uint64_t(s.numel)},
            {"finite", std::uint64_t(s.finite())},
            {"amax", s.amax},
            {"min_nonzero", s.min_nonzero},
            {"zeros", std::uint64_t(s.zeros)},
            {"nan", std::uint64_t(s.nan)},
            {"inf", std::uint64_t(s.inf)},
            {"underflow", std::uint64_t(s.underflow)},
            {"subnormal", std::uint64_t(s.subnormal)},
            {"overflow", std::uint64_t(s.overflow)},
            {"te_underflow", std::uint64_t(s.te_underflow)},
            {"te_overflow", std::uint64_t(s.te_overflow)},
            {"mse", s.mse()},
            {"sqnr_db", s.sqnr_db()},
            {"dynamic_range_binades", s.dynamic_range_binades()},
            {"sum_x2", s.sum_x2},
            {"sum_err2", s.sum_err2}};
}

std::vector<StatField> block_stats_fields(const BlockStats& b) {
    return {{"blocks", std::uint64_t(b.blocks)},
            {"block_rows", std::uint64_t(b.tile_rows)},
            {"block_cols", std::uint64_t(b.tile_cols)},
            {"columnwise_rht", b.columnwise_rht},  // the fields describe TE's column-wise copy after its RHT
            {"scale_inv_min", b.scale_inv_min},
            {"scale_inv_max", b.scale_inv_max},
            {"blocks_with_range", std::uint64_t(b.blocks_with_range)},
            {"block_dynamic_range_max", b.dr_max},
            {"block_dynamic_range_mean", b.dr_mean}};
}

}  // namespace fp8kit
