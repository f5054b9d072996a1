// Per-step amax traces: the input of `fp8kit replay` and `fp8kit sweep`. A trace is a set of
// series, one per tensor, each a list of (step, amax) sorted by step. Readers accept the CSV that
// training scripts write (step,amax[,tensor], any column order) and nvidia-dlfw-inspect statistics
// logs (`{name}_cur_amax ... iteration=N ... value=V`). Bad input throws TraceError with the
// file and line, so the CLI can print one line and exit 2.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/recipes.hpp"

namespace fp8kit::trace {

struct TraceError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct Series {
    std::string tensor;               // name as in the file ("" when the CSV has no tensor column)
    Role role = Role::activation;     // recipe_slot(guess_role(tensor)): activation, weight or gradient
    std::vector<std::int64_t> steps;  // strictly increasing
    std::vector<float> amax;          // float32 as TE keeps it; Inf and NaN allowed
    std::vector<std::size_t> lines;   // line of each entry in its file (1-based)
};

struct Trace {
    std::string file;
    std::vector<Series> series;  // in order of first appearance
    // A dump read as a trace: the datasets its reader skipped on purpose (dump::skipped()).
    std::vector<dump::Problem> skipped;
    // What was left out and why, one line each: amax values a log wrote with too few significant
    // digits to be read (te::unreadable), statistic names no TE version logs. Callers show them.
    std::vector<std::string> notes;
};

// CSV: a header naming `step` and `amax` (and optionally `tensor`), in any order; other columns
// are ignored. Values are parsed as float32 (correctly rounded), "inf"/"nan" accepted; a
// negative amax, a non-integer step, a repeated (tensor, step) or a short row is an error.
Trace read_csv(const std::string& path);
// nvidia-dlfw-inspect log: lines containing `_cur_amax` are parsed (tensor = text before
// `_cur_amax` after the last " - " or whitespace, iteration=N, value=V); other lines are ignored.
// A value written with too few significant digits (te::unreadable, such as TE's 0.0000) is left
// out with a note in Trace::notes (stream_rows leaves it out silently).
Trace read_dlfw_log(const std::string& path);
// TransformerEngine statistics logs of several ranks (io/te_debug.hpp): `path` is the log_dir or
// its nvdlfw_inspect_statistics_logs folder. Each {layer}_{tensor}_cur_amax series is the MAX
// over the ranks per step (as reduce_amax=True does); a tensor that logs max and min but not
// cur_amax gets max(|max|, |min|). Values too coarse to read (te::unreadable) are left out with
// a note, never read as 0; lines are not kept (0). Every other statistic: te::read_run_stats.
Trace read_te_stats(const std::string& path);
// A folder: read_te_stats. A file, by content: a first non-empty line that names the `step` and `amax` columns is CSV, anything
// else is read as a dlfw-inspect log (which must contain at least one _cur_amax line).
Trace read_trace(const std::string& path);

// The rows of a CSV trace or a dlfw-inspect log (chosen as read_trace chooses), in file order,
// without holding them: fn(tensor, step, amax, line) per row, memory one line. Same parsing and
// messages as read_trace, except the checks that need a tensor's whole series (a step given
// twice, steps out of order), which are the caller's. A folder (TE statistics logs, whose ranks
// are combined per step) throws TraceError.
using RowFn = std::function<void(const std::string& tensor, std::int64_t step, float amax, std::size_t line)>;
void stream_rows(const std::string& path, const RowFn& fn);
// Throws TraceError unless `path` names a regular file that can be opened for reading: a FIFO
// would block for ever and a device such as /dev/zero never ends, so neither is read (nor
// probed for its format).
void require_regular_file(const std::string& path);

// Glob match ('*', '?', '[...]' as fnmatch, '*' also matches '.' and '/').
bool matches(std::string_view pattern, std::string_view name);

}  // namespace fp8kit::trace
