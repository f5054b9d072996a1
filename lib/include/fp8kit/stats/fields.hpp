// The field tables of the statistics types: the key every output uses (the CLI's JSON and CSV,
// Python's dicts) and the value, written once here so that the same quantity has the same name
// everywhere (docs/statistics.md defines each field).
#pragma once

#include <cstdint>
#include <string_view>
#include <variant>
#include <vector>

#include "fp8kit/stats/statistics.hpp"

namespace fp8kit {

struct StatField {
    std::string_view key;
    std::variant<std::uint64_t, double, bool> value;
};

// QuantStats: numel, finite, amax, min_nonzero, the counts (zeros ... te_overflow), mse, sqnr_db,
// dynamic_range_binades, sum_x2, sum_err2. The exponent histogram is not a scalar field.
std::vector<StatField> quant_stats_fields(const QuantStats& s);

// BlockStats' per-tile fields: blocks, block_rows, block_cols, columnwise_rht, scale_inv_min,
// scale_inv_max, blocks_with_range, block_dynamic_range_max, block_dynamic_range_mean. The totals
// are quant_stats_fields(b.total); the histograms are not scalar fields.
std::vector<StatField> block_stats_fields(const BlockStats& b);

}  // namespace fp8kit
