// Recipe arguments shared by replay, sweep and watch: --recipe with its overrides, --format and
// the presets' names for --help (the text report describes a recipe: replay::describe_recipe).
#pragma once

#include <optional>
#include <string>

#include "command.hpp"
#include "fp8kit/recipes.hpp"

namespace fp8kit::cli {

// The preset/file with --history/--algo/--margin applied (UsageError naming the option when the
// recipe cannot be read, has no such parameter or the value is out of range).
RecipeSpec recipe_with_overrides(const std::string& recipe, std::optional<int> history, const std::string& algo,
                                 std::optional<int> margin);
// "auto" -> nullopt, else the format (UsageError naming --format).
std::optional<Format> parse_format_choice(const std::string& s);
std::string join_presets();

}  // namespace fp8kit::cli
