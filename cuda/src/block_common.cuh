// What the block quantisers of blocks.hpp share (fp4_blocks.cu, block_rows.cu): the float32
// product lib's host computes, an input widened exactly, and the fast launcher of block_rows.cu.
// Internal to cuda/src.
#pragma once

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

// block_rows.cu: quantize_blocks for blocks of 1 or 16 rows by 16 or 32 columns (NVFP4 1x16 and
// 16x16, MX 1x32), a lane per row of a block (16 or 32 consecutive elements), the global amax
// included. Returns false (launching nothing) for any other block shape; the caller then runs the
// general kernel. Same arguments and results as quantize_blocks after its checks.
bool quantize_row_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                         std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                         float* d_scale_inv, float* d_global_amax, std::uint64_t seed, cudaStream_t stream);

}  // namespace fp8kit::cuda::detail
