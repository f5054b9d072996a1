// Traces from files for replay: trace files as they are, dumps reduced to one amax per step.
#include <sys/stat.h>

#include "fp8kit/analysis/trace_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <memory>

#include "fp8kit/analysis/sweep.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace fp8kit::trace {

Trace dump_trace(const std::string& path, const dump::ReadOptions& read) {
    dump::Dump d(std::vector<std::string>{path}, dump::Selection{}, read);
    if (!d.errors().empty()) throw TraceError(d.errors().front().describe());
    std::map<std::string, std::vector<std::pair<std::int64_t, float>>> by_name;
    std::map<std::string, Role> roles;
    for (std::size_t i = 0; i < d.tensors().size(); ++i) {
        const auto& t = d.tensors()[i];
        if (t.role == dump::Role::optimizer_state || !t.step) continue;
        float amax = 0;  // TE's reduction over chunks: Inf wins, NaN ignored (fmaxf)
        // A fill-value run is one value however long (read_runs): its maximum is that value's.
        d.read_runs(i, [&](const dump::Chunk& c) { amax = std::fmax(amax, amax_of(c.bits, c.wide, c.count)); });
        const std::string n = sweep::series_name_of_dump(t.name);
        by_name[n].emplace_back(*t.step, amax);
        roles[n] = recipe_slot(t.role);  // the reader already guessed unknown roles from the name
    }
    Trace tr;
    tr.file = path;
    tr.skipped = dump::skipped(d.notes());
    for (auto& [n, v] : by_name) {
        std::sort(v.begin(), v.end());
        Series s;
        s.tensor = n;
        s.role = roles[n];
        for (std::size_t k = 0; k < v.size(); ++k) {
            if (k && v[k].first == v[k - 1].first)
                throw TraceError(fmt::format("{}: tensor '{}' step {} is dumped twice", path, n, v[k].first));
            s.steps.push_back(v[k].first);
            s.amax.push_back(v[k].second);
            s.lines.push_back(0);
        }
        tr.series.push_back(std::move(s));
    }
    if (tr.series.empty())
        throw TraceError(fmt::format("{}: no dumped tensor with a step (optimizer state is left out)", path));
    return tr;
}

Trace load_trace(const std::string& path, const std::vector<std::string>& patterns, const dump::ReadOptions& read) {
    // A folder is TransformerEngine's statistics logs of several ranks (read_te_stats).
    struct stat st {};
    const bool dir = ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
    if (!dir) require_regular_file(path);
    Trace t = dir ? read_te_stats(path) : dump::is_dump_file(path) ? dump_trace(path, read) : read_trace(path);
    if (patterns.empty()) return t;
    std::vector<Series> keep;
    for (auto& s : t.series)
        for (const auto& p : patterns)
            if (matches(p, s.tensor)) {
                keep.push_back(std::move(s));
                break;
            }
    if (keep.empty()) {
        std::string ps;
        for (const auto& p : patterns) ps += (ps.empty() ? "'" : ", '") + p + "'";
        throw TraceError(fmt::format("--tensor {}: no tensor of {} matches", ps, path));
    }
    t.series = std::move(keep);
    return t;
}

}  // namespace fp8kit::trace
