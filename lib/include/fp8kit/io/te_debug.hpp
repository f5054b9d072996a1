// What TransformerEngine's debug tools (nvidia-dlframework-inspect features) write, read back:
//
// * DumpTensors (transformer_engine/debug/features/dump_tensors.py, TensorLogger.save_tensor):
//   one torch.save file per layer, tensor and iteration under {log_dir}/tensor_dumps/rank_N/,
//   named {layer}_{tensor}_iter_{iter:06d}.pt, or iter_{iter:06d}/{layer}_{tensor}.pt in older
//   versions; '/', '\', ':', '*', '?', '"', '<', '>', '|', ' ' and '.' in names become '_'. Each
//   file holds {"high_precision": tensor, "quantized": QuantizedTensor} (either may be absent).
//   open_source() reads these files (no pickle is executed: docs/dumps.md); this header parses
//   their paths.
// * LogTensorStats / LogFp8TensorStats / LogNvfp4TensorStats: lines
//   "{layer}_{tensor}_{stat} \t\t\t\t iteration={iter:06d} \t\t\t\t value={value:.4f}" in
//   nvdlfw_inspect_statistics_logs/nvdlfw_inspect[_TIMESTAMP]_globalrank-R.log, one file per rank.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/numerics/roles.hpp"

namespace fp8kit::io {
template <class Row>
class FieldTable;  // io/report_fields.hpp
}  // namespace fp8kit::io

namespace fp8kit::te {

// The tensor names DumpTensors and the stats features know (their docstrings).
inline constexpr std::string_view kTensorNames[] = {"activation", "gradient", "weight", "output", "wgrad", "dgrad"};
numerics::Role role_of(std::string_view te_tensor);  // activation/output -> activation, ...

struct DumpPath {
    std::string layer, tensor;  // sanitised layer name; one of kTensorNames
    std::int64_t step = 0;
    std::optional<int> rank;  // from the nearest rank_N folder
};
// nullopt when the path is not in either DumpTensors layout.
std::optional<DumpPath> parse_dump_path(std::string_view path);

// The row-wise scales of an MXFP8 or NVFP4 tensor as rows x blocks bytes, row-major: TE's scale_inv
// is padded to (round_up(rows, 128), round_up(blocks, 4)) and, when `swizzled`, stored in cuBLAS's
// tiled layout: 128 x 4 tiles in row-major tile order, element (r, c) of a tile at byte
// (r % 32) * 16 + (r / 32) * 4 + c (TE tests/pytorch/mxfp8/mxfp8_utils.py
// _rowwise_swizzle_mxfp8_scale: view(M/128, 4, 32, K/128, 4).permute(0, 3, 2, 1, 4)).
// Throws std::invalid_argument when the stored shape is not that padding.
std::vector<std::uint8_t> te_rowwise_scales(const std::vector<std::uint8_t>& stored,
                                            const std::vector<std::uint64_t>& stored_shape, std::uint64_t rows,
                                            std::uint64_t blocks, bool swizzled);

// ---- statistics logs ----

struct StatName {
    std::string layer, tensor;  // tensor: one of kTensorNames
    std::string recipe;         // "" or fp8_delayed_scaling, fp8_current_scaling, mxfp8, fp8_block_scaling, nvfp4
    std::string stat;           // without recipe and suffix: "max", "underflows%", "scale_inv_min", ...
    bool columnwise = false;
};
// Splits "{layer}_{tensor}_{stat}" with the known stat and tensor names (stats_computation.py,
// log_fp8_tensor_stats.py, log_nvfp4_tensor_stats.py), from the end: the longest known stat
// (optionally recipe-prefixed, optionally _columnwise) preceded by "_{tensor}". nullopt when no
// known stat ends the name.
std::optional<StatName> split_stat_name(std::string_view name);

// How many significant digits a logged value keeps: TE's MetricLogger line prints value={:.4f}
// (four decimals, stats_buffer.py _Buffer.log -> nvdlfw_inspect MetricLogger.log_scalar), so an
// amax of 2.5e-6 is written 0.0000 and one of 1.2e-3 is written 0.0012. A value written with a
// decimal point and no exponent keeps the digits from its first nonzero digit on (0.0000: none);
// an integer or an exponent form ("7.9e-06", as %g writes) is taken as exact (kExact).
inline constexpr int kExact = 99;
int significant_digits(std::string_view value_text);
// The fewest significant digits a logged value needs to be read as a number: 3 keeps the
// printed value's rounding error (half a unit in its last digit) at most 5/1000 of it, under a
// tenth of E4M3's relative spacing (2^-3) and far under E5M2's (2^-2); with fewer, the value
// is unreadable (replay leaves it out and says so; it never reads it as 0).
inline constexpr int kMinSignificant = 3;
// TE's logger writes four decimals ({:.4f}); a value written with at least that many decimals and
// fewer than kMinSignificant significant digits is unreadable. A shorter fixed form ("1.5") came
// from another writer that dropped only trailing zeros, and is read as written.
inline constexpr int kFixedDecimals = 4;
bool unreadable(std::string_view value_text);

struct StatLine {
    StatName name;
    std::string full;  // the name as logged
    std::int64_t iteration = 0;
    double value = 0;
    int rank = 0;
    std::size_t line = 0;      // 1-based, in its file
    int significant = kExact;  // significant_digits of the value as written
};

struct StatsLog {
    std::string file;
    int rank = 0;  // from _globalrank-R.log
    std::vector<StatLine> lines;
    // Lines skipped, one item each ({file, name: the logged name, message: its line and why}): a
    // statistic whose name is not one TE logs (a newer TE's, or another feature's). The reports'
    // "skipped" list (dump::skipped, docs/dumps.md).
    std::vector<dump::Problem> skipped;
};

// Reads one statistics log. Throws std::runtime_error naming the file and line for a line that
// looks like a statistic but is malformed, or for a file with no statistics lines at all (such as
// the free-text nvdlfw_inspect_logs/ file of the same name). A well-formed line whose statistic
// name is unknown is skipped with an item in `skipped`; a file of only such lines is read (every
// line skipped), not refused.
StatsLog read_stats_log(const std::string& path);
// The statistics logs of a run: `path` is a log file, the nvdlfw_inspect_statistics_logs folder,
// or the log_dir holding it. Files under nvdlfw_inspect_logs/ are never read.
std::vector<std::string> find_stats_logs(const std::string& path);

// How ranks' values of a statistic combine per step. Each rank's file holds the value TE
// already reduced over that rank's reduction group (stats_buffer.py _Buffer.log gathers the
// group's helper statistics), and ranks of one group log the same value, so only combinations
// that give the same answer when a value is seen twice are made:
//   max: max, cur_amax, dynamic_range_top, scale_inv_max, max_blockwise_dynamic_range_* (MAX);
//   min: min, dynamic_range_bottom, scale_inv_min (MIN);
//   mean: the mean weighted by the same rank's logged numel of that tensor and step; a mean
//         without its numel on every rank that logged it stays per rank;
//   none: sums and counts (sum, numel, l1_norm, *_num, ...), which would double-count ranks of
//         one group, and statistics that need more than the logged ones (std, variance,
//         dynamic_range, %, mse, l2_norm): per rank.
enum class Combine : std::uint8_t { max, min, mean, none };
Combine combine_of(std::string_view stat);
std::string_view name(Combine c);  // "max", "min", "mean", "per rank"
// Why a statistic is kept per rank (combine_of == none), in words for reports; "" otherwise.
std::string_view per_rank_reason(std::string_view stat);

struct StatSeries {
    std::string name;  // the logged name ({layer}_{tensor}_{stat})
    StatName parts;
    std::optional<int> rank;  // nullopt: combined over `ranks` ranks
    int ranks = 1;
    std::vector<std::int64_t> steps;
    std::vector<double> values;
    // Per step: the fewest significant digits among the values combined (kExact when every
    // value was an integer or in exponent form). unreadable(step) when below kMinSignificant.
    std::vector<int> significant;
    bool readable(std::size_t k) const { return significant[k] >= kMinSignificant; }
};
// How the series' values were combined over ranks: none for a series kept per rank.
Combine combine_of(const StatSeries& s);
// A series' fields other than its steps and values (name, layer, tensor, recipe, stat,
// columnwise, combine, rank: null when combined, ranks): stats_json's keys and fp8kit.te_stats'.
const io::FieldTable<StatSeries>& series_fields();
// One series per name (combined over ranks where combine_of allows, else one per rank), steps
// sorted. A step logged by only some ranks is combined over those (ranks counts the most). A
// combined max or min is unreadable when any rank's value is; a weighted mean likewise.
std::vector<StatSeries> combine_ranks(const std::vector<StatsLog>& logs);

// Every statistic of a run (find_stats_logs + read_stats_log + combine_ranks) and the notes of
// the lines skipped.
struct RunStats {
    std::vector<std::string> files;
    std::vector<StatSeries> series;
    std::vector<dump::Problem> skipped;  // the lines with unknown names, of every file
};
RunStats read_run_stats(const std::string& path);
// Keeps the series whose logged name or {layer}_{tensor} matches one of the globs (fnmatch); all
// when `globs` is empty.
void keep_series(RunStats& r, const std::vector<std::string>& globs);

// Every statistic as reports write it (fp8kit replay --stats, fp8kit.te_stats): JSON
// {"files", "skipped": [{file, name, message}], "series": [{name, layer, tensor, recipe, stat,
// columnwise, combine, rank (null when combined), ranks, steps, values, readable[, per_rank]}]}
// (non-finite values as their words, io/json_number.hpp), and CSV rows
// step,name,layer,tensor,recipe,stat,columnwise,combine,rank,ranks,value,readable (rank empty
// when combined; one row per series and step, series in name order).
nlohmann::json stats_json(const RunStats& r);
std::string stats_csv(const RunStats& r);
// The table of `fp8kit replay --stats`: a header, one row per series (combine, rank, steps, last
// step and value, max, unreadable steps), the note on combining and the skipped lines. The name
// column is as wide as the longest name, or within `width` columns when `width` is not 0.
void write_stats_text(const RunStats& r, std::size_t width, std::FILE* out);

}  // namespace fp8kit::te
