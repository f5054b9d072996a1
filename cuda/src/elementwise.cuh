// The element-wise cast kernel behind quantize, delayed scaling and current scaling: 16-element
// chunks read as 16-byte vectors (all of a chunk's loads issued before any conversion), a
// grid-stride loop, and an optional amax of the input in the same pass.
#pragma once

#include <cfloat>

#include "common.cuh"

namespace fp8kit::cuda::detail {

// Where the scale comes from; read once per thread at kernel start.
struct ScaleSource {
    enum Mode : std::uint8_t { host_value, device_value, from_amax } mode = host_value;
    float value = 1.0f;              // host_value
    const float* d_value = nullptr;  // device_value
    const float* d_amax = nullptr;   // from_amax: TransformerEngine's formula on *d_amax
    float fmax = 0.0f;
    bool pow2 = false;
    float epsilon = 0.0f;
    float* d_scale_out = nullptr;      // from_amax: block 0 writes the scale ...
    float* d_scale_inv_out = nullptr;  // ... and fl32(1 / scale) (may be null)
};

__device__ __forceinline__ Scaling resolve_scale(const ScaleSource& src) {
    float s = src.value;
    if (src.mode == ScaleSource::device_value) {
        s = *src.d_value;
    } else if (src.mode == ScaleSource::from_amax) {
        s = te_scale(*src.d_amax, src.fmax, src.pow2, src.epsilon, FLT_MAX);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            *src.d_scale_out = s;
            if (src.d_scale_inv_out) *src.d_scale_inv_out = __fdiv_rn(1.0f, s);
        }
    }
    return {s, s != 1.0f};
}

template <class S, class D, int R, bool kAmax>
__global__ void __launch_bounds__(kThreads)
cast_kernel(const void* __restrict__ in, std::uint8_t* __restrict__ out, std::size_t n,
            Policy policy, ScaleSource scale_src, std::uint64_t seed, std::uint64_t first_index,
            float* amax) {
    using T = typename S::storage_t;
    const Scaling sc = resolve_scale(scale_src);
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    std::uint32_t local_max = 0;

    const bool vec = aligned16(in) && aligned16(out);
    const std::size_t chunks = vec ? n / Chunk<S>::kElems : 0;
    for (std::size_t c = tid; c < chunks; c += stride) {
        Chunk<S> ch;
        load_chunk<S>(ch, in, c);
        union {
            uint4 v;
            std::uint8_t b[16];
        } o;
        const std::uint64_t base = first_index + c * Chunk<S>::kElems;
#pragma unroll
        for (int k = 0; k < Chunk<S>::kElems; ++k) {
            o.b[k] = encode_element<S, D, R>(ch.e[k], policy, sc, seed, base + k);
            if (kAmax) local_max = max(local_max, abs_bits_for_max<S>(ch.e[k]));
        }
        reinterpret_cast<uint4*>(out)[c] = o.v;
    }
    const T* in_t = static_cast<const T*>(in);
    for (std::size_t i = chunks * Chunk<S>::kElems + tid; i < n; i += stride) {
        const T x = in_t[i];
        out[i] = encode_element<S, D, R>(x, policy, sc, seed, first_index + i);
        if (kAmax) local_max = max(local_max, abs_bits_for_max<S>(x));
    }
    if (kAmax) block_amax_atomic(local_max, amax);
}

template <class S>
__global__ void __launch_bounds__(kThreads)
amax_kernel(const void* __restrict__ in, std::size_t n, float* amax) {
    using T = typename S::storage_t;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    std::uint32_t local_max = 0;
    const std::size_t chunks = aligned16(in) ? n / Chunk<S>::kElems : 0;
    for (std::size_t c = tid; c < chunks; c += stride) {
        Chunk<S> ch;
        load_chunk<S>(ch, in, c);
#pragma unroll
        for (int k = 0; k < Chunk<S>::kElems; ++k) local_max = max(local_max, abs_bits_for_max<S>(ch.e[k]));
    }
    const T* in_t = static_cast<const T*>(in);
    for (std::size_t i = chunks * Chunk<S>::kElems + tid; i < n; i += stride)
        local_max = max(local_max, abs_bits_for_max<S>(in_t[i]));
    block_amax_atomic(local_max, amax);
}

// Launch the cast for run-time (to, from, rounding); instantiates 2 rounding modes per pair.
template <bool kAmax>
void launch_cast(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n,
                 const Policy& policy, const ScaleSource& src, std::uint64_t seed,
                 std::uint64_t first_index, float* amax, cudaStream_t stream) {
    const unsigned grid = grid_for((n + 15) / 16);
    with_input(from, [&](auto s) {
        with_fp8(to, [&](auto d) {
            using S = decltype(s);
            using D = decltype(d);
            if (policy.rounding == emu::Rounding::nearest_even)
                cast_kernel<S, D, kNearestEven, kAmax><<<grid, kThreads, 0, stream>>>(
                    in, out, n, policy, src, seed, first_index, amax);
            else
                cast_kernel<S, D, kRuntime, kAmax><<<grid, kThreads, 0, stream>>>(
                    in, out, n, policy, src, seed, first_index, amax);
            return 0;
        });
    });
    check_launch("cast_kernel");
}

}  // namespace fp8kit::cuda::detail
