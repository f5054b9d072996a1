// quantize() for the narrow formats of narrow.cuh (FP4, FP6, e3m4, e4m3b11fnuz, e4m3ieee): each
// element is y = fl32(x * scale) as element.cuh's scaled_bits defines it (the one definition of
// kernels.hpp), then emu::convert<Binary32, D>(y, policy, random) on the device, the routine
// fp8kit::encode_array runs on the CPU. Stochastic rounding: element i draws
// emu::stochastic_bits(seed, first_index + i). One code per output byte (low bits), as lib.
#include "element.cuh"
#include "narrow.cuh"

namespace fp8kit::cuda::detail {

namespace {

// emu::convert out of line, once per (format, rounding kind): keeps ptxas quick.
template <class D>
__device__ __noinline__ std::uint8_t narrow_convert(std::uint32_t y, Policy p, std::uint32_t random) {
    return static_cast<std::uint8_t>(emu::convert<Binary32, D>(y, p, random));
}

template <class S, class D, bool kStochastic>
__global__ void __launch_bounds__(kThreads)
    narrow_quantize_kernel(const typename S::storage_t* __restrict__ in, std::uint8_t* __restrict__ out, std::size_t n,
                           Policy policy, float scale, std::uint64_t seed, std::uint64_t first_index) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
        const std::uint32_t y = scaled_bits<S>(in[i], scale);
        const std::uint32_t random = kStochastic ? emu::stochastic_bits(seed, first_index + i) : 0u;
        out[i] = narrow_convert<D>(y, policy, random);
    }
}

}  // namespace

void quantize_narrow(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy,
                     float scale, std::uint64_t seed, std::uint64_t first_index, cudaStream_t stream) {
    if (n == 0) return;
    with_input(from, [&](auto si) {
        with_narrow(to, [&](auto di) {
            using S = decltype(si);
            using D = decltype(di);
            const auto* src = static_cast<const typename S::storage_t*>(in);
            if (policy.rounding == emu::Rounding::stochastic)
                narrow_quantize_kernel<S, D, true>
                    <<<grid_for(n), kThreads, 0, stream>>>(src, out, n, policy, scale, seed, first_index);
            else
                narrow_quantize_kernel<S, D, false>
                    <<<grid_for(n), kThreads, 0, stream>>>(src, out, n, policy, scale, seed, first_index);
            return 0;
        });
    });
    check_launch("narrow_quantize_kernel");
}

}  // namespace fp8kit::cuda::detail

namespace fp8kit::cuda {

bool has_cast_kernels(Format f) { return detail::gpu_has_format(f) || detail::is_narrow_format(f); }

}  // namespace fp8kit::cuda
