// fp8kit replay: what a scaling recipe would have done, step by step, on a run's amax trace.
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "fp8kit/io/json_number.hpp"
#include "command.hpp"
#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/io/trace.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/analysis/trace_input.hpp"
#include "fp8kit/warn/trend.hpp"
#include "read_flags.hpp"
#include "recipe_args.hpp"
#include "terminal.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::replay_command {
namespace {

using io::csv_field;

struct ReplayOpts {
    std::string trace, recipe = "te-delayed", algo, format = "auto";
    std::optional<int> history, margin;
    std::vector<std::string> tensors;
    bool csv = false, json = false, wide = false, warn = false, stats = false;
};

// --stats: every statistic of TE's statistics logs, as lib reads and combines them (te_debug.hpp).
void run_stats(const ReplayOpts& o) {
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    if (o.warn) throw UsageError("--stats prints the statistics; --warn replays amax: choose one");
    te::RunStats r;
    try {
        r = te::read_run_stats(o.trace);
    } catch (const std::runtime_error& e) {
        throw trace::TraceError(e.what());
    }
    te::keep_series(r, o.tensors);
    if (o.json) {
        fmt::print("{}\n", te::stats_json(r).dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
        return;
    }
    if (o.csv) {
        for (const auto& n : r.skipped)
            fmt::print(stderr, "fp8kit replay: note: skipped {}\n", io::printable(n.describe()));
        fmt::print("{}", te::stats_csv(r));
        return;
    }
    fmt::print("TransformerEngine statistics: {} files, {} series\n\n", r.files.size(), r.series.size());
    std::size_t w = 4;
    for (const auto& s : r.series) w = std::max(w, io::printable(s.name).size());
    if (!o.wide && output_width())
        w = std::min(w, std::max<std::size_t>(24, output_width() > 72 ? output_width() - 72 : 0));
    fmt::print("{:<{}}  {:<8}  {:>5}  {:>6}  {:>10}  {:>14}  {:>14}  {:>10}\n", "name", w, "combine", "rank", "steps",
               "last step", "last value", "max", "unreadable");
    for (const auto& s : r.series) {
        std::size_t bad = 0;
        double mx = -INFINITY;
        for (std::size_t k = 0; k < s.steps.size(); ++k) {
            if (!s.readable(k)) ++bad;
            mx = std::max(mx, s.values[k]);
        }
        fmt::print("{}  {:<8}  {:>5}  {:>6}  {:>10}  {:>14.6g}  {:>14.6g}  {:>10}\n", io::name_cell(s.name, w, 0),
                   te::name(s.rank ? te::Combine::none : te::combine_of(s.parts.stat)),
                   s.rank ? std::to_string(*s.rank) : "all " + std::to_string(s.ranks), s.steps.size(),
                   s.steps.empty() ? 0 : s.steps.back(), s.values.empty() ? NAN : s.values.back(), mx, bad);
    }
    fmt::print(
        "\nranks combined by max, min or numel-weighted mean where the statistic allows it; sums, counts and "
        "derived statistics stay per rank (docs/replay.md); --json or --csv for every step\n");
    for (const auto& n : r.skipped) fmt::print("note: skipped {}\n", io::printable(n.describe()));
}

nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp

void run(const ReplayOpts& o) {
    if (o.stats) return run_stats(o);
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    RecipeSpec r = recipe_with_overrides(o.recipe, o.history, o.algo, o.margin);
    const auto forced = parse_format_choice(o.format);
    try {
        replay::check_recipe(r);  // before reading: a dump can be large
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--recipe {}: {}", o.recipe, e.what()));
    }
    const auto trace = trace::load_trace(o.trace, o.tensors, cli_read_options());
    for (const auto& n : trace.notes) fmt::print(stderr, "fp8kit replay: note: {}\n", io::printable(n));
    std::vector<replay::SeriesResult> res;
    for (const auto& s : trace.series) {
        try {
            res.push_back(replay::replay_series(r, s, forced));
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--recipe {}: {}", o.recipe, e.what()));
        }
    }
    // --warn: the early-warning trend signals of the same trace under the same recipe
    // (docs/early-warning.md; fp8kit watch has them all).
    std::vector<warn::Warning> warnings;
    if (o.warn) {
        warn::TrendConfig c;
        if (r.kind != RecipeKind::current) c.recipe = r;
        c.format = forced;
        warn::Watcher w(c, o.trace);
        warn::watch_trace(w, trace);
        warnings = w.warnings();
    }
    if (o.csv) {
        for (const auto& n : trace.skipped)
            fmt::print(stderr, "fp8kit replay: note: skipped {}\n", io::printable(n.describe()));
        std::printf("step,tensor,amax,scale,headroom,overflow\n");
        for (const auto& s : res)
            for (std::size_t i = 0; i < s.steps.size(); ++i)
                fmt::print("{},{},{:.9g},{:.9g},{:.9g},{}\n", s.steps[i], csv_field(s.tensor),
                           static_cast<double>(s.amax[i]), static_cast<double>(s.scale[i]),
                           static_cast<double>(s.headroom[i]), s.overflow[i] ? 1 : 0);
        return;
    }
    if (o.json) {
        nlohmann::json j;
        j["trace"] = o.trace;
        j["recipe"] = to_json(r);
        j["skipped"] = trace.skipped;
        j["tensors"] = nlohmann::json::array();
        for (const auto& s : res) {
            nlohmann::json t;
            t["tensor"] = s.tensor;
            t["class"] = std::string(name(s.role));
            t["format"] = std::string(name(s.format));
            t["steps"] = s.steps;
            auto& a = t["amax"] = nlohmann::json::array();
            auto& sc = t["scale"] = nlohmann::json::array();
            auto& h = t["headroom"] = nlohmann::json::array();
            for (std::size_t i = 0; i < s.steps.size(); ++i) {
                a.push_back(num(s.amax[i]));
                sc.push_back(num(s.scale[i]));
                h.push_back(num(s.headroom[i]));
            }
            t["overflow"] = s.overflow;
            t["overflow_steps"] = s.overflow_steps;
            t["worst_headroom"] = num(s.worst_headroom);
            t["worst_step"] = s.worst_step;
            j["tensors"].push_back(std::move(t));
        }
        if (o.warn) {
            auto& wj = j["warnings"] = nlohmann::json::array();
            for (const auto& w : warnings) wj.push_back(warn::to_json(w));
        }
        fmt::print("{}\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
        return;
    }
    std::printf("%s\n", describe_recipe(r, forced).c_str());
    fmt::print("trace {}: {} tensors\n\n", io::printable(o.trace), res.size());
    // The name column: as wide as the longest name, within the terminal (the rest takes 64).
    const std::size_t width = o.wide ? 0 : output_width();
    std::size_t w = 6;
    for (const auto& s : res) w = std::max(w, io::printable(s.tensor).size());
    if (width) w = std::min(w, std::max<std::size_t>(24, width > 64 ? width - 64 : 0));
    std::printf("%-*s  %-10s  %-6s  %6s  %9s  %-22s\n", static_cast<int>(w), "tensor", "class", "format", "steps",
                "overflow", "worst headroom (step)");
    std::size_t total = 0, bad = 0;
    for (const auto& s : res) {
        const std::string worst = s.worst_step < 0 ? "-" : fmt::format("{:.4g} ({})", s.worst_headroom, s.worst_step);
        std::printf("%s  %-10s  %-6s  %6zu  %9zu  %-22s\n",
                    io::name_cell(s.tensor.empty() ? "(unnamed)" : s.tensor, w, 0).c_str(),
                    std::string(name(s.role)).c_str(), std::string(name(s.format)).c_str(), s.steps.size(),
                    s.overflow_steps, worst.c_str());
        total += s.overflow_steps;
        bad += s.overflow_steps > 0;
    }
    std::printf(
        "\n%zu overflowing steps in %zu of %zu tensors (headroom = amax*scale/max; > 1 overflows "
        "once the scaled amax rounds past max)\n",
        total, bad, res.size());
    for (const auto& n : trace.skipped) fmt::print("note: skipped {}\n", io::printable(n.describe()));
    if (o.warn) {
        fmt::print("\n{} early warning(s) (docs/early-warning.md){}\n", warnings.size(), warnings.empty() ? "" : ":");
        for (std::size_t i = 0; i < warnings.size(); ++i) fmt::print("{}. {}", i + 1, warn::to_text(warnings[i]));
    }
}

Register reg([](CLI::App& root) {
    auto o = std::make_shared<ReplayOpts>();
    auto* cmd = root.add_subcommand(
        "replay",
        "Replay an amax trace (CSV step,tensor,amax, an nvidia-dlfw-inspect log, or a dump's amax per dumped\n"
        "step) through a scaling recipe:\n"
        "the scale each step would have been cast with, its headroom amax*scale/max, and overflows.");
    cmd->add_option("TRACE", o->trace,
                    "Amax trace: CSV with step,amax[,tensor] columns, a dlfw-inspect log, or an HDF5/safetensors dump")
        ->required();
    cmd->add_option("--recipe", o->recipe, "Preset (" + join_presets() + ") or a recipe JSON file")
        ->capture_default_str();
    cmd->add_option("--history", o->history, "Delayed scaling: amax history length L (>= 1)");
    cmd->add_option("--algo", o->algo, "Delayed scaling: max or most_recent");
    cmd->add_option("--margin", o->margin, "Scale divided by 2^margin (delayed, msamp), 0..64");
    cmd->add_option("--format", o->format,
                    "e4m3, e5m2, ... or auto: the recipe's format per class (hybrid: E5M2 for gradients)")
        ->capture_default_str();
    cmd->add_option("--tensor", o->tensors, "Only tensors matching this glob (repeatable)");
    cmd->add_flag("--csv", o->csv, "CSV: step,tensor,amax,scale,headroom,overflow (scale as %.9g)");
    cmd->add_flag("--json", o->json, "JSON: every series with its scales");
    cmd->add_flag("--stats", o->stats,
                  "Instead of replaying: every statistic of TransformerEngine's statistics logs (TRACE: a log, the "
                  "nvdlfw_inspect_statistics_logs folder or the log_dir), ranks combined where the statistic allows "
                  "(table, --csv or --json; --tensor filters the names)");
    cmd->add_flag("--warn", o->warn,
                  "Also the early warnings of the trace (growth, spikes, overflow forecast: fp8kit watch)");
    add_read_flags(cmd);
    cmd->add_flag("--wide", o->wide,
                  "Name column as wide as the longest name (default: within the terminal's width; a longer name is "
                  "written whole and its row continues on the next line; a file or pipe gets one line per row)");
    cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace fp8kit::cli::replay_command
