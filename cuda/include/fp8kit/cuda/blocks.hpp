// GPU block quantiser for every block recipe lib's fp8kit::quantize_blocks computes
// (lib/include/fp8kit/stats/block_quantize.hpp): NVFP4 as TransformerEngine and as torchao do it
// (E2M1 elements, E4M3 block scales, a float32 global amax; 1x16 and 16x16 blocks), MXFP4 and
// MXFP6 (E2M1 / E2M3 / E3M2 elements, E8M0 scales over 32 elements, OCP floor or round-up rule),
// and the FP8 block recipes. Every scale comes from numerics::rule_scale and every code from
// emu::convert, the calls lib makes, so codes and scale bytes equal lib's bit for bit.
// Plain C++ types: including this needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/cuda/kernels.hpp"

namespace fp8kit::cuda {

// The fields of lib's BlockRecipe (fp8kit/stats/statistics.hpp) the quantiser reads.
struct BlockSpec {
    Format format;               // element format (not e8m0)
    numerics::ScaleRule rule;    // nvfp4_te, nvfp4_torchao, mx_roundup, mx_ocp_floor, te, ...
    int block_rows, block_cols;  // >= 1, or 0 x 0 for one block over the whole tensor
    Policy policy;
    double epsilon = 0.0;
    bool pow2 = false;
    float value_for_inf = 3.40282346638528859812e+38f;
    // lib's BlockRecipe::columnwise_rht (RoleSpec::columnwise_rht: TE NVFP4's input and gradient
    // roles): quantise TE's column-wise copy, te_rht16_columnwise of the data (hadamard.hpp; E2M1
    // from f32 / bf16 applies it in the cast, two passes over the data and no copy; the rest runs
    // it first into a temporary, bit for bit the same), so the codes are cols x rows (packed:
    // cols x rows / 2) and the block grid, the global amax and the stochastic element index
    // i = r * rows + c are those of the copy, as lib's quantize_blocks. Needs 1 x 16 blocks and a
    // row count that is a multiple of 16 (std::invalid_argument otherwise).
    bool columnwise_rht = false;
};

// Quantise a row-major rows x cols tensor (f32, f16 or bf16 bits on the device), as lib's
// quantize_blocks(data, type, rows, cols, recipe, seed):
//   1. *d_global_amax = amax of the whole tensor (NaN ignored, Inf kept; the NVFP4 rules read it);
//   2. per block (edge blocks partial): amax (NaN ignored), then numerics::rule_scale;
//   3. per element i = r * cols + c: code = encode(fl32(x * scale)) under spec.policy, drawing
//      emu::stochastic_bits(seed, i) for stochastic rounding. The multiply's NaN follows lib's
//      host (x86-64): a NaN operand is returned quieted, Inf * 0 gives 0xFFC00000.
// Outputs (device pointers; the three per-block arrays, grid_rows x grid_cols row-major, may each
// be null): d_codes rows x cols bytes, or with packed = true rows x cols / 2 bytes holding two
// E2M1 codes each, element 2k in the low nibble (torch float4_e2m1fn_x2, cuda_fp4.h __nv_fp4x2;
// needs format e2m1 and even block columns); d_scale_codes the E8M0 / E4M3 scale bytes;
// d_scale the factor the elements were multiplied by; d_scale_inv the dequantisation factor.
// The NVFP4 and MX block shapes (1 x 16, 16 x 16, 1 x 32) with E2M1 / E2M3 / E3M2 elements, or
// E4M3 / E5M2 on the cvt paths, run a warp kernel (cuda/src/block_rows.cu; its speed: docs/performance.md); every
// other shape and policy runs a kernel of one thread per block (made for checking against lib).
void quantize_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                     std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                     float* d_scale_inv, float* d_global_amax, std::uint64_t seed = 0, Stream stream = nullptr);

// For tests: caps the warp kernel's grid (cuda/src/block_rows.cu) and that of TE's column-wise copy
// with its transform in the cast (rht_col_blocks_kernel) at `ctas` CTAs (0: no cap), so that their
// threads take several items (tiles) each on tensors small enough for lib's reference to check
// (without the cap a thread takes several only past a full wave of CTAs). Returns the old cap.
// Process-wide and not thread-safe: set it, quantise, set it back.
unsigned set_row_blocks_grid_cap(unsigned ctas);

// For tests: how many quantize_blocks calls with spec.columnwise_rht (process-wide, since the
// library was loaded) applied TE's transform in the cast (E2M1 from f32 / bf16: two passes over
// the input, the copy never made) rather than quantising a transformed copy.
std::uint64_t quantize_blocks_fused_rht_calls();

// The sm_100+ hardware FP4 conversion (cvt.rn.satfinite.e2m1x2.f32). fp8kit's kernels never need
// it (they compute the same codes with emu::convert, profile cuda-satfinite of e2m1); this entry
// point exists so that a caller asking for the instruction learns loudly that it is not there:
// it throws std::runtime_error unless the device is sm_100 or newer, and on sm_100+ it throws too,
// since this build (sm_90) carries no sm_100 code. Never a silent fallback.
void quantize_e2m1_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, Stream stream = nullptr);

}  // namespace fp8kit::cuda
