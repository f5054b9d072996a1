// The report of `fp8kit replay`: every series of a trace replayed through one recipe (replay.hpp),
// the early warnings of the same trace under that recipe, and the text, CSV and JSON that print them.
#pragma once

#include <cstddef>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/io/trace.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::replay {

// replay_series of every series of `t`, in order (its std::invalid_argument when the recipe does
// not scale a series' role per tensor).
std::vector<SeriesResult> replay_trace(const RecipeSpec& r, const trace::Trace& t, std::optional<Format> forced);

// The early-warning trend signals of `t` (read from `path`) under the same recipe: its overflow
// forecast when it is delayed or windowed, growth and spikes always (docs/early-warning.md;
// `fp8kit watch` has every signal).
std::vector<warn::Warning> trace_warnings(const RecipeSpec& r, std::optional<Format> forced, const std::string& path,
                                          const trace::Trace& t);

// "recipe NAME (KIND scaling, rule RULE[, its parameters], formats ...)": the text report's first line.
std::string describe_recipe(const RecipeSpec& r, std::optional<Format> forced);

struct ReportOptions {
    std::string trace;  // the path as given
    RecipeSpec recipe;
    std::optional<Format> forced;                          // --format; nullopt: the recipe's per role
    std::size_t width = 0;                                 // the text's name column within this (0: whole names)
    const std::vector<warn::Warning>* warnings = nullptr;  // --warn; null: none asked
};

// step,tensor,amax,scale,headroom,overflow: one row per series and step (scale as %.9g).
void write_csv(const std::vector<SeriesResult>& res, std::FILE* out);
// One JSON object: trace, recipe, skipped, tensors (each series with its scales)[, warnings].
void write_json(const std::vector<SeriesResult>& res, const trace::Trace& t, const ReportOptions& o, std::FILE* out);
// The recipe, one row per series (class, format, steps, overflowing steps, worst headroom), the
// totals, the skipped datasets and the numbered warnings.
void write_text(const std::vector<SeriesResult>& res, const trace::Trace& t, const ReportOptions& o, std::FILE* out);

}  // namespace fp8kit::replay
