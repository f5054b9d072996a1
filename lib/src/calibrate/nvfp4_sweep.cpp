// ModelOpt 0.47.0's NVFP4 FP8-scale sweep for static NVFP4 weights (docs/inference.md, "NVFP4
// weight scale sweep"): mtq.quantize with algorithm {"method": "mse", "fp8_scale_sweep": True}
// (NVFP4_W4A4_WEIGHT_MSE_FP8_SWEEP_CFG) runs, for each static NVFP4 weight quantizer,
//   model_calib.py mse_calibrate -> _mse_calibrate_weights -> _make_weight_mse_calibrator
//     -> calib/mse.py NVFP4MSECalibrator (reference sweep, MseCalibrator.collect/compute_amax),
//   with the quantizer's fake quantisation nn/modules/tensor_quantizer.py
//     StaticBlockScaleQuantizer._fake_quantize -> kernels/quantization/gemm/fp4_kernel.py
//     static_blockwise_fp4_fake_quant (compute_fp4_scales, then common/nvfp4_quant.py
//     nvfp4_scalar_quant per element),
//   and the export qtensor/nvfp4_tensor.py get_weights_scaling_factor_from_quantizer (static
//     path, _cast_per_block_scale_to_fp8) and get_weights_scaling_factor_2_from_quantizer.
// Arithmetic as torch's CPU kernels evaluate it (float32; `448.0 / t` is Tensor.__rdiv__,
// t.reciprocal() * 448). Built without FP contraction (lib/CMakeLists.txt).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

#include "fp8kit/calibrate.hpp"
#include "fp8kit/convert/names.hpp"
#include "fp8kit/emu/formats.hpp"
#include "convert/float_bits.hpp"
#include "producers/modelopt_nvfp4.hpp"

namespace fp8kit::calibrate {
namespace {

constexpr std::size_t kBlock = 16;

std::uint8_t e4m3_code(float v) {
    return static_cast<std::uint8_t>(
        emu::encode(Format::e4m3, Wide::f32, fp8kit::detail::bits_of(v), emu::kRneSaturate));
}
float e4m3_value(std::uint8_t code) { return fp8kit::detail::decode_f32(Format::e4m3, code); }

// _fp8_scale_candidates.py fp8_scale_candidates: the E4M3 codes 0..127 as float32, the finite
// positive ones (codes 1..126) divided by 448.0 (float32 true division).
std::array<float, 126> candidates() {
    std::array<float, 126> c{};
    for (int k = 1; k <= 126; ++k)
        c[static_cast<std::size_t>(k - 1)] = e4m3_value(static_cast<std::uint8_t>(k)) / 448.0f;
    return c;
}

// fp4_kernel.py compute_fp4_scales(amax, global_amax, quantize_block_scales=True, 448):
// scale = amax / 6.0; scale_fp8_quant_amax = global_amax * (448 / 448) / 6.0; scale =
// scaled_e4m3_impl(scale, scale_fp8_quant_amax), on the CPU tensor_quant.py _fp8_eager:
// safe = 1 if <= 2^-24; s8 = 448.0 / safe = reciprocal(safe) * 448; inv = 1 / s8 = reciprocal;
// e4m3(clamp(scale * s8, +-448)) * inv.
float block_scale(float amax, float global_amax) {
    const float scale = amax / 6.0f;
    float fp8_amax = global_amax * 1.0f / 6.0f;
    if (fp8_amax <= 1.0f / 16777216.0f) fp8_amax = 1.0f;
    const float s8 = (1.0f / fp8_amax) * 448.0f;
    const float inv = 1.0f / s8;
    const float scaled = std::min(448.0f, std::max(-448.0f, scale * s8));
    return e4m3_value(e4m3_code(scaled)) * inv;
}

// nvfp4_quant.py fp4_round_magnitude: E2M1's decision boundaries (<= at 0.25, 1.25, 2.5, 5.0;
// < at 0.75, 1.75, 3.5).
float fp4_round_magnitude(float a) {
    if (a <= 0.25f) return 0.0f;
    if (a < 0.75f) return 0.5f;
    if (a <= 1.25f) return 1.0f;
    if (a < 1.75f) return 1.5f;
    if (a <= 2.5f) return 2.0f;
    if (a < 3.5f) return 3.0f;
    if (a <= 5.0f) return 4.0f;
    return 6.0f;
}

// nvfp4_scalar_quant: a zero scale gives 0; a NaN or infinite one is replaced by 1; |x| / scale
// rounded to E2M1, times the scale, the sign of x (x >= 0 keeps it positive).
float fp4_fake_quant(float x, float scale) {
    if (scale == 0.0f) return 0.0f;
    const float safe = std::isfinite(scale) ? scale : 1.0f;
    const float r = fp4_round_magnitude(std::fabs(x) / safe) * safe;
    return x >= 0.0f ? r : -r;
}

}  // namespace

Nvfp4Sweep nvfp4_scale_sweep(const std::vector<float>& w, std::size_t cols) {
    if (cols == 0 || cols % kBlock != 0 || w.size() % cols != 0)
        throw CalibrateError("nvfp4 scale sweep: the last dimension (" + std::to_string(cols) +
                             ") is not a multiple of NVFP4's block of 16");
    Nvfp4Sweep r;
    // max_calibrate: the global amax is the max |w| (exact in any dtype); MaxCalibrator asserts
    // on a NaN or infinite amax.
    for (float v : w) {
        if (!std::isfinite(v)) throw CalibrateError("nvfp4 scale sweep: the weight holds a NaN or infinite value");
        r.global_amax = std::max(r.global_amax, std::fabs(v));
    }
    const auto cand = candidates();
    // NVFP4MSECalibrator._compute_candidate_amax: ones(float32) * (global_amax * candidate): every
    // block gets the same candidate amax, hence the same fake-quant block scale.
    std::array<float, 126> amax{}, bscale{};
    for (std::size_t k = 0; k < cand.size(); ++k) {
        amax[k] = 1.0f * (r.global_amax * cand[k]);
        bscale[k] = block_scale(amax[k], r.global_amax);
    }
    const std::size_t blocks = w.size() / kBlock;
    r.weight_scale.resize(blocks);
    r.amax.resize(blocks);
    r.candidate.resize(blocks);
    const float max_scale = r.global_amax / 6.0f;  // per_block_scale_max
    for (std::size_t b = 0; b < blocks; ++b) {
        const float* x = w.data() + b * kBlock;
        // MseCalibrator.collect: loss = reduce_sum(F.mse_loss(x, xq, reduction="none")) over the
        // block (torch's float32 sum of 16 squares; binary64 here, rounded to float32); argmin
        // (torch.argmin: the first minimum) over the 126 candidates.
        std::size_t best = 0;
        float best_loss = 0;
        for (std::size_t k = 0; k < cand.size(); ++k) {
            double sum = 0;
            for (std::size_t i = 0; i < kBlock; ++i) {
                const float e = x[i] - fp4_fake_quant(x[i], bscale[k]);
                sum += static_cast<double>(e * e);
            }
            const float loss = static_cast<float>(sum);
            if (k == 0 || loss < best_loss) best = k, best_loss = loss;
        }
        r.candidate[b] = static_cast<int>(best);
        r.amax[b] = amax[best];
        // get_weights_scaling_factor_from_quantizer (static): per_block_scale = amax / 6.0 (0 ->
        // 1.0); _cast_per_block_scale_to_fp8: scale * 448.0 / per_block_scale_max, clamp to
        // [2^-9, 448], cast to float8_e4m3fn.
        float s = amax[best] / 6.0f;
        if (s == 0.0f) s = 1.0f;
        const float v = s * 448.0f / max_scale;
        r.weight_scale[b] = producers::modelopt_e4m3_block_code(v);
    }
    // get_weights_scaling_factor_2_from_quantizer: global_amax.float() / (6.0 * 448.0)
    r.weight_scale_2 = producers::modelopt_nvfp4_scale_2(r.global_amax);
    return r;
}

std::vector<std::uint8_t> nvfp4_max_scales(const std::vector<float>& w, float weight_scale_2) {
    std::vector<std::uint8_t> out(w.size() / kBlock);
    for (std::size_t b = 0; b < out.size(); ++b) {
        float amax = 0;
        for (std::size_t i = 0; i < kBlock; ++i) amax = std::max(amax, std::fabs(w[b * kBlock + i]));
        out[b] = producers::modelopt_nvfp4_block_code(amax, weight_scale_2);
    }
    return out;
}

double nvfp4_sqnr(const std::vector<float>& w, const std::vector<std::uint8_t>& codes, float weight_scale_2) {
    double sig = 0, err = 0;
    for (std::size_t i = 0; i < w.size(); ++i) {
        const double scale = static_cast<double>(e4m3_value(codes[i / kBlock])) * weight_scale_2;
        const double v = scale > 0 ? static_cast<double>(w[i]) / scale : 0.0;
        const double q = detail::round_trip_f64(Format::e2m1, v, emu::kRneSaturate);
        const double d = q * scale - w[i];
        sig += static_cast<double>(w[i]) * w[i];
        err += d * d;
    }
    return err == 0 ? HUGE_VAL : 10.0 * std::log10(sig / err);
}

}  // namespace fp8kit::calibrate
