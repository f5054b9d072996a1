// ModelOpt's NVFP4 weight scales (modelopt/torch/quantization/qtensor/nvfp4_tensor.py), shared by
// the checkpoint check (checkpoint/producer_rules.cpp) and the calibrators (calibrate/
// nvfp4_sweep.cpp, nvfp4_headroom.cpp). Float32 throughout; docs/inference.md has the formulas.
// Inline so each caller compiles them under its own flags (both build without FP contraction
// where it matters; these are divisions and products only).
#pragma once

#include <algorithm>
#include <cstdint>

#include "convert/float_bits.hpp"
#include "fp8kit/convert/names.hpp"
#include "fp8kit/emu/formats.hpp"

namespace fp8kit::producers {

// get_weights_scaling_factor_2: weight_scale_2 = global_amax.float() / (6.0 * 448.0). The divisor
// is a Python number, so torch on CUDA multiplies by its float32 reciprocal (cuda_scalar:
// ATen div_true_kernel_cuda with a CPU scalar); on the CPU it divides.
inline float modelopt_nvfp4_scale_2(float amax, bool cuda_scalar = false) {
    return cuda_scalar ? amax * (1.0f / 2688.0f) : amax / 2688.0f;
}

// _cast_per_block_scale_to_fp8: a block scale clamped to [2^-9, 448] and cast to E4M3 (RNE,
// saturating). A NaN scale comes out as 2^-9 (std::max keeps the bound).
inline std::uint8_t modelopt_e4m3_block_code(float v) {
    const float c = std::min(448.0f, std::max(0.001953125f, v));
    return static_cast<std::uint8_t>(
        emu::encode(Format::e4m3, Wide::f32, fp8kit::detail::bits_of(c), emu::kRneSaturate));
}

// get_weights_scaling_factor: a block's scale block_amax / (6 * weight_scale_2), a zero one
// replaced by 1.0, then clamped and cast as above. weight_scale_2 == 0 (an all-zero weight) gives
// 0 / 0 here; callers that define that case decide it before calling.
inline std::uint8_t modelopt_nvfp4_block_code(float block_amax, float scale_2) {
    float s = block_amax / (6.0f * scale_2);
    if (s == 0.0f) s = 1.0f;
    return modelopt_e4m3_block_code(s);
}

}  // namespace fp8kit::producers
