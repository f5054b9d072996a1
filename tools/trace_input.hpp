// Shared by replay and sweep: traces from files, recipes with the user's overrides.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "command.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/io/trace.hpp"

namespace fp8kit::cli {

// HDF5 or safetensors (by content).
bool is_dump_file(const std::string& path);
// A dump as a trace: one series per dumped tensor name (step components dropped, see
// sweep::series_name_of_dump) with TE's amax of each dumped step. Optimizer state and tensors
// without a step are left out.
trace::Trace dump_trace(const std::string& path);

// The trace (or dump_trace of a dump) with only the series matching one of `patterns` (all when empty); UsageError naming
// the file and line for bad input, or the patterns when nothing matches.
trace::Trace load_trace(const std::string& path, const std::vector<std::string>& patterns);
// The preset/file with --history/--algo/--margin applied (UsageError when the recipe has no such
// parameter or the value is out of range).
RecipeSpec recipe_with_overrides(const std::string& recipe, std::optional<int> history,
                                 const std::string& algo, std::optional<int> margin);
// "auto" -> nullopt, else the format (UsageError naming --format).
std::optional<Format> parse_format_choice(const std::string& s);
std::string join_presets();
std::string describe_recipe(const RecipeSpec& r, std::optional<Format> forced);

}  // namespace fp8kit::cli
