// Shape signals of one tensor and of a SwiGLU gate/up pair (docs/early-warning.md, "shapes").
#include <algorithm>
#include <array>
#include <cmath>

#include "fp8kit/io/json_number.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "fp8kit/warn/shape.hpp"

namespace fp8kit::warn {

nlohmann::json ShapeStats::to_json() const {
    nlohmann::json j = {{"file", file},
                        {"tensor", tensor},
                        {"step", step},
                        {"rows", rows},
                        {"channels", channels},
                        {"median_channel_amax", median_channel_amax},
                        {"max_channel_amax", max_channel_amax},
                        {"outlier_channels", outlier_channels},
                        {"kurtosis", kurtosis}};
    if (has_blocks)
        j["blocks"] = {{"count", blocks},
                       {"underflow", underflow},
                       {"saturation", saturation},
                       {"scale_log2_std", scale_log2_std},
                       {"scale_log2_range", scale_log2_range},
                       {"scale_log2_hist", scale_log2_hist}};
    j["channel_amax"] = channel_amax;
    io::nonfinite_to_words(j);  // an Inf channel amax is "inf", as in every report
    return j;
}

std::string swiglu_up_name(const std::string& gate) {
    // Hugging Face (gate_proj/up_proj), Meta Llama (w1/w3), and a bare "gate"/"up" component.
    static const std::pair<const char*, const char*> pairs[] = {
        {"gate_proj", "up_proj"}, {".w1.", ".w3."}, {"/w1/", "/w3/"}, {".gate.", ".up."}, {"/gate/", "/up/"}};
    for (const auto& [g, u] : pairs) {
        const auto at = gate.find(g);
        if (at != std::string::npos)
            return gate.substr(0, at) + u + gate.substr(at + std::char_traits<char>::length(g));
    }
    return "";
}

ShapeStats shape_of(const float* x, std::uint64_t rows, std::uint64_t cols, Role role, const ShapeConfig& cfg) {
    ShapeStats s;
    s.rows = rows;
    s.channels = cols;
    const std::uint64_t n = rows * cols;
    // 1. Per-channel amax (NaN ignored), its median and the channels past outlier_k x median.
    std::vector<double> ch(cols, 0.0);
    double sum = 0;
    std::uint64_t finite = 0;
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; ++c) {
            const double v = x[r * cols + c];
            if (std::isnan(v)) continue;
            ch[c] = std::max(ch[c], std::fabs(v));
            if (std::isfinite(v)) {
                sum += v;
                ++finite;
            }
        }
    std::vector<double> tmp = ch;
    std::nth_element(tmp.begin(), tmp.begin() + cols / 2, tmp.end());
    s.median_channel_amax = cols ? tmp[cols / 2] : 0;
    s.max_channel_amax = cols ? *std::max_element(ch.begin(), ch.end()) : 0;
    s.channel_amax = ch;
    if (cols >= cfg.min_channels && s.median_channel_amax > 0)
        for (std::uint64_t c = 0; c < cols; ++c)
            if (ch[c] > cfg.outlier_k * s.median_channel_amax) s.outlier_channels.push_back(c);
    // 2. Pearson kurtosis m4 / m2^2 over the finite elements (binary64, two passes, element order).
    const double mean = finite ? sum / static_cast<double>(finite) : 0;
    double m2 = 0, m4 = 0;
    for (std::uint64_t i = 0; i < n; ++i) {
        const double v = x[i];
        if (!std::isfinite(v)) continue;
        const double d = (v - mean) * (v - mean);
        m2 += d;
        m4 += d * d;
    }
    s.kurtosis = m2 > 0 ? (m4 / static_cast<double>(finite)) / ((m2 / finite) * (m2 / finite)) : NAN;
    // 3. Block statistics under the block recipe: compute_block_stats, its definition (stats.hpp).
    if (cfg.block_recipe && n) {
        const BlockRecipe br = block_recipe(*cfg.block_recipe, recipe_slot(role), cols);
        // TE's RHT (the column-wise copy) needs whole groups of 16 rows; without them the tensor
        // gets no "blocks" entry (stated in docs/early-warning.md), not an error mid-watch.
        if (br.columnwise_rht && rows % 16 != 0) return s;
        const BlockStats b = compute_block_stats(x, Wide::f32, rows, cols, br);
        s.has_blocks = true;
        s.blocks = b.blocks;
        s.underflow = static_cast<double>(b.total.underflow) / static_cast<double>(n);
        s.saturation = static_cast<double>(b.total.overflow) / static_cast<double>(n);
        // The spread is over blocks holding data: a block of zeros gets the rule's scale for a zero
        // amax (MX: 2^-127), which would say nothing about the data's range, so blocks with exactly
        // that scale_inv (recipes.hpp's rule_scale of amax 0) are left out.
        const float zero_inv = rule_scale(br.rule, br.format, 0.0f, br.epsilon, br.pow2, br.value_for_inf, 0).scale_inv;
        // The histogram: compute_block_stats' exponent bins, less the blocks of zeros.
        std::array<std::uint64_t, kExpHistBins> hist = b.scale_inv_exp_hist;
        for (float si : b.scale_inv)
            if (si == zero_inv && si > 0 && std::isfinite(si))
                --hist[exp_hist_bin(static_cast<int>(std::floor(std::log2(si))))];
        for (std::size_t k = 0; k < kExpHistBins; ++k)
            if (hist[k] && k != kExpHistZeroBin && k != kExpHistNonfiniteBin)
                s.scale_log2_hist.emplace_back(exp_hist_exponent(k), hist[k]);
        double a = 0, a2 = 0, lo = INFINITY, hi = -INFINITY;
        std::uint64_t k = 0;
        for (float si : b.scale_inv) {
            if (!(si > 0) || !std::isfinite(si) || si == zero_inv) continue;
            const double l = std::log2(static_cast<double>(si));
            a += l;
            a2 += l * l;
            lo = std::min(lo, l);
            hi = std::max(hi, l);
            ++k;
        }
        if (k) {
            const double m = a / k;
            s.scale_log2_std = std::sqrt(std::max(0.0, a2 / k - m * m));
            s.scale_log2_range = hi - lo;
        }
    }
    return s;
}

SwigluAlignment swiglu_alignment(const float* g, const float* u, std::uint64_t rows, std::uint64_t cols,
                                 double cos_min) {
    SwigluAlignment a;
    a.cos.resize(rows);
    for (std::uint64_t r = 0; r < rows; ++r) {
        double gg = 0, uu = 0, gu = 0;
        for (std::uint64_t c = 0; c < cols; ++c) {
            const double x = g[r * cols + c], y = u[r * cols + c];
            gg += x * x;
            uu += y * y;
            gu += x * y;
        }
        a.cos[r] = gg > 0 && uu > 0 ? gu / std::sqrt(gg * uu) : 0;
        if (std::fabs(a.cos[r]) >= cos_min) a.aligned.push_back(r);
    }
    std::stable_sort(a.aligned.begin(), a.aligned.end(),
                     [&](std::uint64_t x, std::uint64_t y) { return std::fabs(a.cos[x]) > std::fabs(a.cos[y]); });
    return a;
}

}  // namespace fp8kit::warn
