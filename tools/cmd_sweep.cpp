// fp8kit sweep: a grid of delayed-scaling recipes (and reference presets) over amax traces and
// tensor dumps, with per-class recommendations; the sweep and its report are lib's
// (fp8kit/analysis/sweep_report.hpp), run over MPI ranks by fp8kit/cluster/sweep.hpp.
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "device_flag.hpp"
#include "fp8kit/analysis/sweep_report.hpp"
#include "fp8kit/cluster/sweep.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"
#include "read_flags.hpp"
#include "recipe_args.hpp"
#include "terminal.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::sweep_command {
namespace {

struct SweepOpts {
    std::vector<std::string> inputs, tensors;
    std::string format = "auto";
    bool csv = false, json = false, blocks = true, wide = false, quiet = false, progress = false, warn = false;
    int top = 5;
    DeviceFlags device;
};

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

std::vector<std::optional<Format>> checked_formats(const SweepOpts& o) {
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    if (o.csv && o.warn)
        throw UsageError(
            "--warn and --csv: the CSV is one table of outcomes; `fp8kit watch --csv` gives the warnings as CSV");
    if (o.top < 1) throw UsageError(fmt::format("--top {}: must be at least 1", o.top));
    resolve_device(o.device, "sweep", false);  // checks --device; nothing of sweep's runs on a GPU
    if (o.format == "all") return {Format::e4m3, Format::e5m2};
    return {parse_format_choice(o.format)};
}

void run(const SweepOpts& o) {
    const auto formats = checked_formats(o);
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

    std::vector<warn::Warning> warnings;
    if (o.warn && comm.root()) warnings = sweep::early_warnings(o.inputs, o.tensors, cli_read_options());
    sweep::ReportOptions ro;
    ro.inputs = o.inputs, ro.formats = formats, ro.top = o.top, ro.root = comm.root();
    if (o.warn) ro.warnings = &warnings;
    // Each group of series' rows made by one rank, written by rank 0 in order.
    ro.over = [&](std::size_t n, const sweep::MakeRows& make, const sweep::WriteRows& write) {
        cluster::series_rows(comm, n, make, write, std::ref(rows));
    };
    if (o.csv) {
        sweep::write_csv(L, ro, stdout, stderr);
    } else if (o.json) {
        sweep::write_json(L, ro, stdout);
    } else {
        ro.width = std::stoul(comm.broadcast(std::to_string(o.wide ? 0 : output_width())));  // rank 0's terminal
        sweep::write_text(L, ro, stdout);
    }
    rows.done();
    if (o.warn && comm.root() && !o.json) sweep::write_warnings(warnings, 20, stdout);
    if (!comm.root()) return;
    // Each input that could not be read, one line on stderr as inspect writes it; exit status 1.
    io::flush_stdout();
    for (const auto& p : L.errors) fmt::print(stderr, "fp8kit: error: {}\n", io::printable(p.describe()));
    if (!L.errors.empty()) exit_status() = 1;
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
}  // namespace fp8kit::cli::sweep_command
