// Activation calibration as the quantisation libraries define it (issue 28, item 3):
// replay dumped activations through ModelOpt's and llm-compressor's calibrators, per tensor,
// FP8 E4M3, and report the static scale each would write (`input_scale`, in that tool's dtype and
// convention) plus what that scale does to held-out data (clipping, underflow, SQNR).
// Every formula and its source file: docs/inference.md, "Calibration".
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/io/dump.hpp"

namespace fp8kit::calibrate {

// Bad input (no tensors, a method name, an empty batch): the CLI exits 2.
struct CalibrateError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

enum class Method {
    modelopt_max,            // ModelOpt MaxCalibrator
    modelopt_mse,            // ModelOpt MseCalibrator (amax x 0.25 .. 4.0, 39 candidates)
    modelopt_percentile,     // ModelOpt HistogramCalibrator, 2048 bins, percentile 99.99
    llmc_memoryless_minmax,  // llm-compressor MemorylessMinMaxObserver
    llmc_static_minmax,      // llm-compressor StaticMinMaxObserver
    llmc_minmax,             // llm-compressor MinMaxObserver (moving average 0.01)
    llmc_mse,                // llm-compressor MovingAverageMSEObserver (defaults)
    modelopt_nvfp4_sweep,    // ModelOpt NVFP4MSECalibrator: a static NVFP4 weight's E4M3 block scales
                             // (a weight method: not in all_methods())
};
const char* name(Method m);                              // "modelopt_max", ...
std::optional<Method> parse_method(std::string_view s);  // also "max", "mse", "static_minmax", ...
std::vector<Method> all_methods();
const char* tool(Method m);  // "modelopt" or "llm-compressor"
// A method the libraries name that is not defined for FP8 (ModelOpt's histogram "entropy" and
// "mse"): why, citing the source; nullopt for any other name.
std::optional<std::string> not_offered(std::string_view method);

// The dtype the activations arrive in: it decides the llm-compressor arithmetic (its observers
// compute in the activation's dtype) and ModelOpt's amax buffer dtype.
enum class DType { f32, bf16 };

// One calibration batch (one forward pass: one dump step), as float32 (bfloat16 widened exactly).
using Batch = std::vector<float>;

struct Scale {
    float value = 0;     // the stored scale, widened to float32 exactly
    std::string dtype;   // "float32" (ModelOpt) or "bfloat16" (llm-compressor with bf16 input)
    float amax = 0;      // the calibrated amax (ModelOpt: the quantizer's _amax buffer)
    int candidate = -1;  // mse methods: index of the chosen candidate (ModelOpt: of 39)
};

// The scale `m` computes from `batches`, fed in order, one calibrator call each. Throws
// CalibrateError for no batches or (ModelOpt max, as its assertion) an infinite or NaN amax.
Scale calibrate(Method m, const std::vector<Batch>& batches, DType dtype);

// The scales of several groups calibrated together (per channel / per head: the library's
// calibrator with an axis): each group on its own, except llm-compressor's mse, whose grid search
// shares one patience counter over the groups, and ModelOpt's MseCalibrator, whose candidate amax
// is rounded to the amax buffer's dtype with an axis (docs/inference.md).
std::vector<Scale> calibrate_groups(Method m, const std::vector<std::vector<Batch>>& groups, DType dtype);

// ModelOpt's MseCalibrator candidates: torch.linspace(0.25, 4.0, 39) in float32 as torch's CPU
// kernel computes it (start + step*i for the first half, end - step*(n-1-i) after, each one
// fused multiply-add; bit-identical to torch 2.15 on AVX2 and AVX-512).
std::vector<float> modelopt_mse_candidates();
// ModelOpt's FP8 fake quantisation on the CPU (tensor_quant.py _fp8_eager), float32 in and out.
float modelopt_fp8_fake_quant(float x, float amax);

// What a scale does to data: x / s cast to E4M3 (round to nearest even, saturating at 448, as
// an FP8 GEMM input cast does), decoded and multiplied by s, in binary64.
struct HoldoutStats {
    std::uint64_t elements = 0, nonzero = 0;
    std::uint64_t clipped = 0;    // |x / s| > 448
    std::uint64_t underflow = 0;  // x != 0 whose code is zero
    double sqnr_db = 0;           // 10 log10(sum x^2 / sum (deq - x)^2); +inf when exact
};
HoldoutStats holdout_stats(const std::vector<Batch>& batches, float scale);

// Per tensor, per channel (the last dimension of an activation: ModelOpt's TensorQuantizer with
// axis=-1) or per head (dimension 1 of a [batch, heads, positions, head_dim] Q/K/V tensor:
// llm-compressor's strategy attn_head, ModelOpt's axis=1). A channel or head is calibrated as the
// library does it with that axis: the same method on that slice of every batch.
enum class Granularity { tensor, channel, head };
const char* name(Granularity g);
std::optional<Granularity> parse_granularity(std::string_view s);
// Whether `m` is offered at granularity g (channel: ModelOpt's max and mse; head: ModelOpt's max
// and mse, llm-compressor's four observers, each checked against the library); CalibrateError
// says why not.
void require_granularity(Method m, Granularity g);

// NVFP4 activation headroom under a calibrated amax (lib/src/calibrate/nvfp4_headroom.cpp): the
// global scale ModelOpt derives, amax / (6 * 448), and on the data (blocks of 16 along the last
// dimension, `width`): blocks whose E4M3 block scale would pass 448 (the block saturates) or fall
// below 2^-9 (E4M3's smallest subnormal), and log2(amax / data amax).
struct Nvfp4Headroom {
    float global_scale = 0;
    float data_amax = 0;
    double headroom_binades = 0;  // < 0: the data passes the calibrated amax
    std::uint64_t blocks = 0, blocks_over = 0, blocks_under = 0;
};
Nvfp4Headroom nvfp4_headroom(const std::vector<Batch>& batches, float amax, std::size_t width);

// ModelOpt 0.47.0's FP8-scale sweep for a static NVFP4 weight (lib/src/calibrate/nvfp4_sweep.cpp;
// NVFP4MSECalibrator, the reference sweep, and the export of the chosen scales): `w` row-major,
// `cols` its last dimension (a multiple of 16). For each block of 16 along the last dimension,
// the E4M3 block scale among the 126 positive finite ones that minimises the block's squared
// NVFP4 fake-quantisation error; CalibrateError on a bad shape or a NaN / infinite weight.
struct Nvfp4Sweep {
    float global_amax = 0;                   // max |w| (the quantizer's global_amax)
    float weight_scale_2 = 0;                // global_amax / (6 * 448), float32 (ModelOpt's export)
    std::vector<std::uint8_t> weight_scale;  // E4M3 codes, one per block ([rows, cols / 16])
    std::vector<float> amax;                 // the per-block amax loaded: global_amax * candidate
    std::vector<int> candidate;              // 0..125: E4M3 code candidate + 1, divided by 448
};
Nvfp4Sweep nvfp4_scale_sweep(const std::vector<float>& w, std::size_t cols);
// ModelOpt's block scales without the sweep (nvfp4_tensor.py get_weights_scaling_factor, the
// dynamic export): block amax / (6 * weight_scale_2), 0 -> 1.0, clamped to [2^-9, 448], E4M3.
std::vector<std::uint8_t> nvfp4_max_scales(const std::vector<float>& w, float weight_scale_2);
// SQNR (dB) of w under NVFP4 with E4M3 block codes and weight_scale_2: x / (e4m3(code) *
// weight_scale_2) rounded to E2M1 (nearest even, saturating at 6), times that scale, binary64.
double nvfp4_sqnr(const std::vector<float>& w, const std::vector<std::uint8_t>& codes, float weight_scale_2);

// The sweep of one dump tensor, as `fp8kit calibrate --method modelopt_nvfp4_sweep` reports it.
struct SweepRow {
    std::vector<std::uint64_t> shape;              // [rows, cols / 16] of weight_scale
    std::vector<std::uint8_t> weight_scale;        // E4M3 codes
    double sqnr_db = 0, sqnr_max_db = 0;           // NVFP4 SQNR under the sweep's / the max rule's scales
    std::uint64_t blocks = 0, blocks_changed = 0;  // blocks whose scale differs from the max rule's
};

// A dump calibrated: one row per (tensor, method) (per channel / head: per slice too).
struct Row {
    std::string tensor;           // the dump name without its step component ("model.l0.q_proj/input")
    std::string checkpoint_name;  // "model.l0.q_proj.input_scale"
    Method method{};
    std::int64_t index = -1;  // the channel or head (-1: per tensor)
    Scale scale;
    std::size_t calib_batches = 0, holdout_batches = 0;
    std::vector<std::int64_t> calib_steps, holdout_steps;  // by token: both list every step
    HoldoutStats holdout;                                  // on the held-out batches (empty when none)
    HoldoutStats calib;                                    // on the calibration batches themselves
    Nvfp4Headroom nvfp4;            // NVFP4 under this amax, on the held-out batches (else the calibration ones)
    std::optional<SweepRow> sweep;  // modelopt_nvfp4_sweep: scale = weight_scale_2, amax = global amax
};
struct Options {
    std::vector<std::string> files;
    std::vector<std::string> include;  // fnmatch patterns on tensor names; empty: role activation
    std::vector<Method> methods;
    // Steps held out; nullopt: the last step of each tensor that has two or more.
    std::optional<std::string> holdout_steps;  // "299", "200-", "none"
    // Hold out by sample instead: this fraction of the tokens (rows of the tensor seen as
    // [-1, last dim]) of every step, the last ones; every step then calibrates on the rest.
    std::optional<double> holdout_tokens;
    Granularity granularity = Granularity::tensor;
};
struct Report {
    Granularity granularity = Granularity::tensor;
    std::vector<Row> rows;
    std::vector<std::string> notes;      // files or tensors skipped, and why
    std::vector<dump::Problem> skipped;  // datasets the dump reader skipped on purpose (dump::skipped())
};
Report run(const Options& o);  // throws CalibrateError on bad input

std::string to_json(const Report& r);
std::string to_csv(const Report& r);
// The text of `fp8kit calibrate`: one row per tensor and method (scale, dtype, clipped and
// underflowing shares in percent, SQNR), what they were measured on, then the notes.
void write_text(const Report& r, std::FILE* out);
// The scheme of the layers whose input scales --save writes (lib/src/calibrate/nvfp4_input.cpp;
// docs/inference.md, "NVFP4 input scales"): fp8, E4M3 per tensor (input_scale); nvfp4, W4A4: the
// activation's global scale, as each producer stores it. KV and output scales are FP8 in both.
enum class Scheme { fp8, nvfp4 };
const char* name(Scheme s);
std::optional<Scheme> parse_scheme(std::string_view s);
// Whether --save writes `m`'s scales for scheme s (nvfp4: modelopt_max, llmc_static_minmax,
// llmc_memoryless_minmax; the producers' own NVFP4 calibration); CalibrateError says why not.
void require_scheme(Method m, Scheme s);
// ModelOpt 0.47.0's NVFP4 `input_scale` (F32 []): NVFP4QTensor.get_activation_scaling_factor,
// amax.float() / (6.0 * 448.0) in float32, a zero or NaN amax replaced by maxbound 6.0
// (export_amax). nullopt where it underflows to zero: ModelOpt's export asserts it is positive.
std::optional<float> modelopt_nvfp4_input_scale(float amax);
// compressed-tensors 0.19.0's NVFP4 `input_global_scale` (F32 [1]): generate_gparam(-absmax,
// absmax), 448 * 6 / max(absmax, tiny) evaluated in the activation's dtype as torch does
// (reciprocal, then times 2688, each rounded to the dtype), NaN or infinity -> 1.0, as float32.
float llmc_nvfp4_input_global_scale(float absmax, DType d);

// The scales of one method as a safetensors file, under that tool's checkpoint names and dtypes
// (FP8, ModelOpt: input_scale F32 shape [], amax/448; llm-compressor: input_scale in the activation
// dtype, shape [1]. NVFP4: ModelOpt input_scale F32 [] (modelopt_nvfp4_input_scale);
// llm-compressor input_global_scale F32 [1] (llmc_nvfp4_input_global_scale)).
// Written through io::OutputFile (io/sink.hpp); throws io::OutputError naming --save,
// CalibrateError for a method the scheme does not take or a scale the producer would refuse.
void write_safetensors(const Report& r, Method m, const std::string& path, Scheme scheme = Scheme::fp8);

}  // namespace fp8kit::calibrate
