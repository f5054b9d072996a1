// Delayed scaling: the cast with amax(x) fused into the same pass.
#include "elementwise.cuh"

namespace fp8kit::cuda {

using namespace detail;

void quantize_delayed_scaling(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n,
                              const Policy& policy, const float* d_scale, float* d_amax, std::uint64_t seed,
                              std::uint64_t first_index, Stream stream) {
    require_input(from, "quantize_delayed_scaling");
    if (!d_scale || !d_amax)
        throw std::invalid_argument(
            "fp8kit::cuda::quantize_delayed_scaling: d_scale and d_amax must be device pointers, not null");
    const cudaStream_t s = as_stream(stream);
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(d_amax, 0, sizeof(float), s));
    ScaleSource src;
    src.mode = ScaleSource::device_value;
    src.d_value = d_scale;
    launch_cast<true>(to, from, in, out, n, policy, src, seed, first_index, d_amax, s);
}

}  // namespace fp8kit::cuda
