// The scales ModelOpt gives every quantised linear (input_scale; pre_quant_scale under
// SmoothQuant) and the ones it gives alike to linears reading one input (q/k/v, gate/up; a
// TensorRT-LLM checkpoint's mlp.fc and mlp.gate). sibling_scales.cpp.
#pragma once

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// Appends to R.findings a failure per layer of R.layers without the input_scale (or SmoothQuant
// pre_quant_scale) its sibling layers of the same scheme carry, and per shared-input group whose
// members carry different input_scale or pre_quant_scale bytes. ModelOpt checkpoints only.
void check_sibling_scales(const Folder& F, Report& R);

}  // namespace fp8kit::checkpoint::detail
