// inspect's report on a terminal: the summary, the five worst tensors per measure, and one table
// row per tensor grouped under its parent path. Every name from a file is escaped (io::printable).
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "fp8kit/analysis/inspect_report.hpp"
#include "fp8kit/io/printable.hpp"
#include "inspect_te.hpp"

namespace fp8kit::inspect {
namespace {

namespace dp = fp8kit::dump;

std::string short_role(const dp::TensorInfo& t) {
    std::string s;
    switch (t.role) {
        case dp::Role::activation: s = "act"; break;
        case dp::Role::weight: s = "weight"; break;
        case dp::Role::gradient: s = "grad"; break;
        case dp::Role::optimizer_state: s = "optim"; break;
        case dp::Role::unknown: s = "?"; break;
    }
    return t.role_guessed ? s + "*" : s;
}

std::string pct_text(double p) {
    if (p == 0.0) return "0";
    if (p < 0.005) return "<0.01";
    return fmt::format("{:.2f}", p);
}

std::string sqnr_text(double db) {
    if (std::isnan(db)) return "-";
    if (std::isinf(db)) return db > 0 ? "exact" : "-inf";
    return fmt::format("{:.1f}", db);
}

// "tensor" or "file: tensor" when the run read several files; whole, escaped for the terminal.
std::string where(const dp::TensorInfo& t, bool multi_file) {
    return multi_file ? io::printable(t.file) + ": " + io::printable(t.name) : io::printable(t.name);
}

// The five worst tensors by `metric`: largest positive values, or lowest finite ones.
void write_worst(const Rows& rows, const char* title, const std::function<double(const Row&)>& metric, bool lowest,
                 bool multi_file, std::FILE* out) {
    std::vector<const Row*> v;
    for (const auto& r : rows) {
        const double m = metric(r);
        if (lowest ? std::isfinite(m) : m > 0) v.push_back(&r);
    }
    if (v.empty()) return;
    std::stable_sort(v.begin(), v.end(), [&](const Row* a, const Row* b) {
        return lowest ? metric(*a) < metric(*b) : metric(*a) > metric(*b);
    });
    fmt::print(out, "{}\n", title);
    for (std::size_t i = 0; i < std::min<std::size_t>(5, v.size()); ++i) {
        const double m = metric(*v[i]);
        const std::string val = lowest ? sqnr_text(m) + " dB" : pct_text(m) + "%";
        const auto& t = *v[i]->t;
        const std::string step = t.step ? fmt::format(" (step {}{})", *t.step, t.step_guessed ? "*" : "") : "";
        fmt::print(out, "  {:>9}  {:<4}  {}{}\n", val, name(v[i]->r.format), where(t, multi_file), step);
    }
}

// "activations e4m3, weights e4m3, gradients e5m2": what the recipe (or --format) casts each role to.
std::string formats_by_role(const Options& opts) {
    if (opts.format) return fmt::format("{} for every tensor (--format)", name(*opts.format));
    const auto& r = opts.recipe;
    return fmt::format("activations {}, weights {}, gradients {}", name(r.input.format), name(r.weight.format),
                       name(r.grad.format));
}

// One line per tensor, grouped under its parent path. The leaf column is as wide as the longest
// leaf, within `width` (the other columns take kFixed); a longer leaf is written whole and its row
// goes on below it (io::name_cell).
void write_table(const Report& r, std::size_t width, std::FILE* out) {
    constexpr std::size_t kFixed = 76, kMinName = 18;  // kFixed: the columns after the name
    auto split = [](const std::string& n) {
        const auto slash = n.find_last_of('/');
        return slash == std::string::npos
                   ? std::pair<std::string, std::string>{"", n}
                   : std::pair<std::string, std::string>{n.substr(0, slash), n.substr(slash + 1)};
    };
    std::size_t leaf_w = kMinName;
    for (const auto& row : r.rows) leaf_w = std::max(leaf_w, io::printable(split(row.t->name).second).size());
    if (width) leaf_w = std::min(leaf_w, std::max(kMinName, width > kFixed ? width - kFixed : 0));
    fmt::print(out, "\n{:<{}} {:>7} {:<7} {:<4} {:<4} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6}\n", "tensor", leaf_w + 2,
               "step", "role", "type", "fmt", "numel", "amax", "undr%", "subn%", "ovfl%", "SQNR");
    std::string group;
    for (const auto& row : r.rows) {
        const auto& t = *row.t;
        const auto [parent, leaf] = split(t.name);
        const std::string g = r.dump->files_opened() > 1 ? t.file + ": " + parent : parent;
        if (g != group || &row == &r.rows.front()) {
            group = g;
            fmt::print(out, "{}\n", io::printable(g.empty() ? "/" : g));
        }
        const std::string step = t.step ? std::to_string(*t.step) + (t.step_guessed ? "*" : "") : "-";
        fmt::print(out, "  {} {:>7} {:<7} {:<4} {:<4} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6}\n",
                   io::name_cell(leaf, leaf_w, 2), step, short_role(t), dp::name(t.dtype), name(row.r.format),
                   row.r.stats.numel, fmt::format("{:.3g}", row.r.stats.amax), pct_text(row.under()),
                   pct_text(row.sub()), pct_text(row.over()), sqnr_text(row.r.stats.sqnr_db()));
    }
}

constexpr std::size_t kNotesShown = 5;

void write_notes(const dp::Dump& dump, std::FILE* out) {
    const auto& notes = dump.notes();
    for (std::size_t i = 0; i < std::min(kNotesShown, notes.size()); ++i)
        fmt::print(out, "  skipped {}\n", io::printable(notes[i].describe()));
    if (notes.size() > kNotesShown)
        fmt::print(out, "  ... and {} more skipped (--json lists every one)\n", notes.size() - kNotesShown);
}

void write_summary(const Report& r, std::FILE* out) {
    std::uint64_t elements = 0;
    std::size_t with_over = 0, with_under = 0, with_nonfinite = 0;
    for (const auto& row : r.rows) {
        elements += row.r.stats.numel;
        with_over += row.r.stats.overflow > 0;
        with_under += row.r.stats.underflow > 0;
        with_nonfinite += row.r.stats.nan + row.r.stats.inf > 0;
    }
    fmt::print(out, "fp8kit inspect: {} tensors, {} elements, from {} file(s)\n", r.rows.size(), elements,
               r.dump->files_opened());
    fmt::print(out, "  recipe {}: {}\n", io::printable(r.options.recipe.name), formats_by_role(r.options));
    fmt::print(out, "  with overflow: {}   with underflow: {}   with NaN/Inf: {}   failed: {}   skipped: {}\n",
               with_over, with_under, with_nonfinite, r.errors.size(), r.dump->notes().size());
    write_notes(*r.dump, out);
}

void write_worst_lists(const Report& r, std::FILE* out) {
    const bool multi = r.dump->files_opened() > 1;
    write_worst(
        r.rows, "worst overflow (share of elements past the format's max):", [](const Row& x) { return x.over(); },
        false, multi, out);
    write_worst(
        r.rows,
        "worst underflow (share of elements, nonzero, that become zero):", [](const Row& x) { return x.under(); },
        false, multi, out);
    write_worst(
        r.rows, "most subnormal (share of elements cast to subnormal codes):", [](const Row& x) { return x.sub(); },
        false, multi, out);
    write_worst(
        r.rows, "lowest SQNR (signal to quantisation noise):", [](const Row& x) { return x.r.stats.sqnr_db(); }, true,
        multi, out);
}

}  // namespace

void write_text(const Report& r, std::size_t width, std::FILE* out) {
    write_summary(r, out);
    if (!r.rows.empty()) {
        fmt::print(out, "\n");
        write_worst_lists(r, out);
        write_table(r, width, out);
        fmt::print(out,
                   "\nrole*, step* = guessed from the name (a step also from the file or folder name)\n"
                   "undr% = nonzero values that become 0; SQNR in dB (exact: no error)\n");
    }
    write_te_text(r.te_checks, out);
}

}  // namespace fp8kit::inspect
