// KV / attention scale names: what vLLM, SGLang and TensorRT-LLM do with each one found (and
// with the ones expected but missing), and the affine KV bias checks. kv_names.cpp.
#pragma once

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// Appends one KvScale per KV / attention tensor (and per missing k/v scale) to R.kv, and the
// findings (failed or notes) to R.findings.
void check_kv_names(const Folder& F, Report& R);

}  // namespace fp8kit::checkpoint::detail
