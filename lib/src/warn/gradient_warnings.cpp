// Norm-weight bias (arXiv 2506.20752) and the warnings of the gradient and norm-weight signals.
#include <algorithm>
#include <cmath>
#include <cctype>
#include <string_view>

#include <fmt/format.h>

#include "fp8kit/warn/gradient.hpp"
#include "fp8kit/warn/sources.hpp"

namespace fp8kit::warn {

bool is_norm_weight(const std::string& name) {
    // input_layernorm.weight, post_attention_layernorm/weight, model.norm.weight, ln_f.weight, rms_norm...:
    // the component before a final [./]weight is word characters holding "norm" or starting "ln_"
    // (any case). Scanned by hand, not with std::regex: libstdc++'s matcher recurses once per
    // character and overflowed the stack on a 60 kB dataset name (tests/cli/adversarial.sh).
    auto lower = [](std::string_view v) {
        std::string l(v);
        for (char& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        return l;
    };
    constexpr std::string_view kWeight = "weight";
    if (name.size() < kWeight.size() + 1) return false;
    const std::size_t sep = name.size() - kWeight.size() - 1;
    if (lower(std::string_view(name).substr(sep + 1)) != kWeight || (name[sep] != '.' && name[sep] != '/'))
        return false;
    std::size_t start = sep;
    while (start > 0 && name[start - 1] != '.' && name[start - 1] != '/') --start;
    const std::string_view part = std::string_view(name).substr(start, sep - start);
    for (char c : part)
        if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
    const std::string l = lower(part);
    return l.find("norm") != std::string::npos || l.rfind("ln_", 0) == 0;
}

NormBias norm_bias(const float* w, std::uint64_t n, const RecipeSpec& recipe) {
    NormBias b;
    b.recipe = recipe.name;
    b.numel = n;
    if (n == 0) return b;
    // One row: a norm weight is a vector; the recipe's weight slot blocks it as 1 x n.
    const std::vector<double> q = dequantized(w, 1, n, block_recipe(recipe, recipe_slot(Role::weight), n));
    double d = 0, a = 0, e2 = 0, w2 = 0, s = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        const double x = w[i];
        if (!std::isfinite(x) || !std::isfinite(q[i])) continue;
        d += q[i] - x;
        a += std::fabs(x);
        e2 += (q[i] - x) * (q[i] - x);
        w2 += x * x;
        s += x;
    }
    b.bias = a > 0 ? d / a : 0;
    b.rel_rms = w2 > 0 ? std::sqrt(e2 / w2) : 0;
    b.mean = s / static_cast<double>(n);
    return b;
}

nlohmann::json NormBias::to_json() const {
    return {{"file", file},   {"tensor", tensor}, {"step", step},       {"recipe", recipe},
            {"numel", numel}, {"bias", bias},     {"rel_rms", rel_rms}, {"mean", mean}};
}

std::vector<Warning> gradient_warnings(const std::vector<LayerGradient>& layers, const GradientConfig& cfg) {
    std::vector<Warning> out;
    for (const auto& L : layers) {
        std::string below;
        double worst = INFINITY;
        nlohmann::json nums = nlohmann::json::array();
        for (const auto& g : L.recipes) {
            if (!g.skipped.empty()) continue;
            for (const auto& [how, r] :
                 {std::pair{"round-to-nearest", g.ratio_rtn()}, std::pair{"stochastic rounding", g.ratio_sr()}}) {
                if (!(r < cfg.ratio_min)) continue;
                below += fmt::format("{}{} with {}: {:.3g}", below.empty() ? "" : "; ", g.recipe, how, r);
                worst = std::min(worst, r);
                nums.push_back({{"recipe", g.recipe}, {"rounding", how}, {"ratio", r}});
            }
        }
        if (below.empty()) continue;
        Warning w;
        w.signal = "grad-noise";
        w.file = L.file;
        w.tensor = L.layer;
        w.step = L.step;
        w.severity = 1 + std::log2(cfg.ratio_min / std::max(worst, 1e-300));
        w.evidence = fmt::format(
            "weight gradient dY^T X over {} tokens: ||G|| = {:.4g}; ||G|| / ||G_q - G|| below sqrt(3) = {:.4g} "
            "under {}",
            L.tokens, L.recipes.empty() ? 0.0 : L.recipes.front().norm, cfg.ratio_min, below);
        w.numbers = {{"below", nums}, {"threshold", cfg.ratio_min}, {"layer", L.to_json()}};
        w.resembles = kCaseGradNoise;
        w.advice =
            "the quantisation noise of this layer's weight gradient exceeds the signal: keep the layer's backward in "
            "BF16 "
            "(or FP8 instead of FP4), or, late in training, switch to higher-precision gradients (the QAF phase of "
            "arXiv 2505.19115)";
        out.push_back(std::move(w));
    }
    return out;
}

std::vector<Warning> norm_warnings(const std::vector<NormBias>& norms, const GradientConfig& cfg) {
    std::vector<Warning> out;
    for (const auto& b : norms) {
        if (!(std::fabs(b.bias) > cfg.norm_bias_max)) continue;
        Warning w;
        w.signal = "norm-weight-bias";
        w.file = b.file;
        w.tensor = b.tensor;
        w.step = b.step;
        w.severity = 1 + std::log2(std::fabs(b.bias) / cfg.norm_bias_max);
        w.evidence = fmt::format(
            "quantised under {}, the {} norm weights (mean {:.4g}) shift by {:+.3g}% on average "
            "(sum(Q(w) - w) / sum|w|; threshold {:g}%), relative RMS error {:.3g}%",
            b.recipe, b.numel, b.mean, 100 * b.bias, 100 * cfg.norm_bias_max, 100 * b.rel_rms);
        w.numbers = b.to_json();
        w.resembles = kCaseNormBias;
        w.advice =
            "keep LayerNorm/RMSNorm weights out of the low-precision cast (BF16/FP32): every activation of the layer "
            "is "
            "multiplied by them, so their rounding bias does not average out";
        out.push_back(std::move(w));
    }
    return out;
}

}  // namespace fp8kit::warn
