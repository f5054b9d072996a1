// The report of `fp8kit replay` (analysis/replay_report.hpp).
#include "fp8kit/analysis/replay_report.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/json_number.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::replay {

std::vector<SeriesResult> replay_trace(const RecipeSpec& r, const trace::Trace& t, std::optional<Format> forced) {
    std::vector<SeriesResult> res;
    for (const auto& s : t.series) res.push_back(replay_series(r, s, forced));
    return res;
}

std::vector<warn::Warning> trace_warnings(const RecipeSpec& r, std::optional<Format> forced, const std::string& path,
                                          const trace::Trace& t) {
    warn::TrendConfig c;
    if (r.kind != RecipeKind::current) c.recipe = r;
    c.format = forced;
    warn::Watcher w(c, path);
    warn::watch_trace(w, t);
    return w.warnings();
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

void write_csv(const std::vector<SeriesResult>& res, std::FILE* out) {
    std::fprintf(out, "step,tensor,amax,scale,headroom,overflow\n");
    for (const auto& s : res)
        for (std::size_t i = 0; i < s.steps.size(); ++i)
            fmt::print(out, "{},{},{:.9g},{:.9g},{:.9g},{}\n", s.steps[i], io::csv_field(s.tensor),
                       static_cast<double>(s.amax[i]), static_cast<double>(s.scale[i]),
                       static_cast<double>(s.headroom[i]), s.overflow[i] ? 1 : 0);
}

namespace {

nlohmann::json series_json(const SeriesResult& s) {
    nlohmann::json t;
    t["tensor"] = s.tensor;
    t["class"] = std::string(name(s.role));
    t["format"] = std::string(name(s.format));
    t["steps"] = s.steps;
    auto& a = t["amax"] = nlohmann::json::array();
    auto& sc = t["scale"] = nlohmann::json::array();
    auto& h = t["headroom"] = nlohmann::json::array();
    for (std::size_t i = 0; i < s.steps.size(); ++i) {
        a.push_back(io::json_number(s.amax[i]));  // non-finite as words: io/json_number.hpp
        sc.push_back(io::json_number(s.scale[i]));
        h.push_back(io::json_number(s.headroom[i]));
    }
    t["overflow"] = s.overflow;
    t["overflow_steps"] = s.overflow_steps;
    t["worst_headroom"] = io::json_number(s.worst_headroom);
    t["worst_step"] = s.worst_step;
    return t;
}

}  // namespace

void write_json(const std::vector<SeriesResult>& res, const trace::Trace& t, const ReportOptions& o, std::FILE* out) {
    nlohmann::json j;
    j["trace"] = o.trace;
    j["recipe"] = to_json(o.recipe);
    j["skipped"] = t.skipped;
    j["tensors"] = nlohmann::json::array();
    for (const auto& s : res) j["tensors"].push_back(series_json(s));
    if (o.warnings) {
        auto& wj = j["warnings"] = nlohmann::json::array();
        for (const auto& w : *o.warnings) wj.push_back(warn::to_json(w));
    }
    fmt::print(out, "{}\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void write_text(const std::vector<SeriesResult>& res, const trace::Trace& t, const ReportOptions& o, std::FILE* out) {
    std::fprintf(out, "%s\n", describe_recipe(o.recipe, o.forced).c_str());
    fmt::print(out, "trace {}: {} tensors\n\n", io::printable(o.trace), res.size());
    // The name column: as wide as the longest name, within the width (the rest takes 64).
    std::size_t w = 6;
    for (const auto& s : res) w = std::max(w, io::printable(s.tensor).size());
    if (o.width) w = std::min(w, std::max<std::size_t>(24, o.width > 64 ? o.width - 64 : 0));
    std::fprintf(out, "%-*s  %-10s  %-6s  %6s  %9s  %-22s\n", static_cast<int>(w), "tensor", "class", "format", "steps",
                 "overflow", "worst headroom (step)");
    std::size_t total = 0, bad = 0;
    for (const auto& s : res) {
        const std::string worst = s.worst_step < 0 ? "-" : fmt::format("{:.4g} ({})", s.worst_headroom, s.worst_step);
        std::fprintf(out, "%s  %-10s  %-6s  %6zu  %9zu  %-22s\n",
                     io::name_cell(s.tensor.empty() ? "(unnamed)" : s.tensor, w, 0).c_str(),
                     std::string(name(s.role)).c_str(), std::string(name(s.format)).c_str(), s.steps.size(),
                     s.overflow_steps, worst.c_str());
        total += s.overflow_steps;
        bad += s.overflow_steps > 0;
    }
    std::fprintf(out,
                 "\n%zu overflowing steps in %zu of %zu tensors (headroom = amax*scale/max; > 1 overflows "
                 "once the scaled amax rounds past max)\n",
                 total, bad, res.size());
    for (const auto& n : t.skipped) fmt::print(out, "note: skipped {}\n", io::printable(n.describe()));
    if (!o.warnings) return;
    const auto& ws = *o.warnings;
    fmt::print(out, "\n{} early warning(s) (docs/early-warning.md){}\n", ws.size(), ws.empty() ? "" : ":");
    for (std::size_t i = 0; i < ws.size(); ++i) fmt::print(out, "{}. {}", i + 1, warn::to_text(ws[i]));
}

}  // namespace fp8kit::replay
