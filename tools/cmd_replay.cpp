// fp8kit replay: what a scaling recipe would have done, step by step, on a run's amax trace.
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/analysis/replay_report.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/io/trace.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/analysis/trace_input.hpp"
#include "read_flags.hpp"
#include "recipe_args.hpp"
#include "terminal.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::replay_command {
namespace {

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
    te::write_stats_text(r, o.wide ? 0 : output_width(), stdout);
}

void run(const ReplayOpts& o) {
    if (o.stats) return run_stats(o);
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    replay::ReportOptions ro;
    ro.trace = o.trace;
    ro.recipe = recipe_with_overrides(o.recipe, o.history, o.algo, o.margin);
    ro.forced = parse_format_choice(o.format);
    auto bad_recipe = [&](const std::invalid_argument& e) { return UsageError(fmt::format("--recipe: {}", e.what())); };
    try {
        replay::check_recipe(ro.recipe);  // before reading: a dump can be large
    } catch (const std::invalid_argument& e) {
        throw bad_recipe(e);
    }
    const auto trace = trace::load_trace(o.trace, o.tensors, cli_read_options());
    for (const auto& n : trace.notes) fmt::print(stderr, "fp8kit replay: note: {}\n", io::printable(n));
    std::vector<replay::SeriesResult> res;
    try {
        res = replay::replay_trace(ro.recipe, trace, ro.forced);
    } catch (const std::invalid_argument& e) {
        throw bad_recipe(e);
    }
    std::vector<warn::Warning> warnings;
    if (o.warn) {
        warnings = replay::trace_warnings(ro.recipe, ro.forced, o.trace, trace);
        ro.warnings = &warnings;
    }
    if (o.csv) {
        for (const auto& n : trace.skipped)
            fmt::print(stderr, "fp8kit replay: note: skipped {}\n", io::printable(n.describe()));
        return replay::write_csv(res, stdout);
    }
    if (o.json) return replay::write_json(res, trace, ro, stdout);
    ro.width = o.wide ? 0 : output_width();
    replay::write_text(res, trace, ro, stdout);
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
