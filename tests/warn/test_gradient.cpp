// Gradient and norm-weight signals on tensors with known answers (docs/early-warning.md,
// "Gradient and norm-weight signals").
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "fp8kit/warn/gradient.hpp"

using namespace fp8kit;
using namespace fp8kit::warn;

namespace {

GradientConfig config(std::initializer_list<const char*> recipes) {
    GradientConfig c;
    for (const char* r : recipes) c.recipes.push_back(parse_recipe(r));
    return c;
}

// X (t x k) and dY (t x n) standard normal; dY projected off the column space of X and eps x the
// original added back, so that G = dY^T X shrinks by eps while the operands (and so the
// quantisation noise) keep their size: the gradient of a sum of per-token gradients that cancel.
void cancelling(std::uint64_t t, std::uint64_t k, std::uint64_t n, double eps, std::vector<float>& x,
                std::vector<float>& dy) {
    std::mt19937 g(7);
    std::normal_distribution<double> d;
    std::vector<double> xd(t * k), dd(t * n);
    for (auto& v : xd) v = d(g);
    for (auto& v : dd) v = d(g);
    // Gram-Schmidt on X's columns (binary64), then dY -= Q Q^T dY (1 - eps).
    std::vector<double> q = xd;
    for (std::uint64_t j = 0; j < k; ++j) {
        for (std::uint64_t p = 0; p < j; ++p) {
            double dot = 0;
            for (std::uint64_t r = 0; r < t; ++r) dot += q[r * k + p] * q[r * k + j];
            for (std::uint64_t r = 0; r < t; ++r) q[r * k + j] -= dot * q[r * k + p];
        }
        double nn = 0;
        for (std::uint64_t r = 0; r < t; ++r) nn += q[r * k + j] * q[r * k + j];
        for (std::uint64_t r = 0; r < t; ++r) q[r * k + j] /= std::sqrt(nn);
    }
    for (std::uint64_t c = 0; c < n; ++c)
        for (std::uint64_t p = 0; p < k; ++p) {
            double dot = 0;
            for (std::uint64_t r = 0; r < t; ++r) dot += q[r * k + p] * dd[r * n + c];
            for (std::uint64_t r = 0; r < t; ++r) dd[r * n + c] -= (1 - eps) * dot * q[r * k + p];
        }
    x.assign(xd.begin(), xd.end());
    dy.assign(dd.begin(), dd.end());
}

}  // namespace

TEST_CASE("wgrad noise: exactly representable operands give no noise", "[warn]") {
    // Powers of two within E4M3's range under per-tensor current scaling (te-current: scale is a
    // power of two for an amax that is one) are cast exactly: G_q == G.
    const std::uint64_t t = 32, k = 8, n = 4;
    std::vector<float> x(t * k), dy(t * n);
    for (std::uint64_t i = 0; i < x.size(); ++i) x[i] = std::ldexp(i % 3 ? 1.0f : -1.0f, static_cast<int>(i % 5) - 2);
    for (std::uint64_t i = 0; i < dy.size(); ++i) dy[i] = std::ldexp(i % 2 ? 1.0f : -1.0f, -static_cast<int>(i % 4));
    const LayerGradient L = layer_gradient(x.data(), dy.data(), t, k, n, config({"mxfp8"}));
    REQUIRE(L.recipes.size() == 1);
    CHECK(L.recipes[0].skipped.empty());
    CHECK(L.recipes[0].norm > 0);
    CHECK(L.recipes[0].noise_rtn == 0);
    CHECK(L.recipes[0].noise_sr == 0);  // stochastic rounding of an exact value is exact
}

TEST_CASE(
    "wgrad noise: cancelling per-token gradients fall below sqrt(3), the same operands without cancellation do not",
    "[warn]") {
    const std::uint64_t t = 128, k = 16, n = 8;
    const GradientConfig cfg = config({"mxfp8", "nvfp4"});
    std::vector<float> x, dy;
    cancelling(t, k, n, 1.0, x, dy);
    const LayerGradient full = layer_gradient(x.data(), dy.data(), t, k, n, cfg);
    cancelling(t, k, n, 0.002, x, dy);
    const LayerGradient small = layer_gradient(x.data(), dy.data(), t, k, n, cfg);
    for (std::size_t r = 0; r < 2; ++r) {
        INFO(full.recipes[r].recipe);
        REQUIRE(full.recipes[r].skipped.empty());
        CHECK(full.recipes[r].ratio_rtn() > cfg.ratio_min);
        CHECK(full.recipes[r].ratio_sr() > cfg.ratio_min);
        CHECK(small.recipes[r].ratio_sr() < cfg.ratio_min);
        // Stochastic rounding is unbiased but noisier than round-to-nearest (variance, not bias).
        CHECK(full.recipes[r].noise_sr > full.recipes[r].noise_rtn);
    }
    CHECK(gradient_warnings({full}, cfg).empty());
    LayerGradient named = small;
    named.layer = "model.layers.3.mlp.down_proj";
    const auto w = gradient_warnings({named}, cfg);
    REQUIRE(w.size() == 1);
    CHECK(w[0].signal == "grad-noise");
    CHECK(w[0].tensor == "model.layers.3.mlp.down_proj");
    CHECK(w[0].evidence.find("nvfp4 with stochastic rounding") != std::string::npos);
}

TEST_CASE("wgrad noise: NVFP4's RHT needs token counts that are multiples of 16", "[warn]") {
    std::vector<float> x(10 * 4, 1.0f), dy(10 * 4, 0.5f);
    const LayerGradient L = layer_gradient(x.data(), dy.data(), 10, 4, 4, config({"nvfp4"}));
    CHECK_FALSE(L.recipes[0].skipped.empty());
}

TEST_CASE("BF16 choice: the last 15% of linear layers in model order, and by error", "[warn]") {
    std::vector<LayerGradient> ls;
    const char* names[] = {
        "model.layers.1.mlp.down_proj", "model.layers.0.self_attn.q_proj", "model.layers.1.self_attn.q_proj",
        "model.layers.1.mlp.gate_proj", "model.layers.0.mlp.down_proj",    "lm_head",
        "model.layers.10.mlp.up_proj",  "model.layers.2.mlp.up_proj",      "model.layers.0.mlp.up_proj"};
    double err = 0.1;
    for (const char* n : names) {
        LayerGradient L;
        L.layer = n;
        GradNoise g;
        g.recipe = "nvfp4";
        g.norm = 1;
        g.noise_sr = err;
        err += 0.1;
        L.recipes.push_back(g);
        ls.push_back(L);
    }
    const auto c = bf16_choice(ls, 0.15);
    REQUIRE(c.size() == 1);
    CHECK(c[0].linear_layers == 8);  // lm_head left out
    CHECK(c[0].keep == 2);           // ceil(0.15 x 8)
    CHECK(c[0].last == std::vector<std::string>{"model.layers.2.mlp.up_proj", "model.layers.10.mlp.up_proj"});
    CHECK(c[0].by_error == std::vector<std::string>{"model.layers.0.mlp.up_proj", "model.layers.2.mlp.up_proj"});
}

TEST_CASE("BF16 choice: hostile layer names order without a crash or a throw", "[warn]") {
    // A 1 MB name (std::regex recursed per character: a stack overflow) and a block number past
    // 64 bits (std::stoll threw out_of_range) sort after the named blocks; h/N and blocks.N count.
    std::vector<LayerGradient> ls;
    for (std::string n : {"model.layers." + std::string(1 << 20, '7') + ".mlp.up_proj",
                          std::string("model.layers.99999999999999999999999.mlp.up_proj"), std::string("h/3/mlp.c_fc"),
                          std::string("blocks.1.attn.qkv"), "x" + std::string(1 << 20, '.')}) {
        LayerGradient L;
        L.layer = n;
        GradNoise g;
        g.recipe = "nvfp4";
        g.norm = 1;
        g.noise_sr = 0.1;
        L.recipes.push_back(g);
        ls.push_back(L);
    }
    std::vector<Bf16Choice> c;
    REQUIRE_NOTHROW(c = bf16_choice(ls, 0.4));
    REQUIRE(c.size() == 1);
    CHECK(c[0].linear_layers == 5);
    CHECK(c[0].last.size() == 2);
    CHECK(c[0].last.back() != "h/3/mlp.c_fc");
    CHECK(c[0].last.back() != "blocks.1.attn.qkv");
}

TEST_CASE("norm weights: names and the bias of quantising them under MXFP8", "[warn]") {
    CHECK(is_norm_weight("model.layers.0.input_layernorm.weight"));
    CHECK(is_norm_weight("step_1/model.layers.0.post_attention_layernorm/weight"));
    CHECK(is_norm_weight("model.norm.weight"));
    CHECK(is_norm_weight("transformer.ln_f.weight"));
    CHECK_FALSE(is_norm_weight("model.layers.0.mlp.down_proj.weight"));
    CHECK_FALSE(is_norm_weight("model.norm.bias"));
    CHECK(is_norm_weight("RMSNorm.WEIGHT"));
    CHECK(is_norm_weight("ln_f/weight"));
    CHECK_FALSE(is_norm_weight("x.pre-norm.weight"));
    CHECK_FALSE(is_norm_weight("xln_f.weight"));
    CHECK_FALSE(is_norm_weight(".weight"));
    // A 1 MB name (std::regex recursed once per character here: a stack overflow).
    CHECK(is_norm_weight("model.ln_" + std::string(1 << 20, 'n') + ".weight"));
    CHECK_FALSE(is_norm_weight(std::string(1 << 20, '.') + "weight."));
    const RecipeSpec mx = parse_recipe("mxfp8");
    // 32 weights of 1.03: block amax 1.03, TE's round-up E8M0 scale_inv 2^ceil(log2(1.03 / 448)) =
    // 2^-8; 1.03 x 256 = 263.68 lies in E4M3's [256, 512) binade, step 32: rounds to 256, i.e. 1.0.
    // Bias (1.0 - 1.03) / 1.03 = -2.9126%.
    std::vector<float> w(32, 1.03f);
    const NormBias b = norm_bias(w.data(), w.size(), mx);
    CHECK(b.bias == Approx((1.0 - static_cast<double>(1.03f)) / static_cast<double>(1.03f)).epsilon(1e-12));
    GradientConfig cfg;
    NormBias named = b;
    named.tensor = "model.norm.weight";
    const auto ws = norm_warnings({named}, cfg);
    REQUIRE(ws.size() == 1);
    CHECK(ws[0].signal == "norm-weight-bias");
    // At initialisation (all ones) the cast is exact: no bias, no warning.
    std::fill(w.begin(), w.end(), 1.0f);
    const NormBias one = norm_bias(w.data(), w.size(), mx);
    CHECK(one.bias == 0);
    CHECK(norm_warnings({one}, cfg).empty());
}
