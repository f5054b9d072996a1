// The report of `fp8kit sweep`: the text tables (recommendations, each class's best grid recipes
// and the references, the per-tensor table), the JSON (docs/schemas/sweep.schema.json) and the CSV
// of a run Sweep. The per-series rows are made group by group and written in series order as they
// are made, so memory stays linear in tensors x steps, never tensors x candidates.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::sweep {

// The rows of series [first, last) as bytes.
using MakeRows = std::function<std::string(std::size_t first, std::size_t last)>;
using WriteRows = std::function<void(const std::string&)>;
// Calls make for groups of Sweep::kSeriesGroup series (of `series` in all) and write with each
// group's rows in series order. cluster::series_rows does this over MPI ranks (rank 0 writes).
using RowsOver = std::function<void(std::size_t series, const MakeRows& make, const WriteRows& write)>;

struct ReportOptions {
    std::vector<std::string> inputs;             // as given: the JSON's "inputs"
    std::vector<std::optional<Format>> formats;  // the format choices swept: the text's reference rows
    int top = 5;                                 // grid rows per class in the text
    std::size_t width = 0;                       // the text's name column within this (0: whole names)
    // --warn: the early warnings of the same inputs (early_warnings), in the JSON; null: none asked.
    const std::vector<warn::Warning>* warnings = nullptr;
    bool root = true;  // this process writes the report (MPI rank 0); the others only make rows
    RowsOver over;     // empty: every group made and written here, in order
};

// One row per (class or tensor, candidate); the notes on the inputs then go to `notes` (a
// program's standard error), one line each after "fp8kit sweep: note: ".
void write_csv(const Loaded& L, const ReportOptions& o, std::FILE* out, std::FILE* notes);
// One JSON object: inputs, notes, errors, warnings, candidates, classes, then one line per tensor.
void write_json(const Loaded& L, const ReportOptions& o, std::FILE* out);
// The text: summary and recommendations, each class's table, the per-tensor table, the notes.
void write_text(const Loaded& L, const ReportOptions& o, std::FILE* out);
// The first `top` of the warnings, numbered, after a count (the text's --warn part).
void write_warnings(const std::vector<warn::Warning>& ws, std::size_t top, std::FILE* out);

// The early warnings of a sweep's inputs: `fp8kit watch` with its default settings on the same
// files and tensor globs (docs/early-warning.md).
std::vector<warn::Warning> early_warnings(const std::vector<std::string>& files,
                                          const std::vector<std::string>& tensors, const dump::ReadOptions& read);

}  // namespace fp8kit::sweep
