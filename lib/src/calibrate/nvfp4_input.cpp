// The activation scale each producer stores for an NVFP4 (W4A4) layer, from the amax its own
// NVFP4 calibration finds (docs/inference.md, "NVFP4 input scales"):
//   ModelOpt 0.47.0, HF export (export/unified_export_hf.py -> quant_utils.py
//     get_activation_scaling_factor -> qtensor/nvfp4_tensor.py
//     NVFP4QTensor.get_activation_scaling_factor): `input_scale` = amax.float() /
//     (quantizer.maxbound * E4M3_MAX) = amax / (6.0 * 448.0), F32 []; amax from export_amax
//     (nn/modules/tensor_quantizer.py _sanitize_export_amax: zero or NaN -> maxbound 6.0); the
//     export asserts the scale is positive. NVFP4_DEFAULT_CFG calibrates with "max".
//   llm-compressor 0.14.0.1 with compressed-tensors 0.19.0: the NVFP4 preset's activations
//     (quantization/quant_scheme.py NVFP4: tensor_group, dynamic "local", observer static_minmax)
//     store only `input_global_scale` (modifiers/quantization/calibration.py update_qparams skips
//     scale and zero point for dynamic ones), F32 [1] (lifecycle/initialize.py), computed by
//     observers/base.py get_global_scale -> generate_gparam(-absmax, absmax)
//     (quantization/utils/helpers.py): 448 * 6 / clamp(absmax, min=tiny) in the statistics' dtype
//     (the activation's), where Python's `2688.0 / tensor` is torch's Tensor.__rdiv__:
//     tensor.reciprocal() * 2688, each op rounded to the dtype; nan_to_num(NaN, +-inf -> 1.0);
//     .to(float32).
// Built without FP contraction (lib/CMakeLists.txt): each float32 expression rounds as written.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "convert/float_bits.hpp"
#include "fp8kit/calibrate.hpp"
#include "producers/modelopt_nvfp4.hpp"

namespace fp8kit::calibrate {

const char* name(Scheme s) { return s == Scheme::fp8 ? "fp8" : "nvfp4"; }

std::optional<Scheme> parse_scheme(std::string_view s) {
    if (s == "fp8") return Scheme::fp8;
    if (s == "nvfp4") return Scheme::nvfp4;
    return std::nullopt;
}

void require_scheme(Method m, Scheme s) {
    if (s == Scheme::fp8 || m == Method::modelopt_nvfp4_sweep || m == Method::modelopt_max ||
        m == Method::llmc_static_minmax || m == Method::llmc_memoryless_minmax)
        return;
    const std::string head = std::string("--scheme nvfp4 with ") + name(m) + ": ";
    const std::string modelopt_rule =
        "ModelOpt's NVFP4 preset calibrates activations with max (NVFP4_DEFAULT_CFG, \"algorithm\": \"max\"); ";
    if (m == Method::modelopt_mse)
        throw CalibrateError(
            head + modelopt_rule +
            "modelopt_mse scores its candidates by FP8 fake quantisation, not NVFP4's. Use modelopt_max");
    if (m == Method::modelopt_percentile)
        throw CalibrateError(
            head + modelopt_rule +
            "no preset of ModelOpt 0.47.0 (modelopt_recipes/configs/ptq/presets) uses the histogram calibrator. Use "
            "modelopt_max");
    if (m == Method::llmc_minmax)
        throw CalibrateError(head +
                             "under NVFP4's tensor_group strategy llm-compressor's moving average runs per group of 16 "
                             "channels (observers/helpers.py _flatten_activation, min_max.py MinMaxObserver), not "
                             "per tensor as calibrate computes it. Use llmc_static_minmax (the NVFP4 preset's "
                             "observer) or llmc_memoryless_minmax");
    throw CalibrateError(head +
                         "llm-compressor's mse observer searches per group of 16 under NVFP4 (observers/mse.py), "
                         "which calibrate does not replay. Use llmc_static_minmax (the NVFP4 preset's observer)");
}

std::optional<float> modelopt_nvfp4_input_scale(float amax) {
    if (amax == 0.0f || std::isnan(amax)) amax = 6.0f;  // _sanitize_export_amax: maxbound
    const float s = producers::modelopt_nvfp4_scale_2(amax);
    if (!(s > 0.0f)) return std::nullopt;  // below 2^-149 * 2688: the export's assertion fails
    return s;
}

float llmc_nvfp4_input_global_scale(float absmax, DType d) {
    if (std::isnan(absmax)) return 1.0f;  // NaN passes clamp and the division; nan_to_num -> 1.0
    const auto in_dtype = [d](float f) { return d == DType::bf16 ? fp8kit::detail::round_to_bf16(f) : f; };
    const float pos = std::max(absmax, std::numeric_limits<float>::min());  // finfo(bf16 or f32).tiny = 2^-126
    const float g = in_dtype(in_dtype(1.0f / pos) * 2688.0f);
    return std::isinf(g) ? 1.0f : g;
}

}  // namespace fp8kit::calibrate
