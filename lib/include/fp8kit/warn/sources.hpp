// The published cases a warning can resemble (docs/early-warning.md cites each).
#pragma once

namespace fp8kit::warn {

inline constexpr const char* kCaseOutliers =
    "Fishman et al., arXiv 2409.12517: sporadic large activation maxima before FP8 training diverged (7B, ~200B "
    "tokens)";
inline constexpr const char* kCaseSwiglu =
    "Fishman et al., arXiv 2409.12517: SwiGLU gate and up weights align channel by channel, giving outliers "
    "(Smooth-SwiGLU fixes it)";
inline constexpr const char* kCaseKurtosis = "arXiv 2505.20524: activation kurtosis predicts divergence";
inline constexpr const char* kCaseDivergence =
    "arXiv 2409.12517 and arXiv 2509.25149: low-precision training divergence";
inline constexpr const char* kCaseBlocks =
    "arXiv 2506.08027 (MXFP8 scale rule and divergence) and TE issue #2801 (block statistics, scale spread)";

}  // namespace fp8kit::warn

namespace fp8kit::warn {

inline constexpr const char* kCaseGradNoise =
    "Chmiel et al., arXiv 2505.19115 (FP4 All the Way): quantised training stops being effective when the gradient "
    "norm falls below about sqrt(3) times the quantisation noise";
inline constexpr const char* kCaseNormBias =
    "arXiv 2506.20752: quantising LayerNorm affine weights in MX formats biases them and destabilises training";
inline constexpr const char* kCaseBf16Layers =
    "NVIDIA, arXiv 2509.25149 (NVFP4 pretraining): about 15% of linear layers, the last ones, kept in BF16";

}  // namespace fp8kit::warn
