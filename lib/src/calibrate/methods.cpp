// The calibrators, transcribed from the libraries' source (docs/inference.md, "Calibration"):
//   ModelOpt 0.47.0: modelopt/torch/quantization/calib/max.py (MaxCalibrator),
//     calib/mse.py (MseCalibrator), calib/histogram.py (HistogramCalibrator, percentile),
//     model_calib.py (_mse_quant_func), tensor_quant.py
//     (_fp8_eager), nn/modules/tensor_quantizer.py (amax buffer, export_amax),
//     export/quant_utils.py (get_scaling_factor).
//   llm-compressor 0.14.0.1: llmcompressor/observers/min_max.py, mse.py, mse_quant.py
//     (_grid_search_mse, eager path), helpers.py (lerp); compressed-tensors 0.19.0
//     quantization/utils/helpers.py (calculate_qparams), lifecycle/forward_helpers.py
//     (_quantize_dequantize), quant_args.py (round_to_quantized_type_args).
//   torch 2.15's CPU kernels where the result depends on them: aten/src/ATen/native/cpu/
//     RangeFactoriesKernel.cpp (linspace, arange), HistogramKernel.cpp (histc).
// torch evaluates bfloat16 elementwise ops in float32 and rounds each result to bfloat16 (RNE);
// `to_dtype` below is that rounding. This file is built without FP contraction, so every
// float32 expression rounds as written (fused multiply-adds only where written: std::fma).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>

#include "fp8kit/calibrate.hpp"
#include "fp8kit/convert/names.hpp"
#include "fp8kit/emu/formats.hpp"
#include "convert/float_bits.hpp"

namespace fp8kit::calibrate {
namespace {

std::uint32_t bits(float f) { return fp8kit::detail::bits_of(f); }
float from_bits(std::uint32_t b) { return fp8kit::detail::float_of(b); }
float to_dtype(float f, DType d) { return d == DType::bf16 ? fp8kit::detail::round_to_bf16(f) : f; }
// float32 -> float8_e4m3fn -> float32 (torch's cast: round to nearest even; inputs are clamped
// to +-448 first by every caller here, so saturation never decides).
float e4m3_round(float v) {
    const auto code = emu::encode(Format::e4m3, Wide::f32, bits(v), emu::kRneSaturate);
    return from_bits(static_cast<std::uint32_t>(emu::decode(Format::e4m3, Wide::f32, code)));
}
float clamp448(float v) { return std::isnan(v) ? v : std::min(448.0f, std::max(-448.0f, v)); }

void require(const std::vector<Batch>& batches, Method m) {
    if (batches.empty()) throw CalibrateError(std::string(name(m)) + ": no calibration batch");
    for (const auto& b : batches)
        if (b.empty()) throw CalibrateError(std::string(name(m)) + ": an empty calibration batch");
}

// ModelOpt reduce_amax (utils/core_utils.py): max(|max(x)|, |min(x)|), in the input dtype
// (exact: a max of values of that dtype). NaN propagates (torch.max does).
float batch_amax(const Batch& b) {
    float hi = -std::numeric_limits<float>::infinity(), lo = std::numeric_limits<float>::infinity();
    for (float v : b) {
        if (std::isnan(v)) return v;
        hi = std::max(hi, v);
        lo = std::min(lo, v);
    }
    return std::max(std::fabs(hi), std::fabs(lo));
}

// MaxCalibrator.collect + compute_amax: the running torch.max of the batch amaxes; collect
// asserts that no amax is NaN or inf.
float modelopt_amax(const std::vector<Batch>& batches) {
    float amax = 0;
    for (std::size_t i = 0; i < batches.size(); ++i) {
        const float a = batch_amax(batches[i]);
        if (!std::isfinite(a))
            throw CalibrateError("modelopt max: batch " + std::to_string(i) +
                                 " has a NaN or infinite amax (MaxCalibrator asserts on it)");
        amax = i == 0 ? a : std::max(amax, a);
    }
    return amax;
}

// export_amax + get_scaling_factor: zero or NaN amax -> maxbound (448); clamp to
// [finfo.tiny, finfo.max] of the buffer's dtype (bfloat16 and float32 share both ends'
// exponents: tiny 2^-126; the max of bfloat16 is below float32's but a bf16 amax cannot exceed
// it); scale = amax.float() / 448.0 in float32.
float modelopt_scale(float amax) {
    if (amax == 0.0f || std::isnan(amax)) amax = 448.0f;
    amax = std::max(amax, std::numeric_limits<float>::min());
    return amax / 448.0f;
}

// llm-compressor _get_min_max / torch.aminmax over the whole tensor (exact in any dtype).
std::pair<float, float> min_max(const Batch& b) {
    float lo = b[0], hi = b[0];
    for (float v : b) {
        if (std::isnan(v)) return {v, v};
        lo = std::min(lo, v);
        hi = std::max(hi, v);
    }
    return {lo, hi};
}

// compressed-tensors calculate_qparams, FP8 E4M3 symmetric, no global scale, no scale_dtype:
// min <= 0 <= max; max_val_pos = max(|min|, |max|); scale = max_val_pos / (896 / 2) with the
// divisor in the values' dtype (448 exactly); 0 -> finfo(dtype).eps (bfloat16 2^-7, float32 2^-23).
float llmc_scale(float mn, float mx, DType d) {
    mn = std::min(mn, 0.0f);
    mx = std::max(mx, 0.0f);
    const float pos = std::max(std::fabs(mn), std::fabs(mx));
    float s = to_dtype(pos / 448.0f, d);
    if (s == 0.0f) s = d == DType::bf16 ? 0.0078125f : std::numeric_limits<float>::epsilon();
    return s;
}

// llm-compressor helpers.lerp: (start * (1.0 - w)) + (end * w), each op rounded to the dtype;
// the Python scalars enter torch's CPU kernels as float32 (0.99f, 0.01f).
float lerp(float start, float end, float w, DType d) {
    const float a = to_dtype(start * static_cast<float>(1.0 - static_cast<double>(w)), d);
    const float b = to_dtype(end * w, d);
    return to_dtype(a + b, d);
}

// compressed-tensors _quantize_dequantize for FP8 with a zero zero-point, in the dtype d:
// scaled = x / s; + 0; clamp(+-448); to e4m3 and back; * s.
float llmc_fake_quant(float x, float s, DType d) {
    float scaled = to_dtype(x / s, d);
    scaled = to_dtype(scaled + 0.0f, d);
    const float q = e4m3_round(clamp448(scaled));
    return to_dtype(q * s, d);
}

// _calculate_error: sum(|q - x| ** norm) over the tensor, norm = 2.4 entering torch.pow as the
// dtype (bfloat16 2.40625). The sum is torch's float32 reduction rounded to the dtype; here it
// is a binary64 sum rounded to float32 then to the dtype (the one order-dependent step: see
// docs/inference.md for the tolerance this implies).
float llmc_error(const Batch& b, float s, DType d) {
    const float norm = to_dtype(2.4f, d);
    double sum = 0;
    for (float x : b) {
        const float diff = std::fabs(to_dtype(llmc_fake_quant(x, s, d) - x, d));
        sum += static_cast<double>(
            to_dtype(static_cast<float>(std::pow(static_cast<double>(diff), static_cast<double>(norm))), d));
    }
    return to_dtype(static_cast<float>(sum), d);
}

// _grid_search_mse (eager): p = 1 - i/grid for i < int(maxshrink * grid) = 20; shrunk min/max
// in the dtype; keep the first strictly smaller error; stop after `patience` (5) steps without
// improvement. Returns the chosen (min, max) and the step.
struct Shrunk {
    float mn, mx;
    int step;
};
Shrunk llmc_grid_search(const Batch& b, DType d) {
    const auto [mn, mx] = min_max(b);
    const double grid = 100.0, maxshrink = 0.20;
    const int total = static_cast<int>(maxshrink * grid), patience = 5;
    float best = d == DType::bf16 ? from_bits(0x7F7F0000u) : std::numeric_limits<float>::max();
    Shrunk out{mn, mx, 0};
    int no_improve = 0;
    for (int i = 0; i < total; ++i) {
        const float p = static_cast<float>(1.0 - i / grid);
        const float smn = to_dtype(mn * p, d), smx = to_dtype(mx * p, d);
        const float err = llmc_error(b, llmc_scale(smn, smx, d), d);
        if (err < best) {
            best = err;
            out = {smn, smx, i};
            no_improve = 0;
        } else if (++no_improve >= patience) {
            break;
        }
    }
    return out;
}

// _grid_search_mse over several groups at once (per head: strategy attn_head): each group keeps
// its own best error and (min, max), but the patience counter is shared: `if torch.any(improved)`
// resets it, so the search stops only when no group improved for 5 steps
// (llmcompressor/observers/mse_quant.py, eager path).
std::vector<Shrunk> llmc_grid_search_groups(const std::vector<const Batch*>& groups, DType d) {
    const double grid = 100.0, maxshrink = 0.20;
    const int total = static_cast<int>(maxshrink * grid), patience = 5;
    const float worst = d == DType::bf16 ? from_bits(0x7F7F0000u) : std::numeric_limits<float>::max();
    std::vector<float> best(groups.size(), worst), mn(groups.size()), mx(groups.size());
    std::vector<Shrunk> out(groups.size());
    for (std::size_t g = 0; g < groups.size(); ++g) {
        std::tie(mn[g], mx[g]) = min_max(*groups[g]);
        out[g] = {mn[g], mx[g], 0};
    }
    int no_improve = 0;
    for (int i = 0; i < total; ++i) {
        const float p = static_cast<float>(1.0 - i / grid);
        bool any = false;
        for (std::size_t g = 0; g < groups.size(); ++g) {
            const float smn = to_dtype(mn[g] * p, d), smx = to_dtype(mx[g] * p, d);
            const float err = llmc_error(*groups[g], llmc_scale(smn, smx, d), d);
            if (err < best[g]) {
                best[g] = err;
                out[g] = {smn, smx, i};
                any = true;
            }
        }
        if (any)
            no_improve = 0;
        else if (++no_improve >= patience)
            break;
    }
    return out;
}

Scale llmc_calibrate(Method m, const std::vector<Batch>& batches, DType d) {
    float mn = 0, mx = 0;
    int step = -1;
    for (std::size_t i = 0; i < batches.size(); ++i) {
        float bmn, bmx;
        if (m == Method::llmc_mse) {
            const Shrunk s = llmc_grid_search(batches[i], d);
            bmn = s.mn, bmx = s.mx, step = s.step;
        } else {
            std::tie(bmn, bmx) = min_max(batches[i]);
        }
        if (i == 0 || m == Method::llmc_memoryless_minmax) {
            mn = bmn, mx = bmx;
        } else if (m == Method::llmc_static_minmax) {
            mn = std::min(bmn, mn), mx = std::max(bmx, mx);
        } else {  // minmax, mse: moving average, averaging_constant 0.01
            mn = lerp(mn, bmn, 0.01f, d), mx = lerp(mx, bmx, 0.01f, d);
        }
    }
    Scale s;
    s.value = llmc_scale(mn, mx, d);
    s.dtype = d == DType::bf16 ? "bfloat16" : "float32";
    s.amax = std::max(std::fabs(std::min(mn, 0.0f)), std::fabs(std::max(mx, 0.0f)));
    s.candidate = m == Method::llmc_mse ? step : -1;  // the last batch's shrink step
    return s;
}

// MseCalibrator: initial amax = the max-calibrated _amax (dtype of the input); for each batch
// (as float32) and candidate c: loss[c] += sum((x - fq(x, amax * c))^2) (F.mse_loss then
// reduce_sum, float32; binary64 here, rounded to float32 per batch); argmin (first minimum);
// amax = initial * c, loaded into the quantizer's _amax buffer (the input dtype: rounded).
// With an axis (`axis` true: one call per channel or head) `_compute_candidate_amax` multiplies
// the [1, .., C, .., 1] amax buffer by a 0-dim float32 candidate: torch's type promotion lets a
// 0-dim tensor not raise a dimensioned one's dtype, so the candidate amax is rounded to the
// buffer's dtype (bfloat16 for a bfloat16 model) before the fake quantisation. Per tensor both
// are 0-dim and the product stays float32. The losses are per slice (reduce_sum over the other
// axes), the argmin per slice, and the final initial * c_best (a dimensioned float32 candidate
// tensor: float32) is loaded into the buffer as per tensor.
Scale modelopt_mse(const std::vector<Batch>& batches, DType d, bool axis) {
    const float initial = modelopt_amax(batches);
    const auto cands = modelopt_mse_candidates();
    std::vector<float> loss(cands.size(), 0.0f);
    for (std::size_t bi = 0; bi < batches.size(); ++bi)
        for (std::size_t c = 0; c < cands.size(); ++c) {
            const float amax = axis ? to_dtype(initial * cands[c], d) : initial * cands[c];
            double sum = 0;
            for (float x : batches[bi]) {
                const float e = x - modelopt_fp8_fake_quant(x, amax);
                sum += static_cast<double>(e * e);
            }
            loss[c] = bi == 0 ? static_cast<float>(sum) : loss[c] + static_cast<float>(sum);
        }
    std::size_t best = 0;
    for (std::size_t c = 1; c < loss.size(); ++c)
        if (loss[c] < loss[best] || (std::isnan(loss[best]) && !std::isnan(loss[c]))) best = c;
    Scale s;
    s.amax = to_dtype(initial * cands[best], d);
    s.value = modelopt_scale(s.amax);
    s.dtype = "float32";
    s.candidate = static_cast<int>(best);
    return s;
}

// torch.linspace(0, end, n) in float32 (RangeFactoriesKernel.cpp: fused multiply-add per element).
std::vector<float> linspace0(float end, int n) {
    const float step = end / static_cast<float>(n - 1);
    std::vector<float> v(n);
    for (int i = 0; i < n; ++i)
        v[i] = i < n / 2 ? std::fma(step, static_cast<float>(i), 0.0f)
                         : std::fma(-step, static_cast<float>(n - 1 - i), end);
    return v;
}

// torch.arange(0, end, step) in float32 on the CPU (RangeFactoriesKernel.cpp arange_kernel):
// size ceil((end - 0) / step) in binary64; the accumulation type is binary64; vectorised in
// blocks of 8 lanes (Vectorized<float>::size() of the kernel torch 2.15 ran, the same under
// ATEN_CPU_CAPABILITY=default, avx2 and the dev VM's avx512): block base = float(step * idx),
// lane k = float(base + k * step) in binary64; the tail after the last whole pair of blocks
// element by element, float(step * i). Checked against torch.arange on all 5171 edges of a grown
// histogram (16 lanes or none differ from torch on about 1 in 5 of them).
std::vector<float> arange0(float end, float step, int lanes = 8) {
    const auto n = static_cast<std::size_t>(std::ceil(static_cast<double>(end) / static_cast<double>(step)));
    const double st = step;
    std::vector<float> v(n);
    std::size_t idx = 0;
    while (idx + 2 * static_cast<std::size_t>(lanes) <= n)  // cpu_serial_kernel_vec: two vectors a round
        for (int half = 0; half < 2; ++half) {
            const float base = static_cast<float>(st * static_cast<double>(idx));
            for (int k = 0; k < lanes; ++k) v[idx + k] = static_cast<float>(static_cast<double>(base) + k * st);
            idx += static_cast<std::size_t>(lanes);
        }
    for (; idx < n; ++idx) v[idx] = static_cast<float>(st * static_cast<double>(idx));
    return v;
}

// torch.histc(x, bins, min=0, max=hi) on the CPU (HistogramKernel.cpp, linear interpolation):
// elements outside [0, hi] and NaN are skipped; bin = int64((x - 0) * bins / (hi - 0)) in
// float32, the right edge in the last bin. hi == 0: the range becomes [-1, 1] (histc widens an
// empty range by 1 on each side).
void histc_add(std::vector<float>& hist, const std::vector<float>& x, float hi) {
    float lo = 0.0f;
    if (lo == hi) lo -= 1.0f, hi += 1.0f;
    const auto bins = static_cast<std::int64_t>(hist.size());
    for (float e : x) {
        if (!(e >= lo && e <= hi)) continue;
        auto pos = static_cast<std::int64_t>((e - lo) * static_cast<float>(bins) / (hi - lo));
        if (pos == bins) pos -= 1;
        hist[static_cast<std::size_t>(pos)] += 1.0f;
    }
}

// HistogramCalibrator.collect (calib/histogram.py, torch_hist=True): |x| as float32; the first
// batch: 2048 bins over [0, max], edges linspace(0, max, 2049); a later batch whose max exceeds
// the last edge: width = edges[1] - edges[0], bins = ceil(max / width), edges = arange(0, max +
// width, width); its histc over [0, last edge] with the old counts added to the first bins.
// compute_amax("percentile", 99.99): cdf = cumsum(hist / total) in binary64, the first edge
// whose cdf >= 0.9999 (np.searchsorted).
Scale modelopt_percentile(const std::vector<Batch>& batches, double percentile) {
    std::vector<float> hist, edges;
    int num_bins = 2048;
    for (const auto& b : batches) {
        std::vector<float> x(b.size());
        float xmax = 0;
        for (std::size_t i = 0; i < b.size(); ++i) {
            x[i] = std::fabs(b[i]);
            xmax = i == 0 ? x[i] : (std::isnan(x[i]) || std::isnan(xmax) ? NAN : std::max(xmax, x[i]));
        }
        if (edges.empty()) {
            hist.assign(static_cast<std::size_t>(num_bins), 0.0f);
            histc_add(hist, x, xmax);
            edges = linspace0(xmax, num_bins + 1);
            continue;
        }
        if (xmax > edges.back()) {
            const float width = edges[1] - edges[0];
            num_bins = static_cast<int>(std::ceil(xmax / width));
            edges = arange0(xmax + width, width);
        }
        std::vector<float> h(static_cast<std::size_t>(num_bins), 0.0f);
        histc_add(h, x, edges.back());
        for (std::size_t i = 0; i < hist.size() && i < h.size(); ++i) h[i] += hist[i];
        hist = std::move(h);
    }
    std::int64_t total = 0;
    for (float c : hist) total += static_cast<std::int64_t>(c);
    const double q = percentile / 100.0;
    double cdf = 0;
    std::size_t idx = hist.size();
    for (std::size_t i = 0; i < hist.size(); ++i) {
        cdf += static_cast<double>(static_cast<std::int64_t>(hist[i])) / static_cast<double>(total);
        if (cdf >= q) {
            idx = i;
            break;
        }
    }
    if (idx >= edges.size()) throw CalibrateError("modelopt percentile: the histogram holds no finite value");
    Scale s;
    s.amax = edges[idx];
    s.value = modelopt_scale(s.amax);
    s.dtype = "float32";
    return s;
}

}  // namespace

std::vector<float> modelopt_mse_candidates() {
    // num_steps = ceil((4.0 - 0.25) / 0.1) + 1 = 39 (binary64: 37.5 -> 38)
    const int n = static_cast<int>(std::ceil((4.0 - 0.25) / 0.1)) + 1;
    const float start = 0.25f, end = 4.0f, step = (end - start) / static_cast<float>(n - 1);
    std::vector<float> c(n);
    for (int i = 0; i < n; ++i)
        c[i] = i < n / 2 ? std::fma(step, static_cast<float>(i), start)
                         : std::fma(-step, static_cast<float>(n - 1 - i), end);
    return c;
}

float modelopt_fp8_fake_quant(float x, float amax) {
    // _fp8_eager: amax <= 2^-24 -> 1; scale = 448.0 / amax, which torch evaluates as
    // amax.reciprocal() * 448 (Tensor.__rdiv__); scale_inv = 1 / scale (reciprocal again).
    const float safe = amax <= 1.0f / 16777216.0f ? 1.0f : amax;
    const float scale = (1.0f / safe) * 448.0f;
    const float scale_inv = 1.0f / scale;
    return e4m3_round(clamp448(x * scale)) * scale_inv;
}

Scale calibrate(Method m, const std::vector<Batch>& batches, DType dtype) {
    require(batches, m);
    switch (m) {
        case Method::modelopt_max: {
            Scale s;
            s.amax = modelopt_amax(batches);
            s.value = modelopt_scale(s.amax);
            s.dtype = "float32";
            return s;
        }
        case Method::modelopt_mse: return modelopt_mse(batches, dtype, false);
        case Method::modelopt_percentile: return modelopt_percentile(batches, 99.99);
        default: return llmc_calibrate(m, batches, dtype);
    }
}

std::vector<Scale> calibrate_groups(Method m, const std::vector<std::vector<Batch>>& groups, DType dtype) {
    std::vector<Scale> out;
    if (m == Method::modelopt_mse) {  // MseCalibrator with an axis: per slice, bf16 candidates
        for (const auto& g : groups) {
            require(g, m);
            out.push_back(modelopt_mse(g, dtype, true));
        }
        return out;
    }
    if (m != Method::llmc_mse) {  // every other method treats each group on its own
        for (const auto& g : groups) out.push_back(calibrate(m, g, dtype));
        return out;
    }
    for (const auto& g : groups) require(g, m);
    const std::size_t n = groups.size(), batches = groups.front().size();
    std::vector<float> mn(n, 0.0f), mx(n, 0.0f);
    std::vector<int> step(n, -1);
    for (std::size_t i = 0; i < batches; ++i) {  // the observer's call i: one grid search over all groups
        std::vector<const Batch*> batch(n);
        for (std::size_t g = 0; g < n; ++g) batch[g] = &groups[g][i];
        const auto shrunk = llmc_grid_search_groups(batch, dtype);
        for (std::size_t g = 0; g < n; ++g) {
            step[g] = shrunk[g].step;
            if (i == 0)
                mn[g] = shrunk[g].mn, mx[g] = shrunk[g].mx;
            else
                mn[g] = lerp(mn[g], shrunk[g].mn, 0.01f, dtype), mx[g] = lerp(mx[g], shrunk[g].mx, 0.01f, dtype);
        }
    }
    for (std::size_t g = 0; g < n; ++g) {
        Scale s;
        s.value = llmc_scale(mn[g], mx[g], dtype);
        s.dtype = dtype == DType::bf16 ? "bfloat16" : "float32";
        s.amax = std::max(std::fabs(std::min(mn[g], 0.0f)), std::fabs(std::max(mx[g], 0.0f)));
        s.candidate = step[g];
        out.push_back(s);
    }
    return out;
}

}  // namespace fp8kit::calibrate
