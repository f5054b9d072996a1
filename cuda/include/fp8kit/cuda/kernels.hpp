// Host API of fp8kit's CUDA kernels, in plain C++ types: including this needs no CUDA headers.
// Device buffers are void* / std::uint8_t* / float* obtained from cudaMalloc (or device_alloc
// below); a stream is a cudaStream_t passed as `Stream` (nullptr = the legacy default stream).
//
// Every code is emu::convert's (emu/include/fp8kit/emu/convert.hpp), the routine the CPU uses:
// computed by it, looked up in a table it filled, or, for profile cuda-satfinite, by the cvt
// instruction that equals it (docs/cuda.md); so GPU codes equal fp8kit::encode_array's bit for
// bit. Every scale rule and the statistics step come from fp8kit::numerics (numerics/), the
// headers lib uses. Definitions shared by all kernels (docs/cuda.md has the long form):
// - Inputs are raw bits of f32, f16 or bf16 (Wide::f64 is rejected: std::invalid_argument).
// - Scaled conversion: y = fl32(x * scale) (one float32 multiply, round to nearest even), then a
//   single conversion of y under `policy`. A NaN input is converted from its own bits (sign and
//   payload kept, as the unscaled conversion does); a NaN made by the multiply (Inf * 0, NaN
//   scale) is the positive quiet NaN 0x7FC00000. With scale == 1 this is exactly encode_array.
// - Stochastic rounding: element i of a call draws emu::stochastic_bits(seed, first_index + i);
//   in the 2-D block kernels i = row * cols + col.
// - amax = max |x| over non-NaN elements (NaN ignored like fmaxf; +-Inf counts), computed with
//   atomicMax on the float bits of |x|; every amax output is overwritten by the call.
// Errors: bad arguments throw std::invalid_argument, CUDA errors std::runtime_error (message
// names the call and cudaGetErrorString). Kernels are asynchronous unless said otherwise.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/emu/formats.hpp"
#include "fp8kit/emu/policy.hpp"
#include "fp8kit/numerics/element_stats.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::cuda {

using emu::Format;
using emu::Policy;
using emu::Wide;
using Stream = void*;  // a cudaStream_t

// ---- device helpers (so tests and tools need no CUDA headers) ------------------------------
// Number of CUDA devices; 0 with the reason in *why when there is none or the driver fails.
int device_count(std::string* why = nullptr);
std::string device_name();
void* device_alloc(std::size_t bytes);
void device_free(void* p);
void copy_to_device(void* dst, const void* src, std::size_t bytes);
void copy_to_host(void* dst, const void* src, std::size_t bytes);
void device_memset(void* p, int value, std::size_t bytes);
void synchronize();

// True for the formats every kernel is built for (e4m3, e5m2, e4m3fnuz, e5m2fnuz and the scale
// format e8m0). The other formats (FP4 e2m1, FP6 e2m3/e3m2, e3m4, e4m3b11fnuz, e4m3ieee) have
// quantize, dequantize, per-tensor delayed and current scaling (with their amax), the statistics
// kernel and the block quantiser of blocks.hpp (has_cast_kernels), computed by emu::convert on the
// device (on sm_90 the emulation is the path: FP4/FP6 cvt needs sm_100); the row-block entry
// points (1x128/128x128/quantize_mx) throw std::invalid_argument naming themselves for them.
bool has_kernels(Format f);
bool has_cast_kernels(Format f);

// ---- element-wise conversion -----------------------------------------------------------------
// out[i] = encode(fl32(in[i] * scale)) (see above). scale = 1 gives encode_array's codes.
void quantize(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy,
              float scale = 1.0f, std::uint64_t seed = 0, std::uint64_t first_index = 0, Stream stream = nullptr);

// out[i] = fl32(decode(in[i]) * scale_inv), written as `to` (f32, f16, bf16): the decode is exact
// in float32, the multiply rounds once in float32, and f16/bf16 outputs round that product once
// more to nearest-even (Inf on overflow). A NaN code gives decode(code) (decode_array's NaN); a
// NaN made by the multiply gives the positive quiet NaN. scale_inv = 1 gives decode_array's bits.
void dequantize(Format from, Wide to, const std::uint8_t* in, void* out, std::size_t n, float scale_inv = 1.0f,
                Stream stream = nullptr);

// The hardware path (sm_89+ cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32): float32 -> E4M3 / E5M2 codes
// of fl32(in[i] * scale), equal to emu's profile cuda-satfinite (nearest-even, saturate-all,
// NaN -> 0x7F). Built only for sm_89+; an older CUDA architecture is a compile error.
void quantize_e4m3_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, float scale = 1.0f,
                                 Stream stream = nullptr);
void quantize_e5m2_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, float scale = 1.0f,
                                 Stream stream = nullptr);

// ---- per-tensor scaling -----------------------------------------------------------------------
// *d_amax = amax(in).
void amax(Wide from, const void* in, std::size_t n, float* d_amax, Stream stream = nullptr);

// Delayed scaling, one pass: out = encode(fl32(x * *d_scale)) and *d_amax = amax(x). d_scale is
// a device pointer (the scale computed from earlier steps' amax history).
void quantize_delayed_scaling(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n,
                              const Policy& policy, const float* d_scale, float* d_amax, std::uint64_t seed = 0,
                              std::uint64_t first_index = 0, Stream stream = nullptr);

// TransformerEngine's compute_scale_from_amax: numerics::te_scale (fmax = the format's largest
// finite value, 448 for E4M3).
struct ScaleOptions {
    bool pow2 = false;
    float epsilon = 0.0f;
};

// Current scaling: pass 1 amax, pass 2 the cast with scale = numerics::te_scale(amax, fmax,
// epsilon, pow2, FLT_MAX), computed on the device. Writes *d_amax, *d_scale and, when not null,
// *d_scale_inv = fl32(1 / scale).
void quantize_current_scaling(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n,
                              const Policy& policy, float* d_amax, float* d_scale, float* d_scale_inv,
                              const ScaleOptions& options = {}, std::uint64_t seed = 0, std::uint64_t first_index = 0,
                              Stream stream = nullptr);

// ---- block scaling (row-major rows x cols, codes row-major like the input) --------------------
// TransformerEngine Float8BlockScaling: per block, scale = numerics::te_scale(block amax, fmax,
// epsilon, pow2, value_for_inf = largest finite value of the input type), codes =
// encode(fl32(x * scale)), and d_scale_inv[block] = fl32(1 / scale).
// 1x128: blocks are 128 consecutive elements of a row; scale_inv is rows x ceil(cols / 128).
// 128x128: tiles; scale_inv is ceil(rows / 128) x ceil(cols / 128). Partial edge blocks use the
// elements that exist. `to` must be one of the four FP8 formats (not E8M0).
void quantize_block_1x128(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                          const Policy& policy, float* d_scale_inv, const ScaleOptions& options = {},
                          std::uint64_t seed = 0, std::uint64_t first_index = 0, Stream stream = nullptr);
void quantize_block_128x128(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                            const Policy& policy, float* d_scale_inv, const ScaleOptions& options = {},
                            std::uint64_t seed = 0, std::uint64_t first_index = 0, Stream stream = nullptr);

// MX (OCP MX v1.0): blocks of 32 consecutive elements of a row, one E8M0 scale code each
// (d_scales: rows x ceil(cols / 32) bytes), by numerics::rule_scale: ocp_floor = mx_code_floor
// (OCP spec section 6.3), round_up = mx_code_roundup (TransformerEngine MXFP8). Elements are
// encode(fl32(x * scale)) with scale = numerics::mx_cast_pair(rule, code).scale: 2^(127 - code),
// except that a round-up block of code 0 casts with 1 (TransformerEngine's exp2f_rcp).
using MxRule = numerics::MxRule;
void quantize_mx(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                 const Policy& policy, MxRule rule, std::uint8_t* d_scales, std::uint64_t seed = 0,
                 std::uint64_t first_index = 0, Stream stream = nullptr);

// ---- statistics (one pass; synchronous: returns host values) ----------------------------------
// Exactly the statistics of fp8kit::compute_stats (docs/statistics.md), in its result type
// numerics::QuantStats, each element through numerics::element_step: with s = fl32(x * scale)
// and q = encode(s) under `policy` (stochastic: element i draws emu::stochastic_bits(seed,
// first_index + i)), x^ = decode(q) * scale_inv in binary64 and scale_inv = fl32(1 / scale)
// when passed as 0. scale and scale_inv must be finite and > 0 (std::invalid_argument otherwise).
// Counts, amax, min_nonzero and the histogram are exact; sum_x2 and sum_err2 are binary64 sums
// added per thread, warp and CTA, then over CTAs in CTA order (the same device and launch give
// the same bits); they differ from the CPU's chunked sums only by the order of the additions.
numerics::QuantStats statistics(Format to, Wide from, const void* in, std::size_t n, const Policy& policy, float scale,
                                float scale_inv = 0.0f, std::uint64_t seed = 0, std::uint64_t first_index = 0,
                                Stream stream = nullptr);

}  // namespace fp8kit::cuda
