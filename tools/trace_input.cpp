// Trace loading and recipe overrides for replay and sweep.
#include "trace_input.hpp"

#include <stdexcept>

namespace fp8kit::cli {

trace::Trace load_trace(const std::string& path, const std::vector<std::string>& patterns) {
    trace::Trace t;
    try {
        t = trace::read_trace(path);
    } catch (const trace::TraceError& e) {
        throw UsageError(e.what());
    }
    if (patterns.empty()) return t;
    std::vector<trace::Series> keep;
    for (auto& s : t.series)
        for (const auto& p : patterns)
            if (trace::matches(p, s.tensor)) {
                keep.push_back(std::move(s));
                break;
            }
    if (keep.empty()) {
        std::string ps;
        for (const auto& p : patterns) ps += (ps.empty() ? "'" : ", '") + p + "'";
        throw UsageError(fmt::format("--tensor {}: no tensor of {} matches", ps, path));
    }
    t.series = std::move(keep);
    return t;
}

RecipeSpec recipe_with_overrides(const std::string& recipe, std::optional<int> history,
                                 const std::string& algo, std::optional<int> margin) {
    RecipeSpec r;
    try {
        r = parse_recipe(recipe);
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--recipe: {}", e.what()));
    }
    if (history) {
        if (r.kind != RecipeKind::delayed)
            throw UsageError(fmt::format("--history: recipe '{}' is {} scaling, not delayed (it has no amax history)",
                                         r.name, name(r.kind)));
        if (*history < 1 || *history > (1 << 24))
            throw UsageError(fmt::format("--history {}: must be between 1 and 16777216", *history));
        r.history_len = *history;
    }
    if (!algo.empty()) {
        if (r.kind != RecipeKind::delayed)
            throw UsageError(fmt::format("--algo: recipe '{}' is {} scaling, not delayed", r.name, name(r.kind)));
        if (algo == "max") r.algo = AmaxAlgo::max;
        else if (algo == "most_recent" || algo == "most-recent") r.algo = AmaxAlgo::most_recent;
        else throw UsageError(fmt::format("--algo: unknown algorithm '{}' (choose from max, most_recent)", algo));
    }
    if (margin) {
        if (r.kind == RecipeKind::current)
            throw UsageError(fmt::format("--margin: recipe '{}' is current scaling, which has no margin", r.name));
        if (*margin < 0 || *margin > 64) throw UsageError(fmt::format("--margin {}: must be between 0 and 64", *margin));
        r.margin = *margin;
    }
    return r;
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

std::string describe_recipe(const RecipeSpec& r, std::optional<Format> forced) {
    std::string s = fmt::format("recipe {} ({} scaling, rule {}", r.name, name(r.kind), name(r.rule));
    if (r.kind == RecipeKind::delayed)
        s += fmt::format(", history {}, algo {}, margin {}", r.history_len, name(r.algo), r.margin);
    if (r.kind == RecipeKind::windowed)
        s += fmt::format(", window {}/{}/{}, margin {}", r.input.window, r.weight.window, r.grad.window, r.margin);
    if (forced)
        s += fmt::format(", format {} for every tensor)", name(*forced));
    else
        s += fmt::format(", formats: activation {}, weight {}, gradient {})", name(r.input.format),
                         name(r.weight.format), name(r.grad.format));
    return s;
}

}  // namespace fp8kit::cli
