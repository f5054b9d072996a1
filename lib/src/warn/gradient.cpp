// The wgrad GEMM under a recipe's quantisation: its error per layer and the gradient-to-noise ratio
// against sqrt(3) (arXiv 2505.19115), and the BF16 layer choice (arXiv 2509.25149).
// docs/early-warning.md, "Gradient and norm-weight signals".
#include <algorithm>
#include "fp8kit/io/json_number.hpp"
#include <cmath>
#include <cctype>
#include <optional>
#include <string_view>
#include <stdexcept>

#include "fp8kit/emu/formats.hpp"
#include "fp8kit/numerics/scale_rules.hpp"
#include "fp8kit/stats/block_quantize.hpp"
#include "fp8kit/warn/gradient.hpp"
#include "fp8kit/warn/sources.hpp"

namespace fp8kit::warn {
namespace {

// decode(code) x scale_inv of its block, binary64 (element_stats.hpp's x^).
std::vector<double> decode_all(const BlockQuantized& q, Format f) {
    std::vector<double> out(q.rows * q.cols);
    for (std::size_t r = 0; r < q.rows; ++r)
        for (std::size_t c = 0; c < q.cols; ++c) {
            const float v =
                numerics::float_of(static_cast<std::uint32_t>(emu::decode(f, emu::Wide::f32, q.codes[r * q.cols + c])));
            out[r * q.cols + c] =
                static_cast<double>(v) * q.scale_inv[(r / q.tile_rows) * q.grid_cols + c / q.tile_cols];
        }
    return out;
}

// ||A B^T - G||_F for A: n x t, B: k x t (row-major), G: n x k.
double frobenius_diff(const std::vector<double>& a, const std::vector<double>& b, const std::vector<double>& g,
                      std::size_t n, std::size_t k, std::size_t t) {
    double s = 0;
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t j = 0; j < k; ++j) {
            double acc = 0;
            for (std::size_t u = 0; u < t; ++u) acc += a[i * t + u] * b[j * t + u];
            const double d = acc - g[i * k + j];
            s += d * d;
        }
    return std::sqrt(s);
}

}  // namespace

std::vector<double> dequantized(const float* x, std::uint64_t rows, std::uint64_t cols, const BlockRecipe& br) {
    return decode_all(quantize_blocks(x, Wide::f32, rows, cols, br, 0), br.format);
}

std::vector<double> wgrad_operand(const float* x, std::uint64_t tokens, std::uint64_t features, const BlockRecipe& br,
                                  std::uint64_t seed) {
    if (br.columnwise_rht) {
        check_block_input(br, tokens, features);
        return decode_all(quantize_blocks(x, Wide::f32, tokens, features, br, seed), br.format);  // features x tokens
    }
    std::vector<float> t(tokens * features);
    for (std::uint64_t r = 0; r < tokens; ++r)
        for (std::uint64_t c = 0; c < features; ++c) t[c * tokens + r] = x[r * features + c];
    return decode_all(quantize_blocks(t.data(), Wide::f32, features, tokens, br, seed), br.format);
}

LayerGradient layer_gradient(const float* x, const float* dy, std::uint64_t tokens, std::uint64_t in, std::uint64_t out,
                             const GradientConfig& cfg) {
    LayerGradient L;
    L.tokens = tokens;
    L.in_features = in;
    L.out_features = out;
    // G = dY^T X in binary64 from the unquantised operands.
    std::vector<double> xt(in * tokens), dyt(out * tokens), g(out * in, 0.0);
    for (std::uint64_t r = 0; r < tokens; ++r) {
        for (std::uint64_t c = 0; c < in; ++c) xt[c * tokens + r] = x[r * in + c];
        for (std::uint64_t c = 0; c < out; ++c) dyt[c * tokens + r] = dy[r * out + c];
    }
    double norm2 = 0;
    for (std::uint64_t i = 0; i < out; ++i)
        for (std::uint64_t j = 0; j < in; ++j) {
            double acc = 0;
            for (std::uint64_t u = 0; u < tokens; ++u) acc += dyt[i * tokens + u] * xt[j * tokens + u];
            g[i * in + j] = acc;
            norm2 += acc * acc;
        }
    for (const RecipeSpec& r : cfg.recipes) {
        GradNoise gn;
        gn.recipe = r.name;
        gn.norm = std::sqrt(norm2);
        try {
            const BlockRecipe bx = block_recipe(r, recipe_slot(Role::activation), in);
            BlockRecipe bg = block_recipe(r, recipe_slot(Role::gradient), out);
            const std::vector<double> xq = wgrad_operand(x, tokens, in, bx, 0);
            bg.policy.rounding = Rounding::nearest_even;
            gn.noise_rtn = frobenius_diff(wgrad_operand(dy, tokens, out, bg, 0), xq, g, out, in, tokens);
            bg.policy.rounding = Rounding::stochastic;
            gn.noise_sr = frobenius_diff(wgrad_operand(dy, tokens, out, bg, cfg.seed), xq, g, out, in, tokens);
        } catch (const std::invalid_argument& e) {
            gn.skipped = e.what();
        }
        L.recipes.push_back(std::move(gn));
    }
    return L;
}

nlohmann::json LayerGradient::to_json() const {
    auto num = [](double v) { return io::json_number(v); };  // non-finite: io/json_number.hpp
    nlohmann::json rs = nlohmann::json::array();
    for (const auto& r : recipes) {
        nlohmann::json j = {{"recipe", r.recipe}, {"grad_norm", r.norm}};
        if (!r.skipped.empty())
            j["skipped"] = r.skipped;
        else
            j.update({{"noise_rtn", r.noise_rtn},
                      {"noise_sr", r.noise_sr},
                      {"ratio_rtn", num(r.ratio_rtn())},
                      {"ratio_sr", num(r.ratio_sr())},
                      {"wgrad_error_rtn", r.norm > 0 ? num(r.noise_rtn / r.norm) : nullptr},
                      {"wgrad_error_sr", r.norm > 0 ? num(r.noise_sr / r.norm) : nullptr}});
        rs.push_back(std::move(j));
    }
    return {{"file", file},
            {"layer", layer},
            {"step", step},
            {"tokens", tokens},
            {"in_features", in_features},
            {"out_features", out_features},
            {"recipes", rs}};
}

namespace {

// The block index of a layer name: the number N of the first "layers.N.", "layer.N.", "h.N." or
// "blocks.N." (any of . and / as separators) that starts the name or follows a separator. Scanned
// by hand, not with std::regex (it recursed per character: a stack overflow on long names);
// a number past 2^40 is no index (it would overflow the order key; std::stoll threw).
std::optional<long long> block_index(std::string_view name) {
    auto sep = [](char c) { return c == '.' || c == '/'; };
    for (std::size_t i = 0; i < name.size(); ++i) {
        if (i > 0 && !sep(name[i - 1])) continue;
        for (std::string_view w : {"layers", "layer", "h", "blocks"}) {
            std::size_t j = i + w.size();
            if (name.substr(i, w.size()) != w || j >= name.size() || !sep(name[j])) continue;
            const std::size_t d = ++j;
            long long v = 0;
            while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j])) && v < (1LL << 40))
                v = v * 10 + (name[j++] - '0');
            if (j > d && j < name.size() && sep(name[j])) return v;
        }
    }
    return std::nullopt;
}

}  // namespace

std::vector<Bf16Choice> bf16_choice(const std::vector<LayerGradient>& layers, double fraction) {
    // Within a block, the order the forward pass runs the projections (Llama/GPT names).
    auto within = [](const std::string& name) -> int {
        static const std::pair<const char*, int> parts[] = {
            {"q_proj", 0},      {"k_proj", 1}, {"v_proj", 2}, {"qkv", 2},     {"o_proj", 3},    {"out_proj", 3},
            {"attn.c_proj", 3}, {"gate", 4},   {"w1", 4},     {"up_proj", 5}, {"w3", 5},        {"fc1", 5},
            {"c_fc", 5},        {"down", 6},   {"w2", 6},     {"fc2", 6},     {"mlp.c_proj", 6}};
        for (const auto& [p, k] : parts)
            if (name.find(p) != std::string::npos) return k;
        return 7;
    };
    auto order = [&](const std::string& name) -> long long {
        if (const auto k = block_index(name)) return *k * 16 + within(name);
        return name.find("embed") != std::string::npos ? -1 : (1LL << 40);
    };
    // Embeddings and the LM head are not among the linear layers a recipe quantises (TE leaves
    // them in BF16): they are left out of the count and the choice.
    auto head = [](const std::string& name) {
        return name.find("lm_head") != std::string::npos || name.find("embed") != std::string::npos;
    };
    std::vector<Bf16Choice> out;
    // Group by (file, step); within a group one choice per recipe.
    std::vector<std::size_t> idx;
    for (std::size_t i = 0; i < layers.size(); ++i)
        if (!head(layers[i].layer)) idx.push_back(i);
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        const auto& x = layers[a];
        const auto& y = layers[b];
        if (x.file != y.file) return x.file < y.file;
        if (x.step != y.step) return x.step < y.step;
        return order(x.layer) < order(y.layer);
    });
    for (std::size_t s = 0; s < idx.size();) {
        std::size_t e = s;
        while (e < idx.size() && layers[idx[e]].file == layers[idx[s]].file &&
               layers[idx[e]].step == layers[idx[s]].step)
            ++e;
        const std::size_t n = e - s;
        const std::size_t keep = static_cast<std::size_t>(std::ceil(fraction * static_cast<double>(n) - 1e-9));
        for (std::size_t r = 0; r < layers[idx[s]].recipes.size(); ++r) {
            Bf16Choice c;
            c.file = layers[idx[s]].file;
            c.step = layers[idx[s]].step;
            c.recipe = layers[idx[s]].recipes[r].recipe;
            c.linear_layers = n;
            c.keep = keep;
            for (std::size_t k = e - keep; k < e; ++k) c.last.push_back(layers[idx[k]].layer);
            std::vector<std::size_t> by(idx.begin() + s, idx.begin() + e);
            auto err = [&](std::size_t i) {
                const auto& g = layers[i].recipes[r];
                return g.skipped.empty() && g.norm > 0 ? g.noise_sr / g.norm : -1.0;
            };
            std::stable_sort(by.begin(), by.end(), [&](std::size_t a, std::size_t b) { return err(a) > err(b); });
            for (std::size_t k = 0; k < keep; ++k) c.by_error.push_back(layers[by[k]].layer);
            out.push_back(std::move(c));
        }
        s = e;
    }
    return out;
}

nlohmann::json Bf16Choice::to_json() const {
    return {{"file", file}, {"step", step}, {"recipe", recipe},     {"linear_layers", linear_layers},
            {"keep", keep}, {"last", last}, {"by_error", by_error}, {"rule", kCaseBf16Layers}};
}

}  // namespace fp8kit::warn
