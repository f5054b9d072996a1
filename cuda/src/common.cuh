// Pieces every kernel file shares: error checks, input bits, amax reduction and launch geometry. Internal to cuda/src.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>

#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::cuda::detail {

using emu::BFloat16;
using emu::Binary16;
using emu::Binary32;

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("fp8kit::cuda: ") + what + ": " + cudaGetErrorString(e));
}
#define FP8KIT_CUDA_CHECK(x) ::fp8kit::cuda::detail::check((x), #x)
inline void check_launch(const char* kernel) { check(cudaGetLastError(), kernel); }

inline cudaStream_t as_stream(Stream s) { return static_cast<cudaStream_t>(s); }

// Element kinds: the emu format of each accepted input type.
inline void require_input(Wide w, const char* fn) {
    if (w == Wide::f64)
        throw std::invalid_argument(std::string("fp8kit::cuda::") + fn +
                                    ": input type f64 is not supported on the GPU (f32, f16, bf16)");
}
// The formats every kernel covers: the four FP8 element formats and E8M0. FP4/FP6 and the other
// ml_dtypes types (narrow.cuh) have quantize, dequantize, delayed/current scaling, statistics and
// the block quantiser; the row-block kernels (block.cu) refuse them with require_gpu_format.
inline bool gpu_has_format(Format f) {
    return f == Format::e4m3 || f == Format::e5m2 || f == Format::e4m3fnuz || f == Format::e5m2fnuz ||
           f == Format::e8m0;
}
inline void require_gpu_format(Format f, const char* fn) {
    if (!gpu_has_format(f))
        throw std::invalid_argument(std::string("fp8kit::cuda::") + fn + ": format #" +
                                    std::to_string(static_cast<int>(f)) +
                                    " (FP4/FP6 or another ml_dtypes type) has no GPU kernel yet (e4m3, e5m2, e4m3fnuz, "
                                    "e5m2fnuz, e8m0); use the CPU path");
}
inline void require_fp8(Format f, const char* fn) {
    require_gpu_format(f, fn);
    if (f == Format::e8m0)
        throw std::invalid_argument(std::string("fp8kit::cuda::") + fn +
                                    ": element format e8m0 is a scale format; use e4m3, e5m2, e4m3fnuz or e5m2fnuz");
}

// ---- the element conversion -----------------------------------------------------------------

template <class S>
__device__ __forceinline__ float widen(typename S::storage_t bits) {
    if constexpr (sizeof(typename S::storage_t) == 4)
        return __uint_as_float(bits);
    else if constexpr (S::man_bits == 7)
        return __uint_as_float(static_cast<std::uint32_t>(bits) << 16);
    else
        return __half2float(__ushort_as_half(bits));
}

template <class S>
__device__ __forceinline__ bool is_nan_bits(typename S::storage_t bits) {
    const std::uint32_t mag = bits & ~static_cast<typename S::storage_t>(S::sign_mask);
    return mag > S::inf_code;
}

// |x| as the bits of a float32 (monotone in the value for non-NaN); 0 for NaN so it never wins.
template <class S>
__device__ __forceinline__ std::uint32_t abs_bits_for_max(typename S::storage_t bits) {
    if (is_nan_bits<S>(bits)) return 0u;
    return __float_as_uint(fabsf(widen<S>(bits)));
}

// max(acc, |x|) over non-NaN x, as a float (acc >= +0, never NaN): fmaxf returns the other operand
// when one is a NaN (IEEE 754 maxNum; CUDA Math API fmaxf), so a NaN input never wins, as in
// abs_bits_for_max, and for non-NaN values the float order is the order of abs_bits_for_max's
// bits: __float_as_uint of the result equals the max of abs_bits_for_max over the same inputs.
// One FMNMX with an |.| operand per float32 element instead of a NaN test, a select and a max.
template <class S>
__device__ __forceinline__ float max_abs(float acc, typename S::storage_t bits) {
    return fmaxf(acc, fabsf(widen<S>(bits)));
}

// ---- loads ----------------------------------------------------------------------------------

__device__ __forceinline__ bool aligned16(const void* p) { return (reinterpret_cast<std::uintptr_t>(p) & 15u) == 0; }

// ---- reductions -----------------------------------------------------------------------------

__device__ __forceinline__ std::uint32_t warp_max(std::uint32_t v) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v = max(v, __shfl_xor_sync(0xFFFFFFFFu, v, o));
    return v;
}

// Max over the block, then one atomicMax per block (needs blockDim.x a multiple of 32, <= 1024).
__device__ __forceinline__ void block_amax_atomic(std::uint32_t v, float* amax) {
    __shared__ std::uint32_t warp_vals[32];
    v = warp_max(v);
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (lane == 0) warp_vals[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < static_cast<int>(blockDim.x >> 5) ? warp_vals[lane] : 0u;
        v = warp_max(v);
        if (lane == 0 && v != 0u) atomicMax(reinterpret_cast<unsigned int*>(amax), v);
    }
}

// ---- scratch memory of the synchronous entry points ---------------------------------------------
// Stream-ordered allocations from a pool of the current device that keeps up to 64 MiB when it is
// idle (device.cu). The default pool's release threshold is 0: every stream synchronisation gave
// its memory back, and the next cudaMallocAsync mapped it again, which cost the synchronous
// statistics() about 0.12 ms a call on the H100 (docs/performance.md at 09ae615).
void* scratch_alloc(std::size_t bytes, cudaStream_t s);
void scratch_free(void* p, cudaStream_t s);

// ---- TE's column-wise random Hadamard copy (hadamard.cu) --------------------------------------
// The spec's columnwise_rht on the GPU, for quantize_blocks (fp4_blocks.cu) and
// block_statistics_async (block_statistics.cu), as lib does on the host: a stream-ordered
// temporary of rows * cols elements of `type`, te_rht16_columnwise(type, in, rows, cols, copy,
// random signs) into it, use(copy) (the consumer on the cols x rows copy, on `stream`), then the
// temporary freed on the stream, also when the transform or use throws.
void with_rht_columnwise_copy(Wide type, const void* in, std::size_t rows, std::size_t cols, Stream stream,
                              const std::function<void(const void* copy)>& use);

// What the column-wise RHT needs of the shape (1 x 16 blocks, a row count that is a multiple of 16),
// as a message for the caller to throw with its own name, or "" when the shape is fine.
std::string rht_columnwise_shape_error(int block_rows, int block_cols, std::size_t rows);

// ---- launch geometry --------------------------------------------------------------------------

constexpr int kThreads = 256;

// At most ctas_per_sm CTAs per SM (a few waves); the kernel's grid-stride loop covers the rest.
inline unsigned grid_for(std::size_t work_items, int threads = kThreads, int ctas_per_sm = 8) {
    static int sms = [] {
        int dev = 0, n = 0;
        if (cudaGetDevice(&dev) != cudaSuccess ||
            cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
            n = 132;
        return n;
    }();
    const std::size_t want = (work_items + threads - 1) / threads;
    const std::size_t cap = static_cast<std::size_t>(sms) * static_cast<std::size_t>(ctas_per_sm);
    const std::size_t g = want < cap ? want : cap;
    return static_cast<unsigned>(g > 0 ? g : 1);
}

// One work item per thread: ceil(work_items / threads) CTAs, so that the grid-stride loop runs
// once. For the memory-bound kernels on their deterministic paths this was 3-10% faster than
// grid_for's 8 CTAs per SM on the H100 (2026-11-27, docs/performance.md at 09ae615: f32 -> e4m3 cast 0.458
// -> 0.437 ms, dequantize 0.518 -> 0.474 ms, MX 0.486 -> 0.440 ms for 2^28 elements). The
// callers' pieces keep work_items below 2^31, far inside gridDim.x's limit.
inline unsigned grid_per_item(std::size_t work_items, int threads = kThreads) {
    const std::size_t want = (work_items + threads - 1) / threads;
    return static_cast<unsigned>(want > 0 ? want : 1);
}

// Up to k work items a thread, but never fewer CTAs than grid_for's wave of 8 a SM where there
// are items for them, so that a small tensor still fills the device: for kernels whose per-CTA
// prologue or epilogue (a table, a reduction and its atomic) costs as much as several items.
inline unsigned grid_up_to_items(std::size_t work_items, std::size_t k, int threads = kThreads) {
    const unsigned several = grid_per_item((work_items + k - 1) / k, threads), wave = grid_for(work_items, threads);
    return several > wave ? several : wave;
}

// Host-side dispatch of a run-time format to a callable templated on the emu format (emu's own
// with_format is __host__ __device__, which nvcc warns about for host lambdas).
template <class Fn>
decltype(auto) with_fp8(Format f, Fn&& fn) {
    switch (f) {
        case Format::e5m2: return fn(emu::E5M2{});
        case Format::e4m3fnuz: return fn(emu::E4M3FNUZ{});
        case Format::e5m2fnuz: return fn(emu::E5M2FNUZ{});
        case Format::e8m0: return fn(emu::E8M0{});
        case Format::e4m3: break;
        default: require_gpu_format(f, "with_fp8");  // throws: no kernel instantiated for it
    }
    return fn(emu::E4M3{});
}

// Bytes of one element of an accepted input type.
inline std::size_t wide_bytes(Wide w) { return w == Wide::f32 ? 4 : 2; }

// Dispatch a run-time (input, output) pair to a callable templated on the emu formats.
template <class Fn>
void with_input(Wide w, Fn&& fn) {
    switch (w) {
        case Wide::f16: fn(Binary16{}); return;
        case Wide::bf16: fn(BFloat16{}); return;
        default: fn(Binary32{}); return;
    }
}

}  // namespace fp8kit::cuda::detail
