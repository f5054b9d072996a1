// Comparison of a simulated optimizer (dequantized states and weights) with its FP32 reference,
// shared by MsampAdam and TeFusedAdam (fp8kit/simulate.hpp, AdamReport).
#pragma once

#include <vector>

#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {

// Fills everything but steps, m_scale and v_scale.
AdamReport compare_with_fp32(const std::vector<float>& m, const std::vector<float>& v, const std::vector<float>& w,
                             const std::vector<float>& ref_m, const std::vector<float>& ref_v,
                             const std::vector<float>& ref_w, const std::vector<float>& w0);

}  // namespace fp8kit::simulate
