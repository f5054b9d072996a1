// Device helpers of the host API, and dequantize (a per-call 256-entry table made by emu::convert,
// then a vectorised gather).
#include "common.cuh"

namespace fp8kit::cuda {

using namespace detail;

int device_count(std::string* why) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        if (why) *why = cudaGetErrorString(e);
        cudaGetLastError();  // clear the sticky error so later calls start clean
        return 0;
    }
    if (n == 0 && why) *why = "cudaGetDeviceCount returned 0 devices";
    return n;
}

std::string device_name() {
    int dev = 0;
    FP8KIT_CUDA_CHECK(cudaGetDevice(&dev));
    cudaDeviceProp p{};
    FP8KIT_CUDA_CHECK(cudaGetDeviceProperties(&p, dev));
    return p.name;
}

void* device_alloc(std::size_t bytes) {
    void* p = nullptr;
    FP8KIT_CUDA_CHECK(cudaMalloc(&p, bytes > 0 ? bytes : 1));
    return p;
}
void device_free(void* p) { FP8KIT_CUDA_CHECK(cudaFree(p)); }
void copy_to_device(void* dst, const void* src, std::size_t bytes) {
    FP8KIT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice));
}
void copy_to_host(void* dst, const void* src, std::size_t bytes) {
    FP8KIT_CUDA_CHECK(cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost));
}
void device_memset(void* p, int value, std::size_t bytes) { FP8KIT_CUDA_CHECK(cudaMemset(p, value, bytes)); }
void synchronize() { FP8KIT_CUDA_CHECK(cudaDeviceSynchronize()); }

namespace {

template <class F, class W>
__device__ typename W::storage_t dequant_entry(std::uint8_t code, float scale_inv) {
    using Out = typename W::storage_t;
    const auto v = static_cast<std::uint32_t>(emu::convert<F, Binary32>(code, emu::kDecodePolicy));
    if (scale_inv == 1.0f || is_nan_bits<Binary32>(v)) return emu::convert<F, W>(code, emu::kDecodePolicy);
    const float y = __fmul_rn(__uint_as_float(v), scale_inv);
    const std::uint32_t yb = (y != y) ? 0x7FC00000u : __float_as_uint(y);
    return static_cast<Out>(emu::convert<Binary32, W>(yb, emu::kDecodePolicy));
}

template <class F, class W>
__global__ void __launch_bounds__(kThreads)
dequantize_kernel(const std::uint8_t* __restrict__ in, void* __restrict__ out, std::size_t n, float scale_inv) {
    using Out = typename W::storage_t;
    __shared__ Out table[256];
    for (int c = threadIdx.x; c < 256; c += blockDim.x) table[c] = dequant_entry<F, W>(static_cast<std::uint8_t>(c), scale_inv);
    __syncthreads();
    Out* o = static_cast<Out*>(out);
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::size_t chunks = (aligned16(in) && aligned16(out)) ? n / 16 : 0;
    for (std::size_t c = tid; c < chunks; c += stride) {
        union { uint4 v; std::uint8_t b[16]; } codes;
        codes.v = __ldg(reinterpret_cast<const uint4*>(in) + c);
        union { uint4 v[16 * sizeof(Out) / 16]; Out e[16]; } r;
#pragma unroll
        for (int k = 0; k < 16; ++k) r.e[k] = table[codes.b[k]];
        uint4* dst = reinterpret_cast<uint4*>(o + c * 16);
#pragma unroll
        for (int k = 0; k < static_cast<int>(16 * sizeof(Out) / 16); ++k) dst[k] = r.v[k];
    }
    for (std::size_t i = chunks * 16 + tid; i < n; i += stride) o[i] = table[in[i]];
}

}  // namespace

void dequantize(Format from, Wide to, const std::uint8_t* in, void* out, std::size_t n,
                float scale_inv, Stream stream) {
    require_input(to, "dequantize");
    const unsigned grid = grid_for((n + 15) / 16);
    const cudaStream_t s = as_stream(stream);
    with_fp8(from, [&](auto f) {
        with_input(to, [&](auto w) {
            dequantize_kernel<decltype(f), decltype(w)><<<grid, kThreads, 0, s>>>(in, out, n, scale_inv);
        });
        return 0;
    });
    check_launch("dequantize_kernel");
}

}  // namespace fp8kit::cuda
