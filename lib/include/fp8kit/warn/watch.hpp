// `fp8kit watch` and fp8kit.watch: traces (trend signals) and dumps (their amax per dumped step as
// a trace, plus the shape signals) read, analysed and ranked into one report.
#pragma once

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
    bool shapes = true;                // shape signals for dump files
    dump::ReadOptions read;
};

struct TensorSummary {
    std::string file, tensor;
    std::uint64_t points = 0, spikes = 0;
    double run_slope_per_k = 0, recent_slope_per_k = 0;
};

struct WatchReport {
    std::vector<Warning> warnings;        // ranked
    std::vector<TensorSummary> tensors;   // every series, in input order
    std::vector<ShapeStats> shapes;
    std::vector<SwigluAlignment> swiglu;
    std::vector<LayerGradient> gradients;
    std::vector<Bf16Choice> bf16;
    std::vector<NormBias> norms;
    // {"warnings", "tensors", "shapes", "swiglu", "gradients", "bf16_layers", "norm_weights"}
    nlohmann::json to_json() const;
};

// Bad input throws trace::TraceError or dump::DumpError naming the file; a bad setting
// std::invalid_argument naming it.
WatchReport watch_files(const WatchInputs& in);

}  // namespace fp8kit::warn

namespace fp8kit::warn {

// Settings by the CLI's option names (underscores for dashes): window, growth, spike_k,
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
