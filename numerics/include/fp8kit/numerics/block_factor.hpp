// A block's dequantisation factor in two parts, as a block-scaled GEMM applies it.
//
// cuBLASLt's block-scaled GEMMs (CUBLASLT_MATMUL_MATRIX_SCALE_VEC16_UE4M3 / VEC32_UE8M0, cublasLt.h)
// multiply each element by its block's scale byte inside the tensor core and apply the tensor's
// factor as the epilogue's alpha. So a block's factor splits into:
//   - the block part: the E4M3 value of the scale byte for the NVFP4 rules, scale_inv (a power of
//     two) for MX, scale_inv for every other rule;
//   - the tensor part: NVFP4's per-tensor decode factor (TE: fl32(global_amax * fl32(1 / 2688)),
//     the order of dequantize_nvfp4.cuh; torchao: per_tensor_scale = fl32(global_amax / 2688),
//     nvfp4_tensor.py per_tensor_amax_to_scale), else 1.
// Under the NVFP4 and MX rules a code times the block part is exact in bfloat16 (E2M1 / E2M3 /
// E3M2 / E4M3 / E5M2 significands of at most 4 bits times a power of two or an E4M3 value of 4
// bits: at most 8 significant bits), so a GEMM on such operands in bfloat16 sees the block-scaled
// values exactly. Block part times tensor part differs from scale_inv by the rounding of one
// product (NVFP4 only).
#pragma once

#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::numerics {

FP8KIT_HD float rule_block_factor(ScaleRule r, const BlockScale& s) {
    return rule_is_nvfp4(r) ? e4m3_value(s.code) : s.scale_inv;
}

FP8KIT_HD float rule_tensor_factor(ScaleRule r, float global_amax) {
    if (r == ScaleRule::nvfp4_te) return mul_rn(global_amax, one_over_2688());
    if (r == ScaleRule::nvfp4_torchao) return div_rn(global_amax, kNvfp4ScaleMax);
    return 1.0f;
}

}  // namespace fp8kit::numerics
