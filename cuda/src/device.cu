// Device helpers of the host API, and dequantize (a per-call 256-entry table made by emu::convert,
// then a vectorised gather).
#include <cstdint>
#include <dlfcn.h>
#include <map>
#include <mutex>
#include <type_traits>

#include "elementwise.cuh"
#include "narrow.cuh"

namespace fp8kit::cuda {

using namespace detail;

int device_count(std::string* why) {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        // The runtime answers cudaErrorInsufficientDriver also when no driver is installed at all
        // (libcuda.so.1 absent): "CUDA driver version is insufficient" would then send the user
        // after a driver upgrade on a machine that has no GPU. The driver library, once the
        // runtime has tried to load it, tells the two apart.
        void* driver = e == cudaErrorInsufficientDriver ? ::dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD) : nullptr;
        const bool no_driver = e == cudaErrorInsufficientDriver && !driver;
        if (driver) ::dlclose(driver);
        if (why && no_driver)
            *why = "no NVIDIA GPU driver was found (libcuda.so.1 is not installed)";
        else if (why && e == cudaErrorNoDevice)
            *why = "no NVIDIA GPU was found (the driver sees none)";
        else if (why)
            *why = cudaGetErrorString(e);
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

namespace detail {

namespace {
cudaMemPool_t scratch_pool() {
    int dev = 0;
    FP8KIT_CUDA_CHECK(cudaGetDevice(&dev));
    static std::mutex mutex;
    static std::map<int, cudaMemPool_t> pools;  // one per device, for the process's lifetime
    const std::lock_guard<std::mutex> lock(mutex);
    auto it = pools.find(dev);
    if (it != pools.end()) return it->second;
    cudaMemPoolProps props{};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = dev;
    cudaMemPool_t pool;
    FP8KIT_CUDA_CHECK(cudaMemPoolCreate(&pool, &props));
    std::uint64_t keep = std::uint64_t{64} << 20;
    FP8KIT_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
    return pools[dev] = pool;
}
}  // namespace

void* scratch_alloc(std::size_t bytes, cudaStream_t s) {
    void* p = nullptr;
    FP8KIT_CUDA_CHECK(cudaMallocFromPoolAsync(&p, bytes > 0 ? bytes : 1, scratch_pool(), s));
    return p;
}
void scratch_free(void* p, cudaStream_t s) { FP8KIT_CUDA_CHECK(cudaFreeAsync(p, s)); }

}  // namespace detail

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

// Four codes per lane per step: one 4-byte load, four table reads, one 16-byte (f32) or 8-byte
// (f16/bf16) store, so every load and store instruction of a warp covers contiguous memory
// (a thread owning 16 consecutive codes wrote 64 bytes at a 64-byte lane stride: 50% of copy).
template <class F, class W>
__global__ void __launch_bounds__(kThreads)
    dequantize_kernel(const std::uint8_t* __restrict__ in, void* __restrict__ out, std::uint32_t n, float scale_inv) {
    using Out = typename W::storage_t;
    using Vec = std::conditional_t<sizeof(Out) == 4, uint4, uint2>;
    __shared__ Out table[256];
    for (int c = threadIdx.x; c < 256; c += blockDim.x)
        table[c] = dequant_entry<F, W>(static_cast<std::uint8_t>(c), scale_inv);
    __syncthreads();
    Out* o = static_cast<Out*>(out);
    const std::uint32_t stride = gridDim.x * blockDim.x;
    const std::uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    const std::uint32_t groups = (aligned16(in) && aligned16(out)) ? n / 4 : 0;
    for (std::uint32_t g0 = tid; g0 < groups; g0 += 4 * stride) {
        std::uint32_t w[4];
#pragma unroll
        for (int j = 0; j < 4; ++j) {  // all loads first
            const std::uint32_t g = g0 + j * stride;
            w[j] = g < groups ? __ldg(reinterpret_cast<const std::uint32_t*>(in) + g) : 0u;
        }
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const std::uint32_t g = g0 + j * stride;
            if (g >= groups) break;
            union {
                Vec v;
                Out e[4];
            } r;
#pragma unroll
            for (int k = 0; k < 4; ++k) r.e[k] = table[(w[j] >> (8 * k)) & 0xFFu];
            reinterpret_cast<Vec*>(o)[g] = r.v;
        }
    }
    for (std::uint32_t i = groups * 4 + tid; i < n; i += stride) o[i] = table[in[i]];
}

}  // namespace

void dequantize(Format from, Wide to, const std::uint8_t* in, void* out, std::size_t n, float scale_inv,
                Stream stream) {
    require_input(to, "dequantize");
    const cudaStream_t s = as_stream(stream);
    const std::size_t es = wide_bytes(to);
    with_cast_format(from, [&](auto f) {  // every element format (narrow.cuh)
        with_input(to, [&](auto w) {
            for (std::size_t off = 0; off < n; off += kPiece) {  // 32-bit indices in the kernel
                const std::size_t m = n - off < kPiece ? n - off : kPiece;
                dequantize_kernel<decltype(f), decltype(w)><<<grid_per_item((m + 15) / 16), kThreads, 0, s>>>(
                    in + off, static_cast<char*>(out) + off * es, static_cast<std::uint32_t>(m), scale_inv);
            }
        });
        return 0;
    });
    check_launch("dequantize_kernel");
}

bool has_kernels(Format f) { return gpu_has_format(f); }

}  // namespace fp8kit::cuda
