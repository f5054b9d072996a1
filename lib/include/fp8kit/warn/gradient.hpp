// Gradient and norm-weight signals of dumped tensors (docs/early-warning.md, "Gradient and
// norm-weight signals"):
//  - the weight-gradient GEMM of a linear layer, G = dY^T X (X: the layer's input, dY: its output
//    gradient, tokens x features), under a recipe's quantisation of both operands along the token
//    dimension (the wgrad GEMM's reduction dimension), with round-to-nearest and with stochastic
//    rounding of dY: its quantisation error ||G_q - G|| / ||G|| per layer, and the ratio of the
//    gradient norm to the quantisation noise ||G|| / ||G_q - G|| against sqrt(3) (Chmiel et al.,
//    "FP4 All the Way", arXiv 2505.19115);
//  - from the errors, the layers a recipe keeps in BF16: the last ~15% of linear layers (the NVFP4
//    recipe's rule of thumb, arXiv 2509.25149), and for comparison the same count by largest error;
//  - the relative bias sum(Q(w) - w) / sum|w| that quantising a LayerNorm/RMSNorm weight
//    introduces (arXiv 2506.20752).
// Quantisation is lib's: quantize_blocks (stats/block_quantize.hpp) under block_recipe(recipe).
#pragma once

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {

struct GradientConfig {
    std::vector<RecipeSpec> recipes;        // gradient recipes (current or block kinds); empty: signal off
    double ratio_min = 1.7320508075688772;  // sqrt(3): warn when ||G|| / noise falls below
    double bf16_fraction = 0.15;            // share of linear layers kept in BF16
    std::uint64_t seed = 2505;              // stochastic rounding: emu::stochastic_bits(seed, i)
    std::optional<RecipeSpec> norm_recipe;  // norm weights quantised with its weight slot (none: off)
    double norm_bias_max = 0.005;           // warn when |relative bias| exceeds this
};

// The dequantised copy a recipe's wgrad GEMM reads of a row-major tokens x features tensor:
// features x tokens (binary64 values decode(code) x scale_inv), blocks along the tokens. Recipes
// with RoleSpec::columnwise_rht (NVFP4) give TE's column-wise copy after its Hadamard transform,
// which cancels in G (the transform is orthogonal); std::invalid_argument when tokens is not a
// multiple of 16 there.
std::vector<double> wgrad_operand(const float* x, std::uint64_t tokens, std::uint64_t features, const BlockRecipe& br,
                                  std::uint64_t seed);
// The values a tensor holds after quantisation with br, row-major, binary64.
std::vector<double> dequantized(const float* x, std::uint64_t rows, std::uint64_t cols, const BlockRecipe& br);

struct GradNoise {
    std::string recipe;
    double norm = 0;                     // ||G||_F (G from the unquantised operands, binary64)
    double noise_rtn = 0, noise_sr = 0;  // ||G_q - G||_F, dY round-to-nearest / stochastic
    double ratio_rtn() const { return noise_rtn > 0 ? norm / noise_rtn : INFINITY; }
    double ratio_sr() const { return noise_sr > 0 ? norm / noise_sr : INFINITY; }
    std::string skipped;  // why the recipe could not be applied (empty: it was)
};

struct LayerGradient {
    std::string file, layer;  // layer: the dump's group of the linear layer (input, grad_output)
    std::int64_t step = -1;
    std::uint64_t tokens = 0, in_features = 0, out_features = 0;
    std::vector<GradNoise> recipes;
    nlohmann::json to_json() const;
};
// One layer from its input X (tokens x in) and output gradient dY (tokens x out), float32.
LayerGradient layer_gradient(const float* x, const float* dy, std::uint64_t tokens, std::uint64_t in, std::uint64_t out,
                             const GradientConfig& cfg);

struct Bf16Choice {
    std::string file, recipe;
    std::int64_t step = -1;
    std::size_t linear_layers = 0, keep = 0;
    std::vector<std::string> last;      // the default: the last `keep` layers in model order
    std::vector<std::string> by_error;  // the `keep` layers with the largest SR error
    nlohmann::json to_json() const;
};
// Model order of a layer name: the number after "layers."/"layer."/"h."/"blocks." (embeddings
// first, heads without a number last); ties keep the given order.
std::vector<Bf16Choice> bf16_choice(const std::vector<LayerGradient>& layers, double fraction);

// LayerNorm / RMSNorm weight names: a path component containing "norm" or starting "ln_", whose
// last component is "weight" (".weight").
bool is_norm_weight(const std::string& name);

struct NormBias {
    std::string file, tensor, recipe;
    std::int64_t step = -1;
    std::uint64_t numel = 0;
    double bias = 0;     // sum(Q(w) - w) / sum |w|
    double rel_rms = 0;  // ||Q(w) - w|| / ||w||
    double mean = 0;     // mean of w
    nlohmann::json to_json() const;
};
NormBias norm_bias(const float* w, std::uint64_t n, const RecipeSpec& recipe);

std::vector<Warning> gradient_warnings(const std::vector<LayerGradient>& layers, const GradientConfig& cfg);
std::vector<Warning> norm_warnings(const std::vector<NormBias>& norms, const GradientConfig& cfg);

}  // namespace fp8kit::warn
