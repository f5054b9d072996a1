// The hardware conversion path: PTX cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 (sm_89 and newer).
// It has its own names (quantize_e4m3_cvt_satfinite, ...) and no software fallback: compiling
// this file for an older architecture stops the build.
#include "common.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "fp8kit: cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 needs sm_89 or newer; set CMAKE_CUDA_ARCHITECTURES to 89, 90 or later"
#endif

namespace fp8kit::cuda {

using namespace detail;

namespace {

// cvt packs its first operand into the high byte: (hi, lo) -> hi << 8 | lo.
template <bool kE5M2>
__device__ __forceinline__ std::uint16_t cvt_pair(float lo, float hi) {
    std::uint16_t r;
#if defined(__CUDA_ARCH__)
    if (kE5M2) asm("cvt.rn.satfinite.e5m2x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
    else asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
#else
    r = 0;
#endif
    return r;
}

template <bool kE5M2>
__device__ __forceinline__ std::uint8_t cvt_one(float x) {
    return static_cast<std::uint8_t>(cvt_pair<kE5M2>(x, 0.0f) & 0xFF);
}

template <bool kE5M2>
__global__ void __launch_bounds__(kThreads)
cvt_kernel(const float* __restrict__ in, std::uint8_t* __restrict__ out, std::size_t n, float scale) {
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const bool vec = aligned16(in) && aligned16(out);
    const std::size_t chunks = vec ? n / 16 : 0;
    for (std::size_t c = tid; c < chunks; c += stride) {
        Chunk<Binary32> ch;
        load_chunk<Binary32>(ch, in, c);
        union { uint4 v; std::uint16_t h[8]; } o;
#pragma unroll
        for (int k = 0; k < 8; ++k)
            o.h[k] = cvt_pair<kE5M2>(__fmul_rn(__uint_as_float(ch.e[2 * k]), scale),
                                     __fmul_rn(__uint_as_float(ch.e[2 * k + 1]), scale));
        reinterpret_cast<uint4*>(out)[c] = o.v;
    }
    for (std::size_t i = chunks * 16 + tid; i < n; i += stride) out[i] = cvt_one<kE5M2>(__fmul_rn(in[i], scale));
}

template <bool kE5M2>
void launch(const float* in, std::uint8_t* out, std::size_t n, float scale, Stream stream) {
    cvt_kernel<kE5M2><<<grid_for((n + 15) / 16), kThreads, 0, as_stream(stream)>>>(in, out, n, scale);
    check_launch("cvt_kernel");
}

}  // namespace

void quantize_e4m3_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, float scale, Stream stream) {
    launch<false>(in, out, n, scale, stream);
}
void quantize_e5m2_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, float scale, Stream stream) {
    launch<true>(in, out, n, scale, stream);
}

}  // namespace fp8kit::cuda
