// fp8kit sweep: a grid of delayed-scaling recipes (and reference presets) over amax traces and
// tensor dumps, with per-class recommendations.
#include <cmath>
#include <cstdio>
#include <memory>

#include <fmt/compile.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/json_number.hpp"
#include "command.hpp"
#include "fp8kit/analysis/sweep.hpp"
#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/cluster/sweep.hpp"
#include "fp8kit/warn/watch.hpp"
#include "device_flag.hpp"
#include "read_flags.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"
#include "json_out.hpp"
#include "recipe_args.hpp"
#include "terminal.hpp"

namespace fp8kit::cli {
namespace {

using io::csv_field;

struct SweepOpts {
    std::vector<std::string> inputs, tensors;
    std::string format = "auto";
    bool csv = false, json = false, blocks = true, wide = false, quiet = false, progress = false, warn = false;
    int top = 5;
    // --warn: the early warnings of the same inputs (fp8kit watch with its defaults), computed on
    // rank 0 before the report is written.
    std::vector<warn::Warning> warnings;
    DeviceFlags device;
};

constexpr Role kClasses[] = {Role::activation, Role::weight, Role::gradient};

nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp

std::string pct(double v) { return std::isnan(v) ? "-" : fmt::format("{:.3g}", 100 * v); }
std::string dbs(const sweep::Outcome& o) {
    if (o.sqnr_count == 0) return o.lossless ? "inf" : "-";
    const double lo = o.mean_sqnr_db_lo(), hi = o.mean_sqnr_db_hi();
    if (hi - lo < 0.005) return fmt::format("{:.2f}", o.mean_sqnr_db());
    return fmt::format("{:.2f} [{:.2f},{:.2f}]", o.mean_sqnr_db(), lo, hi);
}
std::string margin_str(int m) { return m < 0 ? ">4" : std::to_string(m); }

nlohmann::json outcome_json(const sweep::Outcome& oc) {
    nlohmann::json j;
    j["tensors"] = oc.tensors;
    j["steps"] = oc.steps;
    j["overflow_steps"] = oc.overflow_steps;
    j["first_step_overflows"] = oc.first_step_overflows;
    j["worst_headroom"] = num(oc.worst_headroom);
    j["worst_step"] = oc.worst_step;
    j["mean_log2_headroom"] = num(oc.mean_log2_headroom());
    j["dumped"] = oc.dumped;
    j["underflow_share"] = num(oc.underflow_share());
    j["subnormal_share"] = num(oc.subnormal_share());
    j["underflow_uncertain"] = oc.underflow_uncertain;
    j["subnormal_uncertain"] = oc.subnormal_uncertain;
    j["sqnr_db"] = num(oc.mean_sqnr_db());
    j["sqnr_db_bounds"] = {num(oc.mean_sqnr_db_lo()), num(oc.mean_sqnr_db_hi())};
    j["lossless"] = oc.lossless;
    return j;
}

// outcome_json(oc) plus "min_safe_margin", written by json_out (keys in nlohmann's sorted order):
// the per-tensor rows, where building nlohmann objects cost most of a 10^5-tensor sweep.
void outcome_row(fmt::memory_buffer& b, const sweep::Outcome& oc, int min_safe_margin) {
    // At most 17 keys (255 bytes), 11 integers (20 bytes each) and 6 doubles (25 bytes each).
    json_out::Row r(b, 1024);
    r.lit("\"dumped\":");
    r.integer(oc.dumped);
    r.lit(",\"first_step_overflows\":");
    r.integer(oc.first_step_overflows);
    r.lit(",\"lossless\":");
    r.integer(oc.lossless);
    r.lit(",\"mean_log2_headroom\":");
    r.stat(oc.mean_log2_headroom());
    r.lit(",\"min_safe_margin\":");
    r.integer(min_safe_margin);
    r.lit(",\"overflow_steps\":");
    r.integer(oc.overflow_steps);
    r.lit(",\"sqnr_db\":");
    r.stat(oc.mean_sqnr_db());
    r.lit(",\"sqnr_db_bounds\":[");
    r.stat(oc.mean_sqnr_db_lo());
    r.lit(",");
    r.stat(oc.mean_sqnr_db_hi());
    r.lit("],\"steps\":");
    r.integer(oc.steps);
    r.lit(",\"subnormal_share\":");
    r.stat(oc.subnormal_share());
    r.lit(",\"subnormal_uncertain\":");
    r.integer(oc.subnormal_uncertain);
    r.lit(",\"tensors\":");
    r.integer(oc.tensors);
    r.lit(",\"underflow_share\":");
    r.stat(oc.underflow_share());
    r.lit(",\"underflow_uncertain\":");
    r.integer(oc.underflow_uncertain);
    r.lit(",\"worst_headroom\":");
    r.stat(oc.worst_headroom);
    r.lit(",\"worst_step\":");
    r.integer(oc.worst_step);
    r.done();
}

std::string dump_json(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

// One phase's progress line, made when its total is first known (cluster::Progress calls).
struct PhaseBar {
    bool on;
    std::string what;
    std::unique_ptr<Progress> bar;
    void operator()(std::size_t done, std::size_t total) {
        if (!on) return;
        if (!bar) bar = std::make_unique<Progress>(true, total, what);
        bar->update(done);
    }
    void done() {
        if (bar) bar->done();
    }
};

// Writes rank 0's `bytes` to stdout (the other ranks only make rows: cluster::series_rows).
void put_out(const std::string& bytes) { std::fwrite(bytes.data(), 1, bytes.size(), stdout); }

void write_csv(const sweep::Sweep& sw, const sweep::Loaded& L, cluster::Comm& comm, PhaseBar& bar) {
    const auto& C = sw.candidates();
    const auto& S = sw.series();
    if (comm.root())
        fmt::print(
            "scope,name,class,candidate,kind,history,algo,margin,format,steps,overflow_steps,worst_headroom,"
            "mean_log2_headroom,min_safe_margin,dumped,underflow_share,subnormal_share,sqnr_db,sqnr_db_lo,"
            "sqnr_db_hi\n");
    // Rows go through one buffer, written once per class or group of tensors (10^5 tensors x 60
    // rows). The fields from class to format depend on the class and candidate only: spelled once.
    std::vector<std::string> middle[3];
    for (std::size_t k = 0; k < 3; ++k)
        for (std::size_t c = 0; c < C.size(); ++c) {
            const auto& r = C[c].recipe;
            const Role cls = kClasses[k];
            const std::string_view f =
                name(replay::role_format(r, cls, C[c].forced));  // block presets: their role's format
            middle[k].push_back(fmt::format(",{},\"{}\",{},{},{},{},{},", name(cls), C[c].label, name(r.kind),
                                            r.history_len, name(r.algo), r.margin, f));
        }
    auto row = [&](fmt::memory_buffer& b, std::string_view scope, std::string_view field, Role cls, std::size_t c,
                   const sweep::Outcome& oc, int msm) {
        b.append(scope);
        b.push_back(',');
        b.append(field);
        b.append(middle[cls == Role::weight ? 1 : cls == Role::gradient ? 2 : 0][c]);
        fmt::format_to(fmt::appender(b), FMT_COMPILE("{},{},{:.9g},{:.9g},"), oc.steps, oc.overflow_steps,
                       oc.worst_headroom, oc.mean_log2_headroom());
        if (C[c].grid) json_out::integer(b, msm);
        fmt::format_to(fmt::appender(b), FMT_COMPILE(",{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n"), oc.dumped,
                       oc.underflow_share(), oc.subnormal_share(), oc.mean_sqnr_db(), oc.mean_sqnr_db_lo(),
                       oc.mean_sqnr_db_hi());
    };
    if (comm.root()) {
        fmt::memory_buffer b;
        for (Role cls : kClasses) {
            if (!sw.has_class(cls)) continue;
            const std::string field = csv_field(name(cls));
            for (std::size_t c = 0; c < C.size(); ++c)
                row(b, "class", field, cls, c, sw.per_class(c, cls), sw.min_safe_margin(c, -1, cls));
            std::fwrite(b.data(), 1, b.size(), stdout);
            b.clear();
        }
    }
    // Per tensor: each group of series' rows made by one rank, written by rank 0 in order.
    cluster::series_rows(
        comm, S.size(),
        [&](std::size_t first, std::size_t last) {
            fmt::memory_buffer b;
            for (std::size_t s = first; s < last; ++s) {
                const auto oc = sw.tensor_outcomes(s);
                const std::string field = csv_field(S[s].tensor);
                for (std::size_t c = 0; c < C.size(); ++c)
                    row(b, "tensor", field, S[s].role, c, oc[c], sw.min_safe_margin(c, oc));
            }
            return fmt::to_string(b);
        },
        put_out, std::ref(bar));
    if (!comm.root()) return;
    io::flush_stdout();
    for (const auto& n : L.skipped) fmt::print(stderr, "fp8kit sweep: note: skipped {}\n", io::printable(n));
    for (const auto& n : L.notes) fmt::print(stderr, "fp8kit sweep: note: {}\n", io::printable(n));
}

// The JSON object up to its "tensors" array (rank 0).
void write_json_head(const sweep::Sweep& sw, const sweep::Loaded& L, const SweepOpts& o) {
    const auto& C = sw.candidates();
    nlohmann::json head;
    head["inputs"] = o.inputs;
    head["notes"] = L.notes;
    head["skipped"] = L.skipped;
    // Inputs that could not be read (as inspect's "errors"): the sweep went on without them.
    head["errors"] = nlohmann::json::array();
    for (const auto& p : L.errors)
        head["errors"].push_back({{"file", p.file}, {"name", p.name}, {"message", p.message}});
    if (o.warn) {
        head["warnings"] = nlohmann::json::array();
        for (const auto& w : o.warnings) head["warnings"].push_back(warn::to_json(w));
    }
    head["candidates"] = nlohmann::json::array();
    for (const auto& c : C) {
        nlohmann::json cj = to_json(c.recipe);
        cj["label"] = c.label;
        cj["format_choice"] = c.forced ? std::string(name(*c.forced)) : "hybrid";
        cj["grid"] = c.grid;
        head["candidates"].push_back(cj);
    }
    for (Role cls : kClasses) {
        if (!sw.has_class(cls)) continue;
        auto& k = head["classes"][std::string(name(cls))];
        k["recommendation"] = sw.recommendation(cls);
        k["ranked"] = sw.ranked(cls);
        for (std::size_t c = 0; c < C.size(); ++c) {
            auto oc = outcome_json(sw.per_class(c, cls));
            oc["min_safe_margin"] = sw.min_safe_margin(c, -1, cls);
            k["outcomes"].push_back(oc);
        }
    }
    std::string h = dump_json(head);
    h.pop_back();  // the closing brace: the tensors follow
    fmt::print("{}{}\"tensors\":[\n", h, head.empty() ? "" : ",");
}

// One JSON object written in pieces: the small parts through nlohmann, each tensor as its own
// line, so a sweep of 10^5 tensors never holds them all.
void write_json(const sweep::Sweep& sw, const sweep::Loaded& L, const SweepOpts& o, cluster::Comm& comm,
                PhaseBar& bar) {
    const auto& C = sw.candidates();
    const auto& S = sw.series();
    if (comm.root()) write_json_head(sw, L, o);
    // The tensors, one line each, as nlohmann would write {"class", "outcomes", "steps", "tensor"};
    // each group of series made by one rank, written by rank 0 in order.
    cluster::series_rows(
        comm, S.size(),
        [&](std::size_t first, std::size_t last) {
            fmt::memory_buffer b;
            for (std::size_t s = first; s < last; ++s) {
                const auto oc = sw.tensor_outcomes(s);
                b.push_back('{');
                json_out::key(b, "class", true);
                json_out::string(b, name(S[s].role));
                if (!C.empty()) {
                    json_out::key(b, "outcomes");
                    for (std::size_t c = 0; c < C.size(); ++c) {
                        b.append(std::string_view(c ? ",{" : "[{"));
                        outcome_row(b, oc[c], sw.min_safe_margin(c, oc));
                        b.push_back('}');
                    }
                    b.push_back(']');
                }
                json_out::key(b, "steps");
                json_out::integer(b, S[s].steps.size());
                json_out::key(b, "tensor");
                json_out::string(b, S[s].tensor);
                b.append(std::string_view(s + 1 < S.size() ? "},\n" : "}\n"));
            }
            return fmt::to_string(b);
        },
        put_out, std::ref(bar));
    if (comm.root()) fmt::print("]}}\n");
}

// Per tensor: its class's recommended recipe and TE's default. The ranking is computed once per
// class (once per tensor made this quadratic in tensors).
void write_per_tensor(const sweep::Sweep& sw, const SweepOpts& o, cluster::Comm& comm, PhaseBar& bar) {
    const auto& C = sw.candidates();
    const auto& S = sw.series();
    std::size_t best_of[3] = {0, 0, 0};
    for (Role cls : kClasses)
        if (sw.has_class(cls))
            best_of[cls == Role::weight ? 1 : cls == Role::gradient ? 2 : 0] = sw.ranked(cls).front();
    const std::size_t width = o.wide ? 0 : output_width();
    std::size_t w = 6;
    for (const auto& s : S) w = std::max(w, io::printable(s.tensor).size());
    if (width) w = std::min(w, std::max<std::size_t>(24, width > 86 ? width - 86 : 0));
    w = std::stoul(comm.broadcast(std::to_string(w)));  // rank 0's terminal decides the column
    if (comm.root()) {
        fmt::print("\nPer tensor: the recommended recipe of its class | TE default (history 1024, max, margin 0)\n");
        fmt::print("  {:<{}} {:<10} {:>6} | {:>8} {:>7} {:>10} | {:>8} {:>7} {:>10}\n", "tensor", w, "class", "steps",
                   "overflow", "margin*", "worst head", "overflow", "margin*", "worst head");
        io::flush_stdout();  // the rows follow through put_out
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
    // Each group of series' rows made by one rank, written by rank 0 in order.
    cluster::series_rows(
        comm, S.size(),
        [&](std::size_t first, std::size_t last) {
            fmt::memory_buffer out;
            for (std::size_t s = first; s < last; ++s) {
                const Role cls = S[s].role;
                const int k = cls == Role::weight ? 1 : cls == Role::gradient ? 2 : 0;
                const std::size_t best = best_of[k];
                const std::size_t te = sw.find(1024, AmaxAlgo::max, 0, C[best].forced);
                const auto oc = sw.tensor_outcomes(s, wanted_of[k]);
                const auto &a = oc[best], &b = oc[te];
                fmt::format_to(fmt::appender(out), "  {} {:<10} {:>6} | {:>8} {:>7} {:>10} | {:>8} {:>7} {:>10}\n",
                               name_cell(S[s].tensor, w, 2), name(cls), S[s].steps.size(), a.overflow_steps,
                               margin_str(sw.min_safe_margin(best, oc)), fmt::format("{:.4g}", a.worst_headroom),
                               b.overflow_steps, margin_str(sw.min_safe_margin(te, oc)),
                               fmt::format("{:.4g}", b.worst_headroom));
            }
            return fmt::to_string(out);
        },
        put_out, std::ref(bar));
}

// Each input that could not be read, one line on stderr as inspect writes it; exit status 1.
void report_errors(const sweep::Loaded& L) {
    io::flush_stdout();
    for (const auto& p : L.errors) fmt::print(stderr, "fp8kit: error: {}\n", io::printable(p.describe()));
    if (!L.errors.empty()) exit_status() = 1;
}

void write_report(const SweepOpts& o, const std::vector<std::optional<Format>>& formats, const sweep::Loaded& L,
                  cluster::Comm& comm, PhaseBar& rows);
void write_summary(const SweepOpts& o, const std::vector<std::optional<Format>>& formats, const sweep::Loaded& L);

// The early warnings of the sweep's inputs: `fp8kit watch` with its default settings on the same
// files and tensor globs (docs/early-warning.md).
std::vector<warn::Warning> early_warnings(const SweepOpts& o) {
    warn::WatchInputs in;
    warn::apply_options(in, nlohmann::json::object());
    in.files = o.inputs;
    in.tensors = o.tensors;
    in.read = cli_read_options();
    return warn::watch_files(in).warnings;
}

void print_warnings(const std::vector<warn::Warning>& ws, std::size_t top) {
    fmt::print("\n{} early warning(s) (fp8kit watch's defaults; docs/early-warning.md){}\n", ws.size(),
               ws.empty() ? "" : ":");
    for (std::size_t i = 0; i < ws.size() && i < top; ++i) fmt::print("{}. {}\n", i + 1, warn::to_text(ws[i]));
    if (ws.size() > top) fmt::print("... {} more (fp8kit watch --top 0 lists all; --json has all)\n", ws.size() - top);
}

void run(SweepOpts& o) {
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    if (o.csv && o.warn)
        throw UsageError(
            "--warn and --csv: the CSV is one table of outcomes; `fp8kit watch --csv` gives the warnings as CSV");
    if (o.top < 1) throw UsageError(fmt::format("--top {}: must be at least 1", o.top));
    resolve_device(o.device, "sweep", false);  // checks --device; nothing of sweep's runs on a GPU
    std::vector<std::optional<Format>> formats;
    if (o.format == "all")
        formats = {Format::e4m3, Format::e5m2};
    else
        formats = {parse_format_choice(o.format)};
    // Under mpirun the ranks share the dumped tensors' histogram passes, the series' replay and
    // the per-series rows; rank 0 alone writes the report (docs/mpi.md).
    auto& comm = cluster::world();
    sweep::Inputs in;
    in.files = o.inputs, in.tensors = o.tensors, in.formats = formats, in.blocks = o.blocks;
    in.read = cli_read_options();
    // Progress on rank 0's stderr, phase by phase (under mpirun: rank 0's share of each).
    const bool show = progress_on(comm.root(), o.quiet, o.progress);
    PhaseBar reading{show, "dumped tensors read", nullptr}, replay{show, "groups of series evaluated", nullptr},
        rows{show, "groups of series written", nullptr};
    in.progress = std::ref(reading);
    sweep::Loaded L = cluster::load_sweep_inputs(comm, std::move(in));
    reading.done();
    cluster::run_sweep(comm, L, std::ref(replay));
    replay.done();
    if (o.warn && comm.root()) o.warnings = early_warnings(o);
    write_report(o, formats, L, comm, rows);
    rows.done();
    if (o.warn && comm.root() && !o.json) print_warnings(o.warnings, 20);
    if (comm.root()) report_errors(L);
}

void write_report(const SweepOpts& o, const std::vector<std::optional<Format>>& formats, const sweep::Loaded& L,
                  cluster::Comm& comm, PhaseBar& rows) {
    // Per tensor, every output streams: each series' outcomes are computed again when its rows
    // are written, so memory stays linear in tensors x steps, never tensors x candidates.
    if (o.csv) return write_csv(*L.sweep, L, comm, rows);
    if (o.json) return write_json(*L.sweep, L, o, comm, rows);
    if (comm.root()) write_summary(o, formats, L);
    write_per_tensor(*L.sweep, o, comm, rows);
    if (comm.root()) {
        for (const auto& n : L.skipped) fmt::print("note: skipped {}\n", io::printable(n));
        for (const auto& n : L.notes) fmt::print("note: {}\n", io::printable(n));
    }
}

// The text report up to the per-tensor table (rank 0).
void write_summary(const SweepOpts& o, const std::vector<std::optional<Format>>& formats, const sweep::Loaded& L) {
    const auto& sw = L.sweep;
    const auto& C = sw->candidates();
    const auto& S = sw->series();
    std::size_t grid = 0;
    for (const auto& c : C) grid += c.grid;
    fmt::print("sweep: {} recipes ({} on the delayed grid) over {} tensors", C.size(), grid, S.size());
    if (!L.trace_files.empty()) fmt::print(" from {} trace file(s)", L.trace_files.size());
    if (!L.dumped.empty()) fmt::print("; {} dumped tensors evaluated", L.dumped.size());
    if (!L.errors.empty())
        fmt::print("; {} input(s) could not be read and are left out (each named on stderr)", L.errors.size());
    fmt::print("\n\nRecommendations\n");
    for (Role cls : kClasses)
        if (sw->has_class(cls)) fmt::print("  {}\n", io::printable(sw->recommendation(cls)));
    const bool dumps = sw->has_dumps();
    for (Role cls : kClasses) {
        if (!sw->has_class(cls)) continue;
        const auto order = sw->ranked(cls);
        fmt::print("\n{}: best {} of the grid, then references\n", name(cls), o.top);
        fmt::print("  {:<38} {:>9} {:>12} {:>10} {:>7}", "recipe", "overflow", "worst head", "mean log2h", "margin*");
        if (dumps) fmt::print(" {:>10} {:>10}  {}", "underflow%", "subnorm%", "SQNR dB [bounds]");
        fmt::print("\n");
        auto line = [&](std::size_t c) {
            const auto oc = sw->per_class(c, cls);
            if (C[c].blockwise)  // no trace side: per-block scales come from the data
                fmt::print("  {:<38} {:>9} {:>12} {:>10} {:>7}", C[c].label, "-", "-", "-", "-");
            else
                fmt::print("  {:<38} {:>9} {:>12} {:>10} {:>7}", C[c].label, oc.overflow_steps,
                           fmt::format("{:.4g}", oc.worst_headroom), fmt::format("{:.3f}", oc.mean_log2_headroom()),
                           C[c].grid ? margin_str(sw->min_safe_margin(c, -1, cls)) : "-");
            if (dumps) fmt::print(" {:>10} {:>10}  {}", pct(oc.underflow_share()), pct(oc.subnormal_share()), dbs(oc));
            fmt::print("\n");
        };
        for (std::size_t i = 0; i < order.size() && i < static_cast<std::size_t>(o.top); ++i) line(order[i]);
        fmt::print("  --\n");
        for (const auto& f : formats) {
            const std::size_t te = sw->find(1024, AmaxAlgo::max, 0, f), mg = sw->find(1, AmaxAlgo::most_recent, 0, f);
            if (te != static_cast<std::size_t>(-1)) line(te);
            if (mg != static_cast<std::size_t>(-1)) line(mg);
        }
        for (std::size_t c = 0; c < C.size(); ++c)
            if (!C[c].grid && (!C[c].blockwise || sw->per_class(c, cls).dumped)) line(c);
    }
    fmt::print("\n(margin*: smallest margin 0..4 with no overflowing step for that history/algo/format)\n");
}

Register reg([](CLI::App& root) {
    auto o = std::make_shared<SweepOpts>();
    auto* cmd = root.add_subcommand(
        "sweep",
        "Sweep delayed-scaling recipes (history 1..1024, max/most_recent, margin 0..4) and reference presets over\n"
        "amax traces and tensor dumps (HDF5/safetensors): overflows, headroom, and on dumped steps underflow,\n"
        "subnormal share and SQNR; a ranked recommendation per tensor class (with its caveat when series\n"
        "have one step, or overflow only at their first step, cast with the initial scale 1).\n"
        "Time and memory are linear in tensors x steps; --json and --csv stream.");
    cmd->add_option("INPUT", o->inputs, "Amax traces (CSV, dlfw-inspect logs) and dumps (HDF5, safetensors)")
        ->required();
    cmd->add_option("--format", o->format,
                    "auto (hybrid: E5M2 gradients), all (E4M3 and E5M2 for every tensor), or a format")
        ->capture_default_str();
    cmd->add_option("--tensor", o->tensors, "Only tensors matching this glob (repeatable)");
    cmd->add_option("--top", o->top, "Grid rows shown per class")->capture_default_str();
    cmd->add_flag("!--no-blocks", o->blocks, "Skip the block recipes on dumps");
    cmd->add_flag("--csv", o->csv, "CSV: one row per (class or tensor, recipe)");
    cmd->add_flag("--wide", o->wide,
                  "Name column as wide as the longest name (default: within the terminal's width; a longer name is "
                  "written whole and its row continues on the next line; a file or pipe gets one line per row)");
    cmd->add_flag("--json", o->json, "JSON: recipes, per-class and per-tensor outcomes, recommendations");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress line");
    cmd->add_flag("--warn", o->warn,
                  "Also the early warnings of the same inputs (fp8kit watch's defaults: growth, spikes, "
                  "overflow forecast, shape signals of dumps); text and --json");
    cmd->add_flag("--progress", o->progress,
                  "The progress line on stderr even when it is not a terminal (under mpirun: rank 0's)");
    add_read_flags(cmd);
    add_device_flags(cmd, o->device,
                     "sweep computes on the CPU whatever this says: its per-tensor candidates come from one "
                     "magnitude histogram per dumped tensor (O(bins) each) and its block presets have no GPU "
                     "statistics kernel; cuda still checks that a GPU can be used.");
    cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace fp8kit::cli
