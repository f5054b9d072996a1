// sweep's report on a terminal: the summary and recommendations, per class the best grid recipes
// and the references, the per-tensor table, and the notes; every name from a file escaped.
#include <cmath>

#include <fmt/format.h>

#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"
#include "sweep_rows.hpp"

namespace fp8kit::sweep {
namespace {

constexpr std::size_t kNone = static_cast<std::size_t>(-1);

std::string pct(double v) { return std::isnan(v) ? "-" : fmt::format("{:.3g}", 100 * v); }
std::string dbs(const Outcome& o) {
    if (o.sqnr_count == 0) return o.lossless ? "inf" : "-";
    const double lo = o.mean_sqnr_db_lo(), hi = o.mean_sqnr_db_hi();
    if (hi - lo < 0.005) return fmt::format("{:.2f}", o.mean_sqnr_db());
    return fmt::format("{:.2f} [{:.2f},{:.2f}]", o.mean_sqnr_db(), lo, hi);
}
std::string margin_str(int m) { return m < 0 ? ">4" : std::to_string(m); }

// One candidate's line in a class's table.
void write_class_line(const Sweep& sw, std::size_t c, Role cls, std::FILE* out) {
    const auto& C = sw.candidates();
    const auto oc = sw.per_class(c, cls);
    if (C[c].blockwise)  // no trace side: per-block scales come from the data
        fmt::print(out, "  {:<38} {:>9} {:>12} {:>10} {:>7}", C[c].label, "-", "-", "-", "-");
    else
        fmt::print(out, "  {:<38} {:>9} {:>12} {:>10} {:>7}", C[c].label, oc.overflow_steps,
                   fmt::format("{:.4g}", oc.worst_headroom), fmt::format("{:.3f}", oc.mean_log2_headroom()),
                   C[c].grid ? margin_str(sw.min_safe_margin(c, -1, cls)) : "-");
    if (sw.has_dumps())
        fmt::print(out, " {:>10} {:>10}  {}", pct(oc.underflow_share()), pct(oc.subnormal_share()), dbs(oc));
    fmt::print(out, "\n");
}

// A class's best `top` grid recipes, then TE's default and the most-recent reference per format
// choice, then the presets (block presets only where a tensor was dumped).
void write_class_table(const Sweep& sw, Role cls, const ReportOptions& o, std::FILE* out) {
    const auto& C = sw.candidates();
    const auto order = sw.ranked(cls);
    fmt::print(out, "\n{}: best {} of the grid, then references\n", name(cls), o.top);
    fmt::print(out, "  {:<38} {:>9} {:>12} {:>10} {:>7}", "recipe", "overflow", "worst head", "mean log2h", "margin*");
    if (sw.has_dumps()) fmt::print(out, " {:>10} {:>10}  {}", "underflow%", "subnorm%", "SQNR dB [bounds]");
    fmt::print(out, "\n");
    for (std::size_t i = 0; i < order.size() && i < static_cast<std::size_t>(o.top); ++i)
        write_class_line(sw, order[i], cls, out);
    fmt::print(out, "  --\n");
    for (const auto& f : o.formats) {
        const std::size_t te = sw.find(1024, AmaxAlgo::max, 0, f), mg = sw.find(1, AmaxAlgo::most_recent, 0, f);
        if (te != kNone) write_class_line(sw, te, cls, out);
        if (mg != kNone) write_class_line(sw, mg, cls, out);
    }
    for (std::size_t c = 0; c < C.size(); ++c)
        if (!C[c].grid && (!C[c].blockwise || sw.per_class(c, cls).dumped)) write_class_line(sw, c, cls, out);
}

// The text report up to the per-tensor table (rank 0).
void write_summary(const Loaded& L, const ReportOptions& o, std::FILE* out) {
    const Sweep& sw = *L.sweep;
    std::size_t grid = 0;
    for (const auto& c : sw.candidates()) grid += c.grid;
    fmt::print(out, "sweep: {} recipes ({} on the delayed grid) over {} tensors", sw.candidates().size(), grid,
               sw.series().size());
    if (!L.trace_files.empty()) fmt::print(out, " from {} trace file(s)", L.trace_files.size());
    if (!L.dumped.empty()) fmt::print(out, "; {} dumped tensors evaluated", L.dumped.size());
    if (!L.errors.empty())
        fmt::print(out, "; {} input(s) could not be read and are left out (each named on stderr)", L.errors.size());
    fmt::print(out, "\n\nRecommendations\n");
    for (Role cls : kClasses)
        if (sw.has_class(cls)) fmt::print(out, "  {}\n", io::printable(sw.recommendation(cls)));
    for (Role cls : kClasses)
        if (sw.has_class(cls)) write_class_table(sw, cls, o, out);
    fmt::print(out, "\n(margin*: smallest margin 0..4 with no overflowing step for that history/algo/format)\n");
}

// Per tensor: its class's recommended recipe and TE's default. The ranking is computed once per
// class (once per tensor made this quadratic in tensors).
void write_per_tensor(const Sweep& sw, const ReportOptions& o, std::FILE* out) {
    const auto& C = sw.candidates();
    const auto& S = sw.series();
    std::size_t best_of[3] = {0, 0, 0};
    for (Role cls : kClasses)
        if (sw.has_class(cls)) best_of[class_index(cls)] = sw.ranked(cls).front();
    std::size_t w = 6;
    for (const auto& s : S) w = std::max(w, io::printable(s.tensor).size());
    if (o.width) w = std::min(w, std::max<std::size_t>(24, o.width > 86 ? o.width - 86 : 0));
    if (o.root) {
        fmt::print(out,
                   "\nPer tensor: the recommended recipe of its class | TE default (history 1024, max, margin 0)\n");
        fmt::print(out, "  {:<{}} {:<10} {:>6} | {:>8} {:>7} {:>10} | {:>8} {:>7} {:>10}\n", "tensor", w, "class",
                   "steps", "overflow", "margin*", "worst head", "overflow", "margin*", "worst head");
        io::flush(out);  // before the rows
    }
    // Per class, the candidates the row reads (best, TE's default and their margin siblings):
    // only those are replayed again.
    std::vector<bool> wanted_of[3];
    for (int k = 0; k < 3; ++k) {
        wanted_of[k].assign(C.size(), false);
        const std::size_t best = best_of[k], te = sw.find(1024, AmaxAlgo::max, 0, C[best].forced);
        for (std::size_t c : {best, te}) {
            if (c >= C.size()) continue;
            wanted_of[k][c] = true;
            for (std::size_t m : sw.margin_siblings(c)) wanted_of[k][m] = true;
        }
    }
    auto make = [&](std::size_t first, std::size_t last) {
        fmt::memory_buffer buf;
        for (std::size_t s = first; s < last; ++s) {
            const Role cls = S[s].role;
            const int k = class_index(cls);
            const std::size_t best = best_of[k], te = sw.find(1024, AmaxAlgo::max, 0, C[best].forced);
            const auto oc = sw.tensor_outcomes(s, wanted_of[k]);
            const auto &a = oc[best], &b = oc[te];
            fmt::format_to(fmt::appender(buf), "  {} {:<10} {:>6} | {:>8} {:>7} {:>10} | {:>8} {:>7} {:>10}\n",
                           io::name_cell(S[s].tensor, w, 2), name(cls), S[s].steps.size(), a.overflow_steps,
                           margin_str(sw.min_safe_margin(best, oc)), fmt::format("{:.4g}", a.worst_headroom),
                           b.overflow_steps, margin_str(sw.min_safe_margin(te, oc)),
                           fmt::format("{:.4g}", b.worst_headroom));
        }
        return fmt::to_string(buf);
    };
    write_series_rows(o, S.size(), make, out);
}

}  // namespace

void write_text(const Loaded& L, const ReportOptions& o, std::FILE* out) {
    if (o.root) write_summary(L, o, out);
    write_per_tensor(*L.sweep, o, out);
    if (!o.root) return;
    for (const auto& n : L.skipped) fmt::print(out, "note: skipped {}\n", io::printable(n.describe()));
    for (const auto& n : L.notes) fmt::print(out, "note: {}\n", io::printable(n));
}

void write_warnings(const std::vector<warn::Warning>& ws, std::size_t top, std::FILE* out) {
    fmt::print(out, "\n{} early warning(s) (fp8kit watch's defaults; docs/early-warning.md){}\n", ws.size(),
               ws.empty() ? "" : ":");
    for (std::size_t i = 0; i < ws.size() && i < top; ++i) fmt::print(out, "{}. {}\n", i + 1, warn::to_text(ws[i]));
    if (ws.size() > top)
        fmt::print(out, "... {} more (fp8kit watch --top 0 lists all; --json has all)\n", ws.size() - top);
}

}  // namespace fp8kit::sweep
