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

#include <nlohmann/json.hpp>

#include "checkpoint/findings.hpp"
#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// quantized_layers of a ModelOpt quantization object (hf_quant_config.json "quantization", or
// config.json quantization_config): module -> (quant_algo, group_size; 0 where none). Written
// under MIXED_PRECISION (quant_utils.py get_quant_config), e.g. by NVFP4_FP8_MHA_CONFIG, which
// also quantises the embedding (W4A16_NVFP4).
std::map<std::string, std::pair<std::string, std::uint64_t>> modelopt_quantized_layers(const nlohmann::json& q);

// The quant_algo ModelOpt wrote for module: its quantized_layers entry, else the folder's.
std::string modelopt_layer_algo(const Folder& F, const std::string& module);

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

// Why layer L's codes cannot be replayed from the original and the files: the AWQ / SVDQuant
// NVFP4 algos quantise a smoothed (and, for SVDQuant, low-rank-reduced) weight held in float32
// that the checkpoint stores only rounded. "" where the rule replays.
std::string modelopt_not_replayable(const Folder& F, const Layer& L);

}  // namespace fp8kit::checkpoint::detail
