// ModelOpt 0.47's NVFP4-family presets (modelopt/torch/quantization/config.py: NVFP4_AWQ_*,
// NVFP4_SVDQUANT_DEFAULT_CFG, NVFP4_FOUR_OVER_SIX_CFG, NVFP4_W4A4_WEIGHT_*, W4A16_NVFP4_CFG,
// W4A8_NVFP4_FP8_CFG, the MLP / experts-only presets and the NVFP4 KV presets) as its HF export
// writes them (modelopt/torch/export/unified_export_hf.py, quant_utils.py): what differs from
// NVFP4_DEFAULT_CFG's checkpoint, told from hf_quant_config.json and the tensor names.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "checkpoint/findings.hpp"
#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// quantized_layers of a ModelOpt quantization object (hf_quant_config.json "quantization", or
// config.json quantization_config): module -> (quant_algo, group_size; 0 where none). Written
// under MIXED_PRECISION (quant_utils.py get_quant_config), e.g. by NVFP4_FP8_MHA_CONFIG, which
// also quantises the embedding (W4A16_NVFP4). Throws std::invalid_argument, naming the entry,
// where quantized_layers is present but not of that form.
std::map<std::string, std::pair<std::string, std::uint64_t>> modelopt_quantized_layers(const nlohmann::json& q);

// The quant_algo ModelOpt wrote for module: its quantized_layers entry, else the folder's.
std::string modelopt_layer_algo(const Folder& F, const std::string& module);

// An NVFP4-family quant_algo (NVFP4, NVFP4_AWQ, NVFP4_SVD, W4A16_NVFP4, W4A8_NVFP4_FP8): its
// layers are NVFP4 whatever their scale's dtype (a float32 weight_scale is then a fault, not
// W4A8_AWQ's INT4 group scales).
bool modelopt_nvfp4_algo(const std::string& algo);

// ModelOpt's NVFP4 block (the weight quantizer's block_sizes[-1]): 16, or 32 for
// W4A8_NVFP4_FP8_CFG and NVFP4_MLP_WEIGHT_ONLY_CFG; written as group_size (per layer under
// MIXED_PRECISION). Anything else falls back to NVFP4's 16 (the scale shape check then says so).
std::uint64_t modelopt_nvfp4_block(const Folder& F, const std::string& module, std::uint64_t folder_group);

// W4A8_NVFP4_FP8: weight_scale_2 = amax / 448 (quant_utils.py get_weight_scaling_factor_2), so
// that the block scales reach 448 / 6 and the kernel dequantises to FP8; elsewhere amax / 2688.
bool modelopt_fp8_stage_scale_2(const Layer& L);

// The NVFP4 algos whose activations ModelOpt quantises statically: every quantised linear gets an
// input_scale (quant_utils.py get_activation_scaling_factor); W4A16_NVFP4 writes none.
bool modelopt_needs_input_scale(const Layer& L);

// A ModelOpt NVFP4 layer's companions as its export writes them: an activation-quantising algo's
// input_scale present (an engine loading it reads no activation scale otherwise: 0 or its
// default), a weight-only one's absent (noted); weight_scale_2 and input_scale float32 (both
// `.float()` in quant_utils.py); pre_quant_scale one factor per input channel.
void modelopt_nvfp4_companions(const Folder& F, const Layer& L, Findings& C);

// One note naming the preset family the folder's configs and tensors show, and the rule checked.
void modelopt_preset_note(const Folder& F, Findings& C);

// ModelOpt companion tensors no layer reads, named as what they are: SVDQuant's low-rank branch
// (svdquant_lora_a / _b), a pre_quant_scale of a module that is not quantised.
void modelopt_companion_tensors(const Folder& F, Findings& C);

// Tensors of a ModelOpt HF export that no layer or KV rule reads, each named as what it is (a
// quantizer buffer the export strips, or a scale beside no quantised weight).
void modelopt_unread_tensors(const Folder& F, Findings& C);

// Why layer L's codes cannot be replayed from the original and the files: the AWQ / SVDQuant
// NVFP4 algos quantise a smoothed (and, for SVDQuant, low-rank-reduced) weight held in float32
// that the checkpoint stores only rounded. "" where the rule replays.
std::string modelopt_not_replayable(const Folder& F, const Layer& L);

struct Scales;  // producer_rules.hpp

// The dynamic max rule (nvfp4_tensor.py get_weights_scaling_factor: block scale
// e4m3(amax_b / (6 * weight_scale_2))) puts a code of magnitude 6 in every block holding a nonzero
// code whose scale is a normal E4M3 below 448: the block's largest element over its scale is
// 6 / (1 +- 2^-4), which E2M1 rounds to 6. Checked on the NVFP4_AWQ and NVFP4_SVD layers, whose
// codes --reference cannot replay: a block short of 6 holds a changed code.
void modelopt_max_code_rule(const Folder& F, const Layer& L, const Scales& st, Findings& C);

// ModelOpt's NVFP4 presets whose weight scales are not the max rule's, as its export writes them
// (qtensor/nvfp4_tensor.py get_weights_scaling_factor_2_from_quantizer and
// get_weights_scaling_factor_from_quantizer), told by the stored scales of a layer whose codes are
// bit-exact under them:
//  - "4/6" (NVFP4_FOUR_OVER_SIX_CFG): weight_scale_2 = amax / (6 * 256) (numeric_utils.py
//    fp8_max_for_normalization: E4M3_MAX_46 = 256), each block's amax its own times 1 (M = 6)
//    or 1.5 (M = 4) as the MSE calibrator chose (model_calib.py mse_calibrate, multipliers 1.0 to
//    1.5 by 0.5), block scale e4m3(clamp((amax_b / 6) * 256 / (amax / 6))): every block one of
//    its two candidates, replayed bit-exact;
//  - "clipped amax" (NVFP4_AWQ_CLIP_CFG: model_calib.py awq_clip, per-tensor for NVFP4: the
//    weight quantizer's amax times the shrink of least output error, one of 0.5, 0.55, ..., 0.95,
//    1, in the weight's dtype; the fused group's largest at export): weight_scale_2 = that / 2688
//    for some member and shrink, below the weight's; block scales the max rule's under it (the
//    dynamic path): replayed bit-exact;
//  - "searched block amax" (NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG, NVFP4_W4A4_WEIGHT_LOCAL_HESSIAN_CFG:
//    mse_calibrate / local_hessian_calibrate pick each block's amax by a search whose loss is not
//    in the files; the Hessian's comes from calibration activations): weight_scale_2 the max
//    rule's, block scales not replayed. Taken only where blocks off the max rule are at least
//    2 and 1% of the layer's: one block off it is a changed scale, not a search.
// member_amax: the amax of each member of the fused group (preprocess_linear_fusion), or of the
// layer alone; x: the original weight, stored as weight_dtype.
struct SearchedScales {
    std::string rule;       // "" where none explains the scales
    bool replayed = false;  // every block scale recomputed bit-exact
    std::uint64_t blocks_off_max_rule = 0;
};
SearchedScales modelopt_searched_scales(const Layer& L, const std::vector<float>& x,
                                        const std::vector<float>& member_amax, const std::string& weight_dtype,
                                        const Scales& st);

}  // namespace fp8kit::checkpoint::detail
