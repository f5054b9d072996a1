// Shape signals of dumped tensors, per tensor (docs/early-warning.md): per-channel amax and its
// outlier channels, kurtosis, per-block statistics under a block recipe (stats.hpp's
// compute_block_stats: underflow, saturation, spread of the block scales in log2), and for
// SwiGLU blocks recognised by name the channel-wise alignment of the gate and up weights
// (Fishman et al., arXiv 2409.12517). A channel is an index of the last dimension; a tensor of
// rank >= 2 is read as rows x last dimension.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/warn/gradient.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {

struct ShapeConfig {
    double outlier_k = 64;                   // outlier channel: channel amax > outlier_k x median channel amax
    std::size_t min_channels = 8;            // fewer channels: no per-channel signal
    double kurtosis_max = 1000;              // warn above this Pearson kurtosis (a normal has 3)
    double swiglu_cos = 0.9;                 // aligned channel: |cos(gate row, up row)| >= this
    std::optional<RecipeSpec> block_recipe;  // block statistics under this recipe (none: skipped)
    double underflow_max = 0.01;             // warn when more than this fraction of nonzeros flush to zero
    double saturation_max = 0;               // warn when more than this fraction overflows
    GradientConfig grad;                     // wgrad noise per layer, BF16 layer choice, norm-weight bias
};

struct ShapeStats {
    std::string file, tensor;
    std::int64_t step = -1;
    std::uint64_t rows = 0, channels = 0;
    double median_channel_amax = 0, max_channel_amax = 0;
    std::vector<std::uint64_t> outlier_channels;  // ascending
    double kurtosis = 0;
    bool has_blocks = false;
    double underflow = 0, saturation = 0;             // fractions of the tensor's elements
    double scale_log2_std = 0, scale_log2_range = 0;  // over the blocks' scale_inv (blocks of zeros left out)
    std::uint64_t blocks = 0;
    // For plots: every channel's amax, and the blocks' log2 scale_inv as (exponent, count) pairs
    // (the exponent histogram of compute_block_stats, blocks of zeros left out as above).
    std::vector<double> channel_amax;
    std::vector<std::pair<int, std::uint64_t>> scale_log2_hist;
    nlohmann::json to_json() const;
};

// Gate/up alignment of one SwiGLU block.
struct SwigluAlignment {
    std::string file, gate, up;
    std::int64_t step = -1;
    std::vector<double> cos;             // per channel (row of the [ffn, hidden] weights)
    std::vector<std::uint64_t> aligned;  // channels with |cos| >= swiglu_cos, by |cos| descending
};

// The SwiGLU partner name of a gate projection ("gate_proj" -> "up_proj", "w1" -> "w3",
// "gate" -> "up" in a path component), or "" when the name names no gate.
std::string swiglu_up_name(const std::string& gate);

struct ShapeResult {
    std::vector<ShapeStats> tensors;
    std::vector<SwigluAlignment> swiglu;
    std::vector<LayerGradient> gradients;  // linear layers with input and grad_output dumped
    std::vector<Bf16Choice> bf16;
    std::vector<NormBias> norms;
    std::vector<Warning> warnings;
    std::vector<dump::Problem> skipped;  // datasets the reader skipped on purpose (dump::skipped())
};

// Reads every tensor of the dump files (one at a time) and computes the signals. Bad input throws
// dump::DumpError naming the file and tensor.
ShapeResult shape_signals(const std::vector<std::string>& files, const ShapeConfig& cfg,
                          const dump::ReadOptions& read = {});

// The same on one in-memory tensor (float32, row-major rows x channels): the monitor's hook.
ShapeStats shape_of(const float* data, std::uint64_t rows, std::uint64_t channels, Role role, const ShapeConfig& cfg);
SwigluAlignment swiglu_alignment(const float* gate, const float* up, std::uint64_t rows, std::uint64_t cols,
                                 double cos_min);

}  // namespace fp8kit::warn
