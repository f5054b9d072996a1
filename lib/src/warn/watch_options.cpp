// WatchInputs from a JSON object of settings (fp8kit.watch and fp8kit.Watcher in Python).
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/warn/watch.hpp"

namespace fp8kit::warn {

void apply_options(WatchInputs& in, const nlohmann::json& o) {
    if (!o.is_object()) throw std::invalid_argument("options: expected a dict");
    // Defaults as the CLI's: te-delayed forecast, te-current fixed scales, MXFP8 block statistics.
    in.trend.recipe = parse_recipe("te-delayed");
    in.shape.block_recipe = parse_recipe("mxfp8");
    in.shape.grad = default_gradient_config();
    std::string fixed = "te-current";
    for (const auto& [k, v] : o.items()) {
        try {
            if (k == "window")
                in.trend.window = v.get<int>();
            else if (k == "growth")
                in.trend.growth_per_k = v.get<double>();
            else if (k == "growth_z")
                in.trend.growth_z = v.get<double>();
            else if (k == "growth_min_window")
                in.trend.growth_min_window = v.get<int>();
            else if (k == "growth_gap")
                in.trend.growth_gap = v.get<int>();
            else if (k == "growth_top")
                in.trend.growth_top = v.get<double>();
            else if (k == "warmup")
                in.trend.warmup = v.get<std::int64_t>();
            else if (k == "spike_k")
                in.trend.spike_k = v.get<double>();
            else if (k == "spike_window")
                in.trend.spike_window = v.get<int>();
            else if (k == "horizon")
                in.trend.forecast_horizon = v.get<double>();
            else if (k == "forecast_probability")
                in.trend.forecast_probability = v.get<double>();
            else if (k == "fixed_calibration")
                in.trend.fixed_calibration = v.get<int>();
            else if (k == "outlier_k")
                in.shape.outlier_k = v.get<double>();
            else if (k == "kurtosis_max")
                in.shape.kurtosis_max = v.get<double>();
            else if (k == "swiglu_cos")
                in.shape.swiglu_cos = v.get<double>();
            else if (k == "shapes")
                in.shapes = v.get<bool>();
            else if (k == "grad_ratio")
                in.shape.grad.ratio_min = v.get<double>();
            else if (k == "bf16_fraction")
                in.shape.grad.bf16_fraction = v.get<double>();
            else if (k == "norm_bias_max")
                in.shape.grad.norm_bias_max = v.get<double>();
            else if (k == "grad_recipes") {
                in.shape.grad.recipes.clear();
                for (const auto& r : v.get<std::vector<std::string>>())
                    in.shape.grad.recipes.push_back(parse_recipe(r));
            } else if (k == "norm_recipe") {
                const auto s = v.get<std::string>();
                if (s == "none")
                    in.shape.grad.norm_recipe.reset();
                else
                    in.shape.grad.norm_recipe = parse_recipe(s);
            } else if (k == "tensors")
                in.tensors = v.get<std::vector<std::string>>();
            else if (k == "grad_norm")
                in.grad_norm = v.get<std::string>();
            else if (k == "recipe") {
                if (v.is_null())
                    in.trend.recipe.reset();
                else
                    in.trend.recipe = parse_recipe(v.get<std::string>());
            } else if (k == "format") {
                const auto s = v.get<std::string>();
                if (s == "auto")
                    in.trend.format.reset();
                else if (const auto f = parse_format(s))
                    in.trend.format = *f;
                else
                    throw std::invalid_argument(fmt::format("unknown format '{}'", s));
            } else if (k == "fixed_recipe")
                fixed = v.get<std::string>();
            else if (k == "block_recipe") {
                const auto s = v.get<std::string>();
                if (s == "none")
                    in.shape.block_recipe.reset();
                else
                    in.shape.block_recipe = parse_recipe(s);
            } else
                throw std::invalid_argument("unknown setting");
        } catch (const nlohmann::json::exception& e) {
            throw std::invalid_argument(fmt::format("{}: {}", k, e.what()));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(fmt::format("{}: {}", k, e.what()));
        }
    }
    if (in.trend.fixed_calibration > 0) in.trend.fixed_recipe = parse_recipe(fixed);
    check(in.shape.grad);
}

GradientConfig default_gradient_config() {
    GradientConfig g;
    for (const char* r : {"te-current", "mxfp8", "nvfp4"}) g.recipes.push_back(parse_recipe(r));
    g.norm_recipe = parse_recipe("mxfp8");
    return g;
}

void check(const GradientConfig& g) {
    if (!(g.ratio_min > 0)) throw std::invalid_argument("grad_ratio: must be > 0");
    if (!(g.bf16_fraction >= 0 && g.bf16_fraction <= 1))
        throw std::invalid_argument("bf16_fraction: must be in [0, 1]");
    if (!(g.norm_bias_max >= 0)) throw std::invalid_argument("norm_bias_max: must be >= 0");
    for (const auto& r : g.recipes)
        if (r.kind != RecipeKind::current)
            throw std::invalid_argument(
                "grad_recipes: '" + r.name +
                "' is not a current-scaling or block recipe (the wgrad GEMM casts with this step's amax)");
}

}  // namespace fp8kit::warn
