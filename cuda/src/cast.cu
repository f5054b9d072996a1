// quantize, amax, current scaling and the cvt.rn.satfinite entry points: the element-wise cast
// without a fused amax.
#include "elementwise.cuh"
#include "narrow.cuh"

namespace fp8kit::cuda {

using namespace detail;

void quantize(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy, float scale,
              std::uint64_t seed, std::uint64_t first_index, Stream stream) {
    require_input(from, "quantize");
    if (is_narrow_format(to))  // FP4/FP6 and the other ml_dtypes types: narrow_cast.cu
        return quantize_narrow(to, from, in, out, n, policy, scale, seed, first_index, as_stream(stream));
    require_gpu_format(to, "quantize");
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
            // One 16-element item a thread from float32 (64 bytes); from 16-bit inputs (32 bytes an
            // item) up to 8 items a thread, at least a wave of 8 CTAs a SM, so that the CTA's
            // reduction and atomic are paid per 64 KiB read rather than per 8 KiB (Nsight Compute,
            // H200, bf16, 2^28 elements, one item a thread: 162 us at 69% of DRAM peak, 42% issue).
            // The max of the elements does not depend on how they are dealt out.
            const std::size_t items = (m + 15) / 16;
            const unsigned grid = es == 4 ? grid_per_item(items) : grid_up_to_items(items, 8);
            amax_kernel<decltype(w)><<<grid, kThreads, 0, s>>>(static_cast<const char*>(in) + off * es,
                                                               static_cast<std::uint32_t>(m), d_amax);
        }
    });
    check_launch("amax_kernel");
}

void quantize_current_scaling(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n,
                              const Policy& policy, float* d_amax, float* d_scale, float* d_scale_inv,
                              const ScaleOptions& options, std::uint64_t seed, std::uint64_t first_index,
                              Stream stream) {
    require_input(from, "quantize_current_scaling");
    if (!d_amax || !d_scale)
        throw std::invalid_argument(
            "fp8kit::cuda::quantize_current_scaling: d_amax and d_scale must be device pointers, not null");
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

// The hardware conversion path under its own names: quantize under profile cuda-satfinite
// (nearest-even, saturate-all, canonical NaN) on float32, which element.cuh compiles to PTX
// cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (sm_89 and newer; an older architecture stops the build).
namespace fp8kit::cuda {

namespace {

void launch_cvt(Format f, const float* in, std::uint8_t* out, std::size_t n, float scale, Stream stream) {
    const Policy sat{emu::Rounding::nearest_even, emu::Overflow::saturate_all, emu::NanEncoding::canonical};
    detail::ScaleSource src;
    src.value = scale;
    detail::launch_cast<false>(f, Wide::f32, in, out, n, sat, src, 0, 0, nullptr, detail::as_stream(stream));
}

}  // namespace

void quantize_e4m3_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, float scale, Stream stream) {
    launch_cvt(Format::e4m3, in, out, n, scale, stream);
}
void quantize_e5m2_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, float scale, Stream stream) {
    launch_cvt(Format::e5m2, in, out, n, scale, stream);
}

}  // namespace fp8kit::cuda
