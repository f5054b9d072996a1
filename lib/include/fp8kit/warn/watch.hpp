// `fp8kit watch` and fp8kit.watch: traces (trend signals) and dumps (their amax per dumped step as
// a trace, plus the shape signals) read, analysed and ranked into one report.
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/warn/shape.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {

struct WatchInputs {
    std::vector<std::string> files;    // traces (CSV, dlfw-inspect logs, TE stats folders) and dumps
    std::vector<std::string> tensors;  // globs on series names (all when empty)
    TrendConfig trend;
    ShapeConfig shape;
    bool shapes = true;  // shape signals for dump files
    dump::ReadOptions read;
    // A CSV of the run's gradient norms (columns step, grad_norm): the run-level verdict
    // (warn/grad_norm.hpp), a "grad-norm-growth" warning. Empty: none.
    std::string grad_norm;
};

struct TensorSummary {
    std::string file, tensor;
    std::uint64_t points = 0, spikes = 0;
    double run_slope_per_k = 0, recent_slope_per_k = 0;
    std::uint64_t spikes_after_warmup = 0;
    std::int64_t steps_after_warmup = 0;  // last step - warm-up end (0 when the run ends in warm-up)
};

// Risk score (docs/early-warning.md, "Risk score"): per signal s a value v and a reference r, the
// signal's score v / r (for the gradient-to-noise ratio r / v: lower is riskier); a tensor's
// score is the largest of its signals', the run's the largest of its tensors'. The references
// are placeholders until a divergence benchmark fits them: the report says `calibrated: false`
// and gives no verdict.
struct RiskConfig {
    double spike_density = 10;               // spikes per 1000 steps after warm-up
    double grad_ratio = 1.7320508075688772;  // ||G|| / wgrad noise (the grad-noise threshold, sqrt 3)
    double kurtosis = 1000;                  // Pearson kurtosis (the kurtosis warning's threshold)
    double kurtosis_trend = 10;              // log2 of kurtosis per 1000 steps between dumped steps
    double scale_spread_rate = 2;            // change of the block scales' log2 std per 1000 steps
};
struct RiskSignal {
    std::string signal, file, tensor;
    double value = 0, reference = 0, score = 0;
    std::int64_t step = -1;  // the (last) step the value describes
};
struct RiskReport {
    std::vector<RiskSignal> signals;  // every signal of every tensor
    double run_score = 0;
    std::string run_signal, run_tensor;  // the signal and tensor that set it
    nlohmann::json to_json() const;
};
// The signals from a report's trends (spike density after warm-up), dumped layers (gradient
// norm against the wgrad quantisation noise, the smallest ratio over recipes and roundings) and
// dumped tensors (kurtosis at its last dumped step, and between its first and last dumped steps
// the trend of log2 kurtosis and the change of the block scales' log2 std, per 1000 steps; a
// dumped tensor's name is taken without its step_NNNNNN/ component).
RiskReport risk(const struct WatchReport& r, const RiskConfig& c = {});

struct WatchReport {
    std::vector<Warning> warnings;       // ranked
    std::vector<TensorSummary> tensors;  // every series, in input order
    std::vector<ShapeStats> shapes;
    std::vector<SwigluAlignment> swiglu;
    std::vector<LayerGradient> gradients;
    std::vector<Bf16Choice> bf16;
    std::vector<NormBias> norms;
    RiskReport risk;  // risk(*this) once the rest is filled
    // Datasets of the dumps skipped on purpose (stored outside the file named, ...).
    std::vector<dump::Problem> skipped;
    // {"warnings", "tensors", "shapes", "swiglu", "gradients", "bf16_layers", "norm_weights", "risk",
    //  "skipped"}
    nlohmann::json to_json() const;
};

// Bad input throws trace::TraceError or dump::DumpError naming the file; a bad setting
// std::invalid_argument naming it.
WatchReport watch_files(const WatchInputs& in);
// The text of `fp8kit watch`: the counts, the skipped datasets, the first `most` top-level
// warnings numbered (all when 0), the info section folded by signal and reason, the BF16 layer
// choices.
void write_text(const WatchReport& rep, std::size_t most, std::FILE* out);
// `fp8kit watch --json`: to_json() with the files as given ("files"); `--csv`: csv_header(), then
// one row per warning, ranked.
void write_json(const WatchReport& rep, const std::vector<std::string>& files, std::FILE* out);
void write_csv(const WatchReport& rep, std::FILE* out);

}  // namespace fp8kit::warn

namespace fp8kit::warn {

// Settings by the CLI's option names (underscores for dashes): window, growth, growth_z,
// growth_min_window, growth_gap, growth_top, warmup, spike_k,
// spike_window, horizon, forecast_probability, fixed_calibration, outlier_k, kurtosis_max,
// swiglu_cos, grad_recipes (list, or [] for none), grad_ratio, bf16_fraction, norm_recipe (or "none"),
// norm_bias_max, recipe (preset/file, or null: no forecast), format ("auto" or a format),
// fixed_recipe, block_recipe (or "none"), tensors (list of globs), shapes (bool). Unknown keys
// and bad values throw std::invalid_argument naming the key. Python's fp8kit.watch uses it.
void apply_options(WatchInputs& in, const nlohmann::json& options);
// The defaults of the CLI and Python: te-current, mxfp8 and nvfp4 for the wgrad GEMM, mxfp8 for norm weights.
GradientConfig default_gradient_config();
// std::invalid_argument naming the setting when one is out of range.
void check(const GradientConfig& g);

}  // namespace fp8kit::warn
