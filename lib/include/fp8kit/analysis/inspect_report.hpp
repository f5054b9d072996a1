// The report of `fp8kit inspect`: every selected tensor of a dump analysed under one recipe
// (inspect.hpp), the inputs and tensors that failed, and TransformerEngine's own quantized codes
// checked against the reference; written as the terminal text, as JSON
// (docs/schemas/inspect.schema.json) or as long-form CSV.
#pragma once

#include <cstdint>
#include <cstdio>
#include <deque>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "fp8kit/analysis/inspect.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit::inspect {

// One analysed tensor. The shares are of all its elements, in percent.
struct Row {
    const dump::TensorInfo* t;
    Result r;
    double pct(std::uint64_t n) const { return 100.0 * static_cast<double>(n) / static_cast<double>(r.stats.numel); }
    double under() const { return pct(r.stats.underflow); }
    double sub() const { return pct(r.stats.subnormal); }
    double over() const { return pct(r.stats.overflow); }
};
// A deque: rows are added one per tensor and never move (a vector's doubling copies every row,
// 2.4 KB each with the exponent histogram: 10^5 tensors peaked at three times the rows).
using Rows = std::deque<Row>;

struct Report {
    std::unique_ptr<dump::Dump> dump;  // the rows point into its tensors()
    Options options;
    std::string format_choice = "auto";  // the format as asked for ("auto" or a name): the JSON's "format"
    Rows rows;                           // tensor order
    // Inputs that matched no file, files and tensors the reader could not list, tensors whose
    // analysis failed, TE files whose check failed: in that order.
    std::vector<dump::Problem> errors;
    std::vector<TeQuantizedCheck> te_checks;
};

// Expands the inputs (dump::expand_inputs) and lists their tensors under `sel`: the report's dump
// and its first errors. Nothing is analysed yet.
Report open(const std::vector<std::string>& inputs, dump::Selection sel, const dump::ReadOptions& read);
// The filters left no tensor although the input has some (tensors() empty, unselected() > 0):
// the message naming the filters as given (`steps`: the --steps text) and a few names that exist.
std::string nothing_matched(const dump::Selection& sel, const std::string& steps, const dump::Dump& d);
// Tensor i's outcome as analyse_all delivers it (Done): a row, or an error naming the tensor.
void add(Report& r, std::size_t i, const Result* result, std::exception_ptr failed);
// TransformerEngine DumpTensors files holding both entries (high_precision and quantized): TE's
// codes against the reference (check_te_quantized); a file that cannot be checked is an error.
void check_te_files(Report& r);

// The report as one JSON object (the tensors written one at a time: memory is the rows, not a
// JSON tree of every tensor).
void write_json(const Report& r, std::FILE* out);
// Long form: one line per tensor and statistic, for pandas (pivot on `stat`).
void write_csv(const Report& r, std::FILE* out);
// The summary, the worst tensors per measure and the table of every tensor; names fit `width`
// columns (0: whole names), control characters escaped.
void write_text(const Report& r, std::size_t width, std::FILE* out);

}  // namespace fp8kit::inspect
