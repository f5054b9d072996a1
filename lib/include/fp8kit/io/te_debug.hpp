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
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/numerics/roles.hpp"

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

struct StatLine {
    StatName name;
    std::string full;  // the name as logged
    std::int64_t iteration = 0;
    double value = 0;
    int rank = 0;
    std::size_t line = 0;  // 1-based, in its file
};

struct StatsLog {
    std::string file;
    int rank = 0;  // from _globalrank-R.log
    std::vector<StatLine> lines;
};

// Reads one statistics log. Throws std::runtime_error naming the file and line for a line that
// looks like a statistic but is malformed, or for a file with no statistics at all (such as the
// free-text nvdlfw_inspect_logs/ file of the same name).
StatsLog read_stats_log(const std::string& path);
// The statistics logs of a run: `path` is a log file, the nvdlfw_inspect_statistics_logs folder,
// or the log_dir holding it. Files under nvdlfw_inspect_logs/ are never read.
std::vector<std::string> find_stats_logs(const std::string& path);

// How ranks' values of a statistic combine per step: MAX for max and cur_amax (reduce_amax=True
// in TE), MIN for min, and none for the others (mean, std, underflows%, ... need counts that are
// not logged), which stay per rank.
enum class Combine : std::uint8_t { max, min, none };
Combine combine_of(std::string_view stat);

struct StatSeries {
    std::string name;  // the logged name ({layer}_{tensor}_{stat})
    StatName parts;
    std::optional<int> rank;  // nullopt: combined over `ranks` ranks
    int ranks = 1;
    std::vector<std::int64_t> steps;
    std::vector<double> values;
};
// One series per name (combined over ranks where combine_of allows, else one per rank), steps
// sorted. A step logged by only some ranks is combined over those (ranks counts the most).
std::vector<StatSeries> combine_ranks(const std::vector<StatsLog>& logs);

}  // namespace fp8kit::te
