// quantize, amax, current scaling and the cvt.rn.satfinite entry points: the element-wise cast
// without a fused amax.
#include "elementwise.cuh"

namespace fp8kit::cuda {

using namespace detail;

void quantize(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n,
              const Policy& policy, float scale, std::uint64_t seed, std::uint64_t first_index,
              Stream stream) {
    require_input(from, "quantize");
    ScaleSource src;
    src.value = scale;
    launch_cast<false>(to, from, in, out, n, policy, src, seed, first_index, nullptr, as_stream(stream));
}

void amax(Wide from, const void* in, std::size_t n, float* d_amax, Stream stream) {
    require_input(from, "amax");
    const cudaStream_t s = as_stream(stream);
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(d_amax, 0, sizeof(float), s));
    const std::size_t es = wide_bytes(from);
    with_input(from, [&](auto w) {
        for (std::size_t off = 0; off < n; off += kPiece) {  // 32-bit indices in the kernel
            const std::size_t m = n - off < kPiece ? n - off : kPiece;
            amax_kernel<decltype(w)><<<grid_for((m + 15) / 16), kThreads, 0, s>>>(
                static_cast<const char*>(in) + off * es, static_cast<std::uint32_t>(m), d_amax);
        }
    });
    check_launch("amax_kernel");
}

void quantize_current_scaling(Format to, Wide from, const void* in, std::uint8_t* out,
                              std::size_t n, const Policy& policy, float* d_amax, float* d_scale,
                              float* d_scale_inv, const ScaleOptions& options, std::uint64_t seed,
                              std::uint64_t first_index, Stream stream) {
    require_input(from, "quantize_current_scaling");
    if (!d_amax || !d_scale)
        throw std::invalid_argument("fp8kit::cuda::quantize_current_scaling: d_amax and d_scale must be device pointers, not null");
    amax(from, in, n, d_amax, stream);
    ScaleSource src;
    src.mode = ScaleSource::from_amax;
    src.d_amax = d_amax;
    src.fmax = numerics::format_max(to);
    src.pow2 = options.pow2;
    src.epsilon = options.epsilon;
    src.d_scale_out = d_scale;
    src.d_scale_inv_out = d_scale_inv;
    launch_cast<false>(to, from, in, out, n, policy, src, seed, first_index, nullptr, as_stream(stream));
}

}  // namespace fp8kit::cuda
