// Trace loading and recipe overrides for replay and sweep.
#include "trace_input.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <stdexcept>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "fp8kit/analysis/sweep.hpp"

namespace fp8kit::cli {

bool is_dump_file(const std::string& path) {
    if (dump::is_hdf5_file(path)) return true;
    std::ifstream in(path, std::ios::binary);
    unsigned char h[9];
    if (!in.read(reinterpret_cast<char*>(h), 9)) return false;
    std::uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | h[i];
    return n > 1 && n < (std::uint64_t{100} << 20) && h[8] == '{';  // safetensors header
}

trace::Trace dump_trace(const std::string& path) {
    std::unique_ptr<dump::Dump> d;
    try {
        d = std::make_unique<dump::Dump>(std::vector<std::string>{path});
    } catch (const dump::DumpError& e) {
        throw UsageError(e.what());
    }
    if (!d->errors().empty()) throw UsageError(d->errors().front().describe());
    std::map<std::string, std::vector<std::pair<std::int64_t, float>>> by_name;
    std::map<std::string, Role> roles;
    for (std::size_t i = 0; i < d->tensors().size(); ++i) {
        const auto& t = d->tensors()[i];
        if (t.role == dump::Role::optimizer_state || !t.step) continue;
        float amax = 0;  // TE's reduction over chunks: Inf wins, NaN ignored (fmaxf)
        try {
            d->read(i, [&](const dump::Chunk& c) { amax = std::fmax(amax, amax_of(c.bits, c.wide, c.count)); });
        } catch (const dump::DumpError& e) {
            throw UsageError(e.what());
        }
        const std::string n = sweep::series_name_of_dump(t.name);
        by_name[n].emplace_back(*t.step, amax);
        roles[n] = recipe_slot(t.role);  // the reader already guessed unknown roles from the name
    }
    trace::Trace tr;
    tr.file = path;
    for (auto& [n, v] : by_name) {
        std::sort(v.begin(), v.end());
        trace::Series s;
        s.tensor = n;
        s.role = roles[n];
        for (std::size_t k = 0; k < v.size(); ++k) {
            if (k && v[k].first == v[k - 1].first)
                throw UsageError(fmt::format("{}: tensor '{}' step {} is dumped twice", path, n, v[k].first));
            s.steps.push_back(v[k].first);
            s.amax.push_back(v[k].second);
            s.lines.push_back(0);
        }
        tr.series.push_back(std::move(s));
    }
    if (tr.series.empty()) throw UsageError(fmt::format("{}: no dumped tensor with a step (optimizer state is left out)", path));
    return tr;
}

trace::Trace load_trace(const std::string& path, const std::vector<std::string>& patterns) {
    trace::Trace t;
    {
        std::ifstream probe(path, std::ios::binary);
        if (!probe) throw UsageError(fmt::format("{}: cannot open the file", path));
    }
    if (is_dump_file(path)) {
        t = dump_trace(path);
    } else {
        try {
            t = trace::read_trace(path);
        } catch (const trace::TraceError& e) {
            throw UsageError(e.what());
        }
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
