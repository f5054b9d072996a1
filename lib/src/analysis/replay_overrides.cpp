// What-if settings for a replayed recipe (replay.hpp: with_overrides).
#include <fmt/format.h>

#include <stdexcept>

#include "fp8kit/analysis/replay.hpp"

namespace fp8kit::replay {

RecipeSpec with_overrides(RecipeSpec r, const Overrides& o) {
    using E = std::invalid_argument;
    if (o.history) {
        if (r.kind != RecipeKind::delayed)
            throw E(fmt::format("--history: recipe '{}' is {} scaling, not delayed (it has no amax history)", r.name,
                                name(r.kind)));
        if (*o.history < 1 || *o.history > (1 << 24))
            throw E(fmt::format("--history {}: must be between 1 and 16777216", *o.history));
        r.history_len = *o.history;
    }
    if (!o.algo.empty()) {
        if (r.kind != RecipeKind::delayed)
            throw E(fmt::format("--algo: recipe '{}' is {} scaling, not delayed", r.name, name(r.kind)));
        if (o.algo == "max")
            r.algo = AmaxAlgo::max;
        else if (o.algo == "most_recent" || o.algo == "most-recent")
            r.algo = AmaxAlgo::most_recent;
        else
            throw E(fmt::format("--algo: unknown algorithm '{}' (choose from max, most_recent)", o.algo));
    }
    if (o.margin) {
        if (r.kind == RecipeKind::current)
            throw E(fmt::format("--margin: recipe '{}' is current scaling, which has no margin", r.name));
        if (*o.margin < 0 || *o.margin > 64) throw E(fmt::format("--margin {}: must be between 0 and 64", *o.margin));
        r.margin = *o.margin;
    }
    return r;
}

}  // namespace fp8kit::replay
