// Mixture-of-experts rules of the producers (issue 28): which projections share one weight amax,
// and the per-expert scale checks an MoE layer needs beyond a dense one. docs/inference.md
// ("Mixture-of-experts checkpoints") has the rules and the source files they were read from.
#pragma once

#include <string>
#include <vector>

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// The modules (full names, the layer's own included) whose weights ModelOpt quantises under one
// shared amax with `module` under scheme `s`; empty where the layer keeps its own amax.
std::vector<std::string> modelopt_amax_group(const std::string& module, Scheme s);

// Notes on the scales of the experts of every MoE block (per-tensor weight scale or NVFP4 global
// scale differing between an expert's gate and up projection, input scales differing between
// experts of one projection). Reads only one-element scale tensors.
std::vector<Finding> expert_scale_notes(const Folder& F, const std::vector<Layer>& layers);

}  // namespace fp8kit::checkpoint::detail
