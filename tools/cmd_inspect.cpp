// fp8kit inspect: what an FP8 recipe would do to every tensor of a dump (HDF5, safetensors); the
// analysis and the report are lib's (fp8kit/analysis/inspect_report.hpp).
#include <memory>

#include "command.hpp"
#include "device_flag.hpp"
#include "fp8kit/analysis/inspect_report.hpp"
#include "fp8kit/cluster/inspect.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"
#include "read_flags.hpp"
#include "terminal.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::inspect_command {
namespace {

namespace dp = fp8kit::dump;

struct InspectOpts {
    std::vector<std::string> files, include, exclude, roles;
    std::string recipe = "te-current", format = "auto", steps;
    bool json = false, csv = false, quiet = false, wide = false, progress = false;
    DeviceFlags device;
};

// --include, --exclude, --role and --steps as a dump selection.
dp::Selection selection(const InspectOpts& o) {
    dp::Selection sel;
    sel.include = o.include;
    sel.exclude = o.exclude;
    for (const auto& r : o.roles) {
        const auto eq = r.rfind('=');
        const auto role = eq == std::string::npos ? std::nullopt : dp::parse_role(r.substr(eq + 1));
        if (!role || eq == 0)
            throw UsageError(
                fmt::format("--role '{}': expected PATTERN=ROLE with ROLE activation, weight, gradient "
                            "or optimizer_state",
                            r));
        sel.roles.emplace_back(r.substr(0, eq), *role);
    }
    if (!o.steps.empty()) {
        try {
            sel.steps = dp::parse_steps(o.steps);
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    }
    return sel;
}

void run(const InspectOpts& o) {
    inspect::Options opts;
    try {
        opts.recipe = parse_recipe(o.recipe);
        inspect::check_recipe(opts.recipe);
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--recipe: {}", e.what()));
    }
    if (o.format != "auto") opts.format = require_format(o.format, "--format");
    opts.device = resolve_device(o.device, "inspect");
    const dp::Selection sel = selection(o);
    inspect::Report rep = inspect::open(o.files, sel, cli_read_options());
    if (rep.dump->tensors().empty() && rep.dump->unselected() > 0)
        throw UsageError(inspect::nothing_matched(sel, o.steps, *rep.dump));
    rep.options = opts;
    rep.format_choice = o.format;

    // Under MPI each rank analyses its share of the tensors; rank 0 receives every result in
    // tensor order (lib/src/cluster) and alone writes the report and the progress.
    auto& comm = cluster::world();
    Progress progress(progress_on(comm.root(), o.quiet, o.progress), rep.dump->tensors().size(), "tensors");
    cluster::analyse_all(comm, *rep.dump, opts, [&](std::size_t i, const inspect::Result* r, std::exception_ptr e) {
        inspect::add(rep, i, r, e);
        progress.update(i + 1);
    });
    progress.done();
    if (!comm.root()) return;

    inspect::check_te_files(rep);
    if (o.json)
        inspect::write_json(rep, stdout);
    else if (o.csv)
        inspect::write_csv(rep, stdout);
    else
        inspect::write_text(rep, o.wide ? 0 : output_width(), stdout);
    io::flush_stdout();
    for (const auto& p : rep.errors) fmt::print(stderr, "fp8kit: error: {}\n", io::printable(p.describe()));
    if (!rep.errors.empty()) exit_status() = 1;
}

Register reg([](CLI::App& root) {
    // Owned by the callback (so by the app): the options bind to its members.
    auto o = std::make_shared<InspectOpts>();
    auto* cmd = root.add_subcommand(
        "inspect",
        "What FP8 would do to the tensors of a dump: per tensor and step, amax, scale, overflow,\n"
        "underflow, subnormal share and SQNR under a scaling recipe.\n"
        "Reads HDF5 (any group layout; float64/32/16, bfloat16 as uint16 or opaque with a 'dtype'\n"
        "attribute or as h5py saves ml_dtypes.bfloat16, FP8 as uint8/opaque with a 'dtype' attribute)\n"
        "and safetensors, and TransformerEngine DumpTensors .pt files (torch.save; read without running\n"
        "any pickle: both entries are listed, and TE's FP8 codes are compared with fp8kit's reference).\n"
        "Step and role come from\n"
        "'step'/'role' attributes (safetensors: __metadata__ \"role:NAME\"), --role, or are guessed from\n"
        "names, file and folder names (shown with *; biases and norm parameters count as weights).\n"
        "Only regular files are read. Names fit the terminal (layer index and tail kept; --wide: whole).\n"
        "Exit status: 0 when every input was analysed, 1 when some input failed (each failure is\n"
        "named on stderr; the others are still reported), 2 for bad arguments, filters that match\n"
        "nothing, or output that could not be written.");
    cmd->add_option("FILE", o->files, "Dump files or quoted glob patterns ('dumps/*.h5')")->required();
    cmd->add_option("--recipe", o->recipe,
                    "Scaling recipe: a current-scaling preset or a JSON recipe file (default te-current: "
                    "scale = fl32(fmax / amax) per tensor)");
    cmd->add_option("--format", o->format,
                    "auto (the recipe's format per role: e4m3 for activations and weights, e5m2 for "
                    "gradients), or one 8-bit format for every tensor: " +
                        format_choices());
    auto* json = cmd->add_flag("--json", o->json, "Machine-readable output (non-finite numbers as \"inf\"/\"nan\")");
    cmd->add_flag("--csv", o->csv, "Long-form CSV: file,name,step,role,dtype,format,stat,value")->excludes(json);
    // One pattern per occurrence, so patterns never swallow the FILE arguments after them.
    cmd->add_option("--include", o->include, "Only tensors whose name matches this glob pattern (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--exclude", o->exclude, "Skip tensors whose name matches this glob pattern (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--role", o->roles,
                    "PATTERN=ROLE: tensors whose name matches the glob PATTERN have role ROLE (activation, weight, "
                    "gradient, optimizer_state); repeatable, the first match wins, over attributes and guesses")
        ->allow_extra_args(false);
    cmd->add_option("--steps", o->steps, "Only these steps, e.g. 0-100,200,300-");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
    cmd->add_flag("--progress", o->progress,
                  "The progress bar on stderr even when it is not a terminal (under mpirun: rank 0's)");
    add_read_flags(cmd);
    add_device_flags(cmd, o->device,
                     "cuda: the statistics of tensors of f32, f16 or bf16 run on the GPU (a copy and one "
                     "kernel pass each), per-tensor casts and block recipes alike (NVFP4, MX, 128 x 128); "
                     "amax, reading and tensors streamed in chunks stay on the CPU.");
    cmd->add_flag("--wide", o->wide,
                  "Name column as wide as the longest name (default: within the terminal's width; a longer name is "
                  "written whole and its row continues on the next line; a file or pipe gets one line per row)");
    cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace fp8kit::cli::inspect_command
