// fp8kit watch: early warnings from the trends in amax traces and the shapes in dumps
// (lib/src/warn; docs/early-warning.md). The CLI parses, calls warn::watch_files and prints.
#include <algorithm>
#include <cstdio>
#include <memory>
#include <optional>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/warn/watch.hpp"
#include "read_flags.hpp"
#include "recipe_args.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::watch_command {
namespace {

struct WatchOpts {
    std::vector<std::string> files, tensors;
    std::string grad_norm;
    std::string recipe = "te-delayed", algo, format = "auto", fixed_recipe = "te-current", block_recipe = "mxfp8";
    std::string grad_recipes = "te-current,mxfp8,nvfp4", norm_recipe = "mxfp8";
    std::optional<int> history, margin;
    warn::TrendConfig trend;
    warn::ShapeConfig shape;
    std::size_t top = 20;
    bool csv = false, json = false, no_forecast = false;
};

// A preset or recipe file given to an option other than --recipe: errors name that option.
RecipeSpec named_recipe(const char* option, const std::string& value) {
    try {
        return parse_recipe(value);
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("{}: {}", option, e.what()));
    }
}

void run(WatchOpts& o) {
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    warn::WatchInputs in;
    in.files = o.files;
    in.tensors = o.tensors;
    in.grad_norm = o.grad_norm;
    in.trend = o.trend;
    in.shape = o.shape;
    in.read = cli_read_options();
    in.trend.format = parse_format_choice(o.format);
    if (!o.no_forecast) in.trend.recipe = recipe_with_overrides(o.recipe, o.history, o.algo, o.margin);
    if (in.trend.fixed_calibration > 0) in.trend.fixed_recipe = named_recipe("--fixed-recipe", o.fixed_recipe);
    if (o.block_recipe != "none") in.shape.block_recipe = named_recipe("--block-recipe", o.block_recipe);
    in.shape.grad.recipes.clear();
    if (o.grad_recipes != "none") {
        std::size_t at = 0;
        while (at <= o.grad_recipes.size()) {
            const auto comma = std::min(o.grad_recipes.find(',', at), o.grad_recipes.size());
            in.shape.grad.recipes.push_back(named_recipe("--grad-recipes", o.grad_recipes.substr(at, comma - at)));
            at = comma + 1;
        }
    }
    in.shape.grad.norm_recipe.reset();
    if (o.norm_recipe != "none") in.shape.grad.norm_recipe = named_recipe("--norm-recipe", o.norm_recipe);
    warn::WatchReport rep;
    try {
        warn::check(in.shape.grad);
        rep = warn::watch_files(in);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (o.json)
        warn::write_json(rep, o.files, stdout);
    else if (o.csv)
        warn::write_csv(rep, stdout);
    else
        warn::write_text(rep, o.top, stdout);
}

Register reg([](CLI::App& root) {
    auto o = std::make_shared<WatchOpts>();
    auto* cmd = root.add_subcommand(
        "watch",
        "Early warnings from amax traces and dumps (docs/early-warning.md): growth rates, spikes, overflow\n"
        "observed and forecast under a delayed-scaling recipe, fixed-scale levels, and for dumps per-channel\n"
        "outliers, kurtosis, block statistics and SwiGLU gate/up alignment. Ranked; text, --json or --csv.");
    cmd->add_option("FILES", o->files, "Amax traces (CSV, dlfw-inspect logs, TE statistics folders) and dumps")
        ->required();
    cmd->add_option("--tensor", o->tensors, "Only series matching this glob (repeatable)");
    cmd->add_option("--grad-norm", o->grad_norm,
                    "CSV of the run's gradient norms (columns step, grad_norm: the monitor's grad_norm.csv): the\n"
                    "run-level verdict, a grad-norm-growth warning when the norm grows as it did before the\n"
                    "divergences of the benchmark (docs/early-warning.md)");
    cmd->add_option("--recipe", o->recipe,
                    "Delayed or windowed recipe for the overflow forecast (" + join_presets() + ")")
        ->capture_default_str();
    cmd->add_option("--history", o->history, "Delayed scaling: amax history length");
    cmd->add_option("--algo", o->algo, "Delayed scaling: max or most_recent");
    cmd->add_option("--margin", o->margin, "Scale divided by 2^margin");
    cmd->add_option("--format", o->format, "Cast format, or auto (the recipe's per class)")->capture_default_str();
    cmd->add_flag("--no-forecast", o->no_forecast, "No overflow or forecast signals (trends only)");
    cmd->add_option("--window", o->trend.window, "Points kept: the longest growth window and the forecast's (even)")
        ->capture_default_str();
    cmd->add_option("--growth", o->trend.growth_per_k, "Growth warning at this many log2 per 1000 steps")
        ->capture_default_str();
    cmd->add_option("--growth-z", o->trend.growth_z,
                    "Growth: slope at least this many standard errors above its baseline")
        ->capture_default_str();
    cmd->add_option("--growth-top", o->trend.growth_top,
                    "Growth is a top-level warning from this slope (no following recipe, after warm-up)")
        ->capture_default_str();
    cmd->add_option("--warmup", o->trend.warmup,
                    "Steps from a tensor's first step whose events are early-training transients (info)")
        ->capture_default_str();
    cmd->add_option("--spike-k", o->trend.spike_k, "Spike: amax > k x running median")->capture_default_str();
    cmd->add_option("--spike-window", o->trend.spike_window, "Spike: points in the running median")
        ->capture_default_str();
    cmd->add_option("--horizon", o->trend.forecast_horizon, "Forecast horizon in steps")->capture_default_str();
    cmd->add_option("--forecast-probability", o->trend.forecast_probability, "Warn at this overflow probability")
        ->capture_default_str();
    cmd->add_option("--fixed-calibration", o->trend.fixed_calibration,
                    "Inference: a fixed scale from the first N points (0: off); levels forecast");
    cmd->add_option("--fixed-recipe", o->fixed_recipe, "Current-scaling recipe whose rule gives the fixed scale")
        ->capture_default_str();
    cmd->add_option("--block-recipe", o->block_recipe, "Block statistics of dumped tensors under this recipe, or none")
        ->capture_default_str();
    cmd->add_option("--outlier-k", o->shape.outlier_k, "Outlier channel: amax > k x median channel amax")
        ->capture_default_str();
    cmd->add_option("--kurtosis-max", o->shape.kurtosis_max, "Warn above this kurtosis")->capture_default_str();
    cmd->add_option("--swiglu-cos", o->shape.swiglu_cos, "Aligned SwiGLU channel: |cos(gate, up)| >= this")
        ->capture_default_str();
    cmd->add_option(
           "--grad-recipes", o->grad_recipes,
           "Recipes (comma-separated, or none) whose wgrad GEMM noise is measured on dumped input/grad_output pairs")
        ->capture_default_str();
    cmd->add_option("--grad-ratio", o->shape.grad.ratio_min,
                    "Warn when ||G|| / wgrad quantisation noise falls below (sqrt 3)")
        ->capture_default_str();
    cmd->add_option("--bf16-fraction", o->shape.grad.bf16_fraction, "Share of linear layers a recipe keeps in BF16")
        ->capture_default_str();
    cmd->add_option("--norm-recipe", o->norm_recipe,
                    "Recipe quantising LayerNorm/RMSNorm weights for their bias, or none")
        ->capture_default_str();
    cmd->add_option("--norm-bias-max", o->shape.grad.norm_bias_max,
                    "Warn when |norm-weight bias| exceeds this fraction")
        ->capture_default_str();
    cmd->add_option("--top", o->top, "Text: show this many warnings (0: all)")->capture_default_str();
    cmd->add_flag("--csv", o->csv, "CSV: one row per warning");
    cmd->add_flag("--json", o->json, "JSON: warnings, per-tensor trends, shapes, SwiGLU alignment");
    add_read_flags(cmd);
    cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace fp8kit::cli::watch_command
