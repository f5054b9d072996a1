// Mixture-of-experts rules of the producers (issue 28): which projections share one weight amax,
// and the per-expert scale checks an MoE layer needs beyond a dense one. docs/inference.md
// ("Mixture-of-experts checkpoints") has the rules and the source files they were read from.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// The modules (full names, the layer's own included) whose weights ModelOpt quantises under one
// shared amax with `module` under scheme `s`; empty where the layer keeps its own amax.
std::vector<std::string> modelopt_amax_group(const std::string& module, Scheme s);

// The fused group whose members share one weight amax under producer p (the layer's own module
// included); empty where the layer keeps its own. ModelOpt: modelopt_amax_group. compressed-tensors
// checkpoints written by llm-compressor: NVFP4's weight_global_scale over q/k/v, q_a_proj /
// kv_a_proj_with_mqa, gate/up and an expert's w1/w3 (llm-compressor modifiers/utils/helpers.py
// update_fused_layer_weight_global_scales; compressed-tensors alone writes each layer's own).
std::vector<std::string> fused_amax_group(Producer p, const std::string& module, Scheme s);

// Notes on the scales of the experts of every MoE block (per-tensor weight scale or NVFP4 global
// scale differing between an expert's gate and up projection, input scales differing between
// experts of one projection). Reads only one-element scale tensors.
std::vector<Finding> expert_scale_notes(const Folder& F, const std::vector<Layer>& layers);

// The original of a stacked expert weight (layer <block>.experts.<proj>, Layer::experts > 0)
// from an original stored per expert (<block>.experts.<e>.<proj>.weight, e = 0 .. experts-1, as
// transformers 5's save_pretrained writes fused experts), concatenated in expert order; nullopt
// when the original has no such tensors or they differ in dtype.
std::optional<RawTensor> stacked_reference(const Folder& ref, const Layer& L);

}  // namespace fp8kit::checkpoint::detail
