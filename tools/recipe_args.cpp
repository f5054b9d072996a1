// Recipe arguments for replay and sweep (recipe_args.hpp).
#include "recipe_args.hpp"

#include <stdexcept>

#include "fp8kit/analysis/replay.hpp"

namespace fp8kit::cli {

RecipeSpec recipe_with_overrides(const std::string& recipe, std::optional<int> history, const std::string& algo,
                                 std::optional<int> margin) {
    RecipeSpec r;
    try {
        r = parse_recipe(recipe);
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--recipe: {}", e.what()));
    }
    try {
        return replay::with_overrides(r, {history, algo, margin});
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

std::optional<Format> parse_format_choice(const std::string& s) {
    if (s == "auto") return std::nullopt;
    const Format f = require_format(s, "--format");
    if (f == Format::e8m0) throw UsageError("--format e8m0: E8M0 holds scales, not tensor values");
    return f;
}

std::string join_presets() {
    std::string s;
    for (const auto& p : recipe_presets()) s += (s.empty() ? "" : ", ") + p;
    return s;
}

}  // namespace fp8kit::cli
