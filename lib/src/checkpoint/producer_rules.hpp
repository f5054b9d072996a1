// Each producer's weight quantisation, as a preset of its own (docs/inference.md has the formulas
// and the source files they were read from). Split in two so a check can tell scale faults from
// code faults: scales from the original weights, then codes from the original weights and any
// given scales (the checkpoint's own, or the expected ones).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// Whose float arithmetic the producer ran on. torch differs in one operation: a tensor divided by
// a CPU scalar (a Python number, e.g. ModelOpt's `amax / 448.0`) is, on CUDA, the tensor times the
// float32 reciprocal of the scalar (ATen native/cuda/BinaryDivTrueKernel.cu div_true_kernel_cuda:
// `iter.is_cpu_scalar(2)` -> `a * (opmath_t(1.0) / b)`, "may lose one bit of precision"), on
// the CPU a true division. A 0-dim CUDA tensor divisor is no CPU scalar: the CUDA kernel casts
// it to the common dtype first (ModelOpt FP8 per-tensor codes: expected_codes). compressed-tensors
// 0.20.0 quantises on CUDA with its own Triton kernel (forward_helpers.py _quantize_triton,
// registered for CUDA tensors; FP8 only from SM90): the quotient x / scale in float32
// (tl.div_rn), never rounded to the weight's dtype first.
enum class Arithmetic { cpu, cuda };
// "modelopt (CPU arithmetic)", "compressed-tensors (CUDA arithmetic)": the variant a report names.
std::string variant_name(Producer p, Arithmetic a);

// Which of a producer's block-FP8 rules (Producer::deepseek: a config.json quant_method "fp8",
// written by DeepSeek's own tools or by transformers' FineGrainedFP8):
//  amax_div:     s = amax / 448 per block in float32, codes e4m3(x / s) (DeepSeek-V3
//                inference/kernel.py act_quant's rule, applied to 128x128 blocks; DeepSeek
//                publishes no weight quantiser);
//  ue8m0:        s = 2^ceil(log2(max(amax, 1e-4) / 448)), codes e4m3(x / s) (DeepSeek-V3.1
//                inference/kernel.py act_quant with scale_fmt "ue8m0": the scale rounded up to a
//                power of two, stored as float32 or as F8_E8M0);
//  transformers: t = fl(448 * fl(1 / amax)) (1 for an all-zero block), s = fl(1 / t), codes
//                e4m3(clamp(x * t, -448, 448)) (transformers 5.17 integrations/finegrained_fp8.py
//                Fp8Quantize._quantize_one: `scales = _FP8_MAX / safe_max_abs`, a Python
//                number over a tensor, which torch computes as reciprocal() * 448;
//                `inv_scales = (1.0 / scales)`, `reshaped * scales_broadcast`, all float32);
//  transformers_ue8m0: the same with scale_fmt "ue8m0": s = 2^ceil(log2(max(fl(1 / t), FLT_MIN)))
//                (`torch.pow(2.0, torch.ceil(torch.log2(inv_scales.clamp(min=tiny))))`, stored as
//                float8_e8m0fnu), codes e4m3(clamp(x * (1 / s))) (`scales = 1.0 / inv_scales`).
// And gpt-oss's MXFP4 rules (Producer::gpt_oss; amax_div there stands for the OCP MX v1.0
// section 6.3 floor rule, numerics::mx_code_floor):
//  triton_round_up: triton_kernels' downcast_to_mxfp as gpt_oss/triton/moe.py quantize_mx4 calls
//                it (default DequantScaleRoundingMode.ROUND_UP, uint8 scales):
//                numerics::mx_code_triton_round_up(amax, 6); elements x * 2^(127 - code) in
//                float32 (x * 0 for code 0), rounded to E2M1 to nearest, ties to even (the
//                guard/sticky/lsb increment of _downcast_to_mxfp.py since triton #8110,
//                2025-09-11), saturating at 6, the sign kept on a zero;
//  triton_round_up_ties_away: the same scales, elements rounded to nearest with ties away from
//                zero (`(((exponents << 2) | (mantissas >> 21)) + 1) >> 1`: triton_kernels
//                before #8110, e.g. commit 9e1e203f of 2025-08-05, gpt-oss's release).
enum class BlockRule { amax_div, ue8m0, transformers, transformers_ue8m0, triton_round_up, triton_round_up_ties_away };
// A rule and the weight it was applied to: e4m3_input, the original cast to E4M3 unscaled first
// (transformers_loaded_weight).
struct BlockRuleChoice {
    BlockRule rule;
    bool e4m3_input = false;
};
// The rules a quant_method "fp8" checkpoint was written under, from its config: transformers'
// (Folder::transformers_fp8) with its scale_fmt, on the weight as transformers' loader hands it
// to the quantiser and on the weight itself; else DeepSeek's (scale_fmt "ue8m0": ue8m0).
std::vector<BlockRuleChoice> block_rules(bool transformers_config, const std::string& scale_fmt);
// The weight transformers' FineGrainedFP8 quantises when it quantises while loading
// (from_pretrained with a FineGrainedFP8Config, 5.17): core_model_loading.py
// convert_and_load_state_dict_in_model casts each checkpoint tensor to the dtype of the empty
// parameter it loads into ("3. Handle dtype casting": `_dtype = empty_param.dtype`) before the
// quantize op, and FP8Linear / FP8Experts create that parameter as float8_e4m3fn; so
// Fp8Quantize sees e4m3(x) (round to nearest even, saturating at 448 as torch 2.14's CPU cast
// does), not x (scripts/fixtures/make_transformers_fp8_checkpoints.py checks it on every weight).
std::vector<float> transformers_loaded_weight(const std::vector<float>& x);
const char* name(BlockRule r);

// The scales of one layer, as the decoded values the producer stores.
struct Scales {
    std::vector<float> block;  // per block, row-major over the block grid (one entry per tensor/row for FP8)
    float global = 1.0f;       // NVFP4's second level, in the producer's own convention
    std::uint64_t grid_rows = 1, grid_cols = 1;
    std::uint64_t block_rows = 1, block_cols = 1;  // elements one scale covers (edge blocks partial)
};

// The block grid of layer L.
void set_grid(const Layer& L, Scales& s);

// x: the original weight (rows x cols floats), stored as weight_dtype ("BF16", "F32"). scale_dtype: how the checkpoint stores the block
// scale ("F32", "BF16", "F8_E4M3", "U8" = E8M0), which sets the producer's rounding of it.
// shared_amax >= 0: the amax of the fused group the layer's second-level scale is shared with
// (ModelOpt preprocess_linear_fusion: q/k/v, gate/up), instead of the layer's own.
Scales expected_scales(Producer p, const Layer& L, const std::vector<float>& x, const std::string& scale_dtype,
                       const std::string& weight_dtype, float shared_amax = -1.0f, Arithmetic a = Arithmetic::cpu,
                       BlockRule rule = BlockRule::amax_div);

// One code per element (low bits): the producer's cast of x under scales s. scalar_scale: a
// ModelOpt per-tensor FP8 weight was divided by a 0-dim scale tensor (the HF export), so torch
// rounded the quotient (and on CUDA the divisor) to the weight's dtype; false: by a scale of
// shape [1] or [E, 1] (the TensorRT-LLM export, whose saved scale is the tensor it divided by:
// model_config_utils.py pack_linear_weights), which type promotion makes a float32 quotient.
std::vector<std::uint8_t> expected_codes(Producer p, const Layer& L, const std::vector<float>& x, const Scales& s,
                                         const std::string& scale_dtype, const std::string& weight_dtype,
                                         Arithmetic a = Arithmetic::cpu, BlockRule rule = BlockRule::amax_div,
                                         bool scalar_scale = true);

// ModelOpt's INT4 weights (W4A8_AWQ, W4A16_AWQ): two rows a byte, signed nibbles.
inline bool int4_packed(Scheme s) { return s == Scheme::w4a8 || s == Scheme::int4; }
// Integer codes (INT4, INT8): a code one step off is a rounding difference of 1.
inline bool integer_codes(Scheme s) { return int4_packed(s) || s == Scheme::int8; }

// The element format's largest finite value (E4M3 448, E2M1 6, INT4 7, INT8 127).
float element_max(Scheme s);
// Decode one code of the layer's element format.
float decode_element(Scheme s, std::uint8_t code);
// The factor a code of element (r, c) is multiplied by to dequantise, under s.
float dequant_factor(Producer p, const Layer& L, const Scales& s, std::uint64_t r, std::uint64_t c);

}  // namespace fp8kit::checkpoint::detail
