// What the block quantisers of blocks.hpp share (fp4_blocks.cu, block_rows.cu): the float32
// product lib's host computes, an input widened exactly, the dequantised output of a code
// (fake_quantize_blocks.cu), and the fast launchers of block_rows.cu.
// Internal to cuda/src.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

#include "element.cuh"
#include "fp8kit/cuda/blocks.hpp"

namespace fp8kit::cuda::detail {

// The float32 bits lib's host multiply gives for fl32(x * scale) (x86-64 SSE mulss, Intel SDM
// vol. 1 section 4.8.3.5): a NaN operand comes back quieted (x's when x is NaN, else the
// scale's); a NaN from non-NaN operands (Inf * 0) is the default NaN 0xFFC00000. __fmul_rn
// returns 0x7FFFFFFF for all of them, so the NaN cases are taken apart before the multiply.
__device__ __forceinline__ std::uint32_t host_mul_bits(std::uint32_t x, float scale) {
    const std::uint32_t s = __float_as_uint(scale);
    if ((x & 0x7FFFFFFFu) > 0x7F800000u) return x | 0x00400000u;
    if ((s & 0x7FFFFFFFu) > 0x7F800000u) return s | 0x00400000u;
    const float y = __fmul_rn(__uint_as_float(x), scale);
    return y != y ? 0xFFC00000u : __float_as_uint(y);
}

// An input element widened to float32 bits exactly (f16 NaN: sign, all-ones exponent, payload
// << 13, which the multiply then quiets, as lib's widening and multiply do).
template <class S>
__device__ __forceinline__ std::uint32_t widen_bits(typename S::storage_t x) {
    if constexpr (sizeof(typename S::storage_t) == 4)
        return x;
    else if constexpr (S::man_bits == 7)
        return static_cast<std::uint32_t>(x) << 16;
    else {
        const std::uint32_t mag = x & 0x7FFFu;
        if (mag > 0x7C00u) return (static_cast<std::uint32_t>(x & 0x8000u) << 16) | 0x7F800000u | ((x & 0x3FFu) << 13);
        return __float_as_uint(__half2float(__ushort_as_half(x)));
    }
}

// The CTA's tables of N codes for dequantisation into W (dequantize_blocks' kernels, 256 entries;
// col_blocks_kernel, F's own codes): each code's float32 value and its own decode in W (what a NaN
// code gives), both from emu::convert under kDecodePolicy (entries past F's codes read as code 0).
template <class F, class W, unsigned N>
__device__ __forceinline__ void fill_code_tables(std::uint32_t (&value)[N], typename W::storage_t (&nan_out)[N]) {
    constexpr unsigned kCodes = 1u << F::total_bits;
    for (unsigned c = threadIdx.x; c < N; c += blockDim.x) {
        const std::uint8_t code = static_cast<std::uint8_t>(c < kCodes ? c : 0u);
        value[c] = static_cast<std::uint32_t>(emu::convert<F, Binary32>(code, emu::kDecodePolicy));
        nan_out[c] = static_cast<typename W::storage_t>(emu::convert<F, W>(code, emu::kDecodePolicy));
    }
    __syncthreads();
}

// The output bits of one element of a dequantised code (dequantize_blocks' kernels,
// fake_quantize_blocks.cu; row_fake_kernel and col_blocks_kernel, block_rows.cu), lib's dequantize
// rule with the block's factor: the code's value v (float32 bits) and the factor f give
// p = fl32(v * f), then emu::convert<Binary32, W>(p, kDecodePolicy), which for a p that is not a
// NaN is IEEE roundTiesToEven with overflow to Inf (no_saturate) and subnormals kept: the
// conversion of the cvt instructions cuda_fp16.h / cuda_bf16.h use, cvt.rn.f16.f32 and
// cvt.rn.bf16.f32 (no .ftz, no .satfinite), and the identity for float32. A NaN p comes from a
// NaN code (v NaN: the code's own decode, nan_out) or from the product (Inf * 0, a NaN factor:
// the convert of 0x7FC00000, nan_product); the test is one predicate on p, so that the common
// path has no branch.
// product_out's nan_product: a NaN product's output, the conversion of 0x7FC00000 into W.
template <class W>
__device__ __forceinline__ typename W::storage_t nan_product_out() {
    return static_cast<typename W::storage_t>(emu::convert<Binary32, W>(0x7FC00000u, emu::kDecodePolicy));
}

template <class W>
__device__ __forceinline__ typename W::storage_t product_out(std::uint32_t v, float f, typename W::storage_t nan_code,
                                                             typename W::storage_t nan_product) {
    const float p = __fmul_rn(__uint_as_float(v), f);
    typename W::storage_t o;
    if constexpr (std::is_same_v<W, BFloat16>)
        o = __bfloat16_as_ushort(__float2bfloat16_rn(p));
    else if constexpr (std::is_same_v<W, Binary16>)
        o = __half_as_ushort(__float2half_rn(p));
    else
        o = __float_as_uint(p);
    if (p != p) o = is_nan_bits<Binary32>(v) ? nan_code : nan_product;
    return o;
}

// block_rows.cu: quantize_blocks for blocks of 1 or 16 rows by 16 or 32 columns (NVFP4 1x16 and
// 16x16, MX 1x32), a lane per row of a block (16 or 32 consecutive elements), the global amax
// included. Returns false (launching nothing) for any other block shape; the caller then runs the
// general kernel. Same arguments and results as quantize_blocks after its checks.
bool quantize_row_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                         std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                         float* d_scale_inv, float* d_global_amax, std::uint64_t seed, cudaStream_t stream);

// block_rows.cu: fake_quantize_blocks (blocks.hpp) into bf16 in one kernel (row_fake_kernel), the
// output and *d_tensor_factor (where not null: the block part as factor, else scale_inv) bit for
// bit those of quantize_blocks, block_factors_kernel and dequantize_blocks. d_global_amax (one
// device float) receives the tensor's amax (cuda::amax) where the rule reads it (NVFP4); else it
// is not touched. Returns false (launching nothing) for what it has no kernel for (block_rows.cu
// kFakePath): blocks other than 1 x 16, 16 x 16 and 1 x 32, TE's column-wise copy, an empty
// tensor, inputs other than f32 / bf16, elements other than E2M1 and (1 x 32) E4M3, and the
// rounding paths the block-scaled recipes do not use.
bool fake_quantize_row_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                              void* d_out, float* d_tensor_factor, float* d_global_amax, std::uint64_t seed,
                              cudaStream_t stream);

// block_rows.cu: fake_quantize_blocks_transposed (fake_quantize.hpp) after its checks, into bf16:
// X (rows x cols, row-major) read in place, d_out = (fake_quantize_blocks(X^T, spec))^T, with the
// block part as factor when block_part (and then *d_tensor_factor written), else scale_inv.
// d_global_amax (one device float) receives X's amax (cuda::amax) where the rule reads it (NVFP4),
// before the blocks; else it is not touched. Returns false
// (launching nothing) for what it has no kernel for (block_rows.cu kFakePath): blocks other than
// 1 x 16 / 1 x 32, inputs other than f32 / bf16, elements other than E2M1 and (1 x 32) E4M3, and
// the rounding paths the block-scaled recipes do not use.
bool fake_quantize_col_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                              void* d_out, bool block_part, float* d_tensor_factor, float* d_global_amax,
                              std::uint64_t seed, cudaStream_t stream);

// block_rows.cu: quantize_blocks with spec.columnwise_rht after the shape check (1 x 16 blocks,
// rows % 16 == 0), TE's random Hadamard transform applied in the cast (rht_col_blocks_kernel): the
// codes, scales and *d_global_amax of quantize_blocks on te_rht16_columnwise(X) (cols x rows)
// bit for bit, the copy never made. Returns false (launching nothing) for what it has no kernel
// for: elements other than E2M1, inputs other than f32 / bf16, an empty tensor, null d_codes or
// d_global_amax (the copy's path refuses them), and tensors of 2^31 blocks or more; the caller
// then takes the copy.
bool quantize_rht_col_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                             std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                             float* d_scale_inv, float* d_global_amax, std::uint64_t seed, cudaStream_t stream);

}  // namespace fp8kit::cuda::detail
