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
    std::string fixed = "te-current";
    for (const auto& [k, v] : o.items()) {
        try {
            if (k == "window") in.trend.window = v.get<int>();
            else if (k == "growth") in.trend.growth_per_k = v.get<double>();
            else if (k == "spike_k") in.trend.spike_k = v.get<double>();
            else if (k == "spike_window") in.trend.spike_window = v.get<int>();
            else if (k == "horizon") in.trend.forecast_horizon = v.get<double>();
            else if (k == "forecast_probability") in.trend.forecast_probability = v.get<double>();
            else if (k == "fixed_calibration") in.trend.fixed_calibration = v.get<int>();
            else if (k == "outlier_k") in.shape.outlier_k = v.get<double>();
            else if (k == "kurtosis_max") in.shape.kurtosis_max = v.get<double>();
            else if (k == "swiglu_cos") in.shape.swiglu_cos = v.get<double>();
            else if (k == "shapes") in.shapes = v.get<bool>();
            else if (k == "tensors") in.tensors = v.get<std::vector<std::string>>();
            else if (k == "recipe") {
                if (v.is_null()) in.trend.recipe.reset();
                else in.trend.recipe = parse_recipe(v.get<std::string>());
            } else if (k == "format") {
                const auto s = v.get<std::string>();
                if (s == "auto") in.trend.format.reset();
                else if (const auto f = parse_format(s)) in.trend.format = *f;
                else throw std::invalid_argument(fmt::format("unknown format '{}'", s));
            } else if (k == "fixed_recipe") fixed = v.get<std::string>();
            else if (k == "block_recipe") {
                const auto s = v.get<std::string>();
                if (s == "none") in.shape.block_recipe.reset();
                else in.shape.block_recipe = parse_recipe(s);
            } else throw std::invalid_argument("unknown setting");
        } catch (const nlohmann::json::exception& e) {
            throw std::invalid_argument(fmt::format("{}: {}", k, e.what()));
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(fmt::format("{}: {}", k, e.what()));
        }
    }
    if (in.trend.fixed_calibration > 0) in.trend.fixed_recipe = parse_recipe(fixed);
}

}  // namespace fp8kit::warn
