// What MS-AMP's FP8 AdamW (LBAdamW, the O2 optimizer) really computes on a GPU, for lib's MsampAdam
// model (lib/src/simulate/adam.cpp). The two kernels below are adamw_fp8_stage1_kernel and
// adamw_fp8_stage2_kernel of Azure/MS-AMP msamp/optim/adamw.cu in their source order, with the
// helpers they use (msamp/common/include/common.h: cast_dtype, CUDA_KERNEL_LOOP, HIP_GET_BLOCKS;
// msamp/common/include/utils.cuh: reduce_max, atomicMaxFloat), launched as adamw_fp8_stage1_compute
// and adamw_fp8_stage2_compute launch them. The host loop is LBAdamW.adamw_fn
// (msamp/optim/adamw.py) for one parameter with an FP32 master weight and tensor_scale=True:
//   param.mul_(1 - lr * weight_decay)        (torch: float32 multiply by the scalar as float)
//   stage 1 with inv factors 1.0 / meta.scale (a Python double passed as float)
//   new scales = ScalingMeta.compute_scaling_factor(amax, ones, fp_max, 0)  (meta.py, TorchScript)
//   stage 2 with those scales.
// MS-AMP builds adamw.cu with torch's CUDAExtension and nvcc flags ['-O3'] (msamp/optim/setup.py);
// torch adds only -D__CUDA_NO_HALF_OPERATORS__ -D__CUDA_NO_HALF_CONVERSIONS__
// -D__CUDA_NO_BFLOAT16_CONVERSIONS__ -D__CUDA_NO_HALF2_OPERATORS__ --expt-relaxed-constexpr
// (torch/utils/cpp_extension.py COMMON_NVCC_FLAGS): no --use_fast_math, so nvcc's defaults
// (--fmad=true, IEEE division and square root, no flush to zero). msamp_adam_probe.sh builds it so.
//
// Usage: msamp_adam_probe OUT.bin [N, default 8192]. Deterministic inputs (a 64-bit LCG). Writes:
//   u32 magic 'MSAP', u32 sets, u32 steps, u32 n; then per set:
//     f64 lr, beta1, beta2, eps, weight_decay (the Python values), u32 exp_avg dtype, u32
//     exp_avg_sq dtype (0 = torch.uint8 (E4M3), 1 = torch.float16), n x f32 p0;
//     then per step: n x f32 g, f32 inv_m, inv_v (the factors passed to both kernels),
//     f32 amax_m, amax_v (stage 1), f32 new scale_m, scale_v, n x f32 p, n x u16 m codes,
//     n x u16 v codes (E4M3 codes in the low byte, FP16 bits).
// States start as LBAdamW creates them: zeros with scale 1.
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "probe_host.hpp"

using fp16 = half;
using fp8e4m3 = __nv_fp8_e4m3;
using index_t = int;

// ---- msamp/common/include/common.h ----
const int HIP_MAX_GRID_NUM = 65535;
const int HIP_MAX_NUM_THREADS = 512;
inline int HIP_GET_NUM_THREADS(const int n) { return HIP_MAX_NUM_THREADS; }
inline int HIP_GET_BLOCKS(const int n, const int num_threads) {
    return std::min(HIP_MAX_GRID_NUM, n + num_threads - 1) / num_threads;
}
#define CUDA_KERNEL_LOOP(i, n) for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += blockDim.x * gridDim.x)
template <typename T, typename S>
__host__ __device__ T cast_dtype(const S value) {
    return T(value);
}
template <>
__host__ __device__ fp16 cast_dtype(const float value) {
    return __float2half(value);
}
template <>
__host__ __device__ float cast_dtype(const fp16 value) {
    return __half2float(value);
}

// ---- msamp/common/include/utils.cuh ----
constexpr uint32_t THREADS_PER_WARP = 32;
template <int num_elems>
__device__ __forceinline__ float warp_reduce_max(const float m) {
    float tmp = m;
#pragma unroll
    for (int delta = num_elems / 2; delta > 0; delta /= 2) {
        const float other_m = __shfl_down_sync(0xFFFFFFFF, tmp, delta);
        __builtin_assume(tmp >= 0);
        __builtin_assume(other_m >= 0);
        tmp = fmaxf(tmp, other_m);
    }
    return tmp;
}
template <int num_warps, typename compute_t>
__device__ __forceinline__ compute_t reduce_max(const compute_t m, const int warpid) {
    __shared__ float staging[num_warps];
    constexpr int warp_size = 32;
    const float my_max = m;
    const float my_warp_max = warp_reduce_max<warp_size>(my_max);
    if (threadIdx.x % 32 == 0) {
        staging[warpid] = my_warp_max;
    }
    __syncthreads();
    compute_t result = 0;
    if (warpid == 0) {
        const float my_max = threadIdx.x < num_warps ? staging[threadIdx.x] : 0;
        result = warp_reduce_max<num_warps>(my_max);
    }
    return result;
}
__device__ __forceinline__ void atomicMaxFloat(float* addr, const float value) {
    atomicMax(reinterpret_cast<int*>(addr), __float_as_int(value));
}

// ---- msamp/optim/adamw.cu ----
template <typename T, typename S>
__global__ void adamw_fp8_stage1_kernel(index_t n, float* param, float* grad, T* exp_avg_value, float exp_avg_factor,
                                        float* exp_avg_amax, float beta1, S* exp_avg_sq_value, float exp_avg_sq_factor,
                                        float* exp_avg_sq_amax, float beta2, float eps, float step_size,
                                        float sqrt_bias_corr2) {
    const int warp_id = threadIdx.x / THREADS_PER_WARP;
    float max_exp_avg_value = 0, max_exp_avg_sq_value = 0;
    CUDA_KERNEL_LOOP(i, n) {
        float exp_avg_value_i = beta1 * cast_dtype<float>(exp_avg_value[i]) * exp_avg_factor + (1.f - beta1) * grad[i];
        float exp_avg_sq_value_i =
            beta2 * cast_dtype<float>(exp_avg_sq_value[i]) * exp_avg_sq_factor + (1.f - beta2) * (grad[i] * grad[i]);

        max_exp_avg_value = fmaxf(fabsf(exp_avg_value_i), max_exp_avg_value);
        max_exp_avg_sq_value = fmaxf(fabsf(exp_avg_sq_value_i), max_exp_avg_sq_value);

        float denom = sqrt(exp_avg_sq_value_i) / sqrt_bias_corr2 + eps;
        param[i] -= step_size * (exp_avg_value_i / denom);
    }

    max_exp_avg_value = reduce_max<HIP_MAX_NUM_THREADS / THREADS_PER_WARP>(max_exp_avg_value, warp_id);
    max_exp_avg_sq_value = reduce_max<HIP_MAX_NUM_THREADS / THREADS_PER_WARP>(max_exp_avg_sq_value, warp_id);

    if (threadIdx.x == 0) {
        atomicMaxFloat(exp_avg_amax, max_exp_avg_value);
        atomicMaxFloat(exp_avg_sq_amax, max_exp_avg_sq_value);
    }
}

template <typename T, typename S>
__global__ void adamw_fp8_stage2_kernel(index_t n, float* grad, T* exp_avg_value, float exp_avg_factor,
                                        float new_exp_avg_factor, float beta1, S* exp_avg_sq_value,
                                        float exp_avg_sq_factor, float new_exp_avg_sq_factor, float beta2) {
    CUDA_KERNEL_LOOP(i, n) {
        float exp_avg_value_i = beta1 * cast_dtype<float>(exp_avg_value[i]) * exp_avg_factor + (1.f - beta1) * grad[i];
        float exp_avg_sq_value_i =
            beta2 * cast_dtype<float>(exp_avg_sq_value[i]) * exp_avg_sq_factor + (1.f - beta2) * (grad[i] * grad[i]);
        exp_avg_value[i] = cast_dtype<T>(exp_avg_value_i * new_exp_avg_factor);
        exp_avg_sq_value[i] = cast_dtype<S>(exp_avg_sq_value_i * new_exp_avg_sq_factor);
    }
}

// ---- the torch operations adamw_fn runs around the kernels, on float32 CUDA tensors ----
// param.mul_(1 - lr * weight_decay): the Python scalar becomes the float opmath operand.
__global__ void scale_param(index_t n, float* p, float s) {
    CUDA_KERNEL_LOOP(i, n) { p[i] = p[i] * s; }
}
// ScalingMeta.compute_scaling_factor(amax, ones, fp_max, 0) (msamp/common/tensor/meta.py), as
// TorchScript runs it: fp_max / amax is reciprocal(amax) * fp_max; 1 / sf is reciprocal(sf).
__global__ void compute_scaling_factor(const float* amax, float* out, float fp_max) {
    const float a = *amax, scale = 1.0f;
    const float exp = floorf(log2f((1.0f / a) * fp_max)) - 0;
    float sf = rintf(exp2f(fabsf(exp)));
    sf = a > 0.0f ? sf : scale;
    sf = isfinite(a) ? sf : scale;
    sf = exp < 0 ? 1.0f / sf : sf;
    *out = sf;
}

namespace {
using probe::check;
using probe::uniform;
using probe::wide;

struct Set {
    double lr, beta1, beta2, eps, weight_decay;
    std::uint32_t m_dtype, v_dtype;  // 0 torch.uint8 (E4M3), 1 torch.float16
    double g_lo, g_hi;               // gradient magnitudes 2^[g_lo, g_hi)
    bool extremes;                   // also float32 subnormals and gradients whose square overflows
    // Initial weights 0 instead of 2^[-12, 1): each step's update then sets the weights' low bits,
    // so a moment that differs in its last bit shows in p.
    bool zero_p = false;
};

float gradient(const Set& s, std::uint32_t i) {
    if (i % 97 == 0) return 0.0f;
    if (s.extremes && i % 61 == 0) return wide(-149, -126);  // subnormal
    if (s.extremes && i % 251 == 0) return wide(64, 70);     // g * g overflows to Inf
    return wide(s.g_lo, s.g_hi);
}

template <typename T>
void upload_zeros(T** d, std::uint32_t n) {
    check(cudaMalloc(d, n * sizeof(T)), "cudaMalloc");
    check(cudaMemset(*d, 0, n * sizeof(T)), "cudaMemset");
}

// One LBAdamW step (adamw_fn) for one parameter, states of types T (exp_avg) and S (exp_avg_sq).
template <typename T, typename S>
void run_set(const Set& s, std::uint32_t n, std::uint32_t steps, std::FILE* out) {
    std::vector<float> p(n), g(n);
    for (std::uint32_t i = 0; i < n; ++i) p[i] = s.zero_p ? 0.0f : wide(-12, 1);
    std::fwrite(p.data(), 4, n, out);
    float *dp, *dg, *amax, *scales;
    T* dm;
    S* dv;
    check(cudaMalloc(&dp, n * 4), "cudaMalloc");
    check(cudaMalloc(&dg, n * 4), "cudaMalloc");
    check(cudaMalloc(&amax, 2 * 4), "cudaMalloc");
    check(cudaMalloc(&scales, 2 * 4), "cudaMalloc");
    upload_zeros(&dm, n);
    upload_zeros(&dv, n);
    check(cudaMemcpy(dp, p.data(), n * 4, cudaMemcpyHostToDevice), "copy p");
    const float fp_max_m = s.m_dtype == 0 ? 448.0f : 65504.0f, fp_max_v = s.v_dtype == 0 ? 448.0f : 65504.0f;
    double scale_m = 1.0, scale_v = 1.0;  // meta.scale
    const float beta1 = static_cast<float>(s.beta1), beta2 = static_cast<float>(s.beta2);
    const float eps = static_cast<float>(s.eps), lr = static_cast<float>(s.lr);
    const int threadsPerBlock = HIP_GET_NUM_THREADS(n);
    const int blocks = HIP_GET_BLOCKS(n, threadsPerBlock);
    std::vector<T> mq(n);
    std::vector<S> vq(n);
    for (std::uint32_t step = 1; step <= steps; ++step) {
        for (std::uint32_t i = 0; i < n; ++i) g[i] = gradient(s, i);
        check(cudaMemcpy(dg, g.data(), n * 4, cudaMemcpyHostToDevice), "copy g");
        // adamw_fn: _exp_avg_inv_factors = 1.0 / meta.scale; torch._foreach_zero_(amaxs)
        const float inv_m = static_cast<float>(1.0 / scale_m), inv_v = static_cast<float>(1.0 / scale_v);
        check(cudaMemset(amax, 0, 2 * 4), "zero amax");
        if (s.weight_decay != 0)
            scale_param<<<blocks, threadsPerBlock>>>(static_cast<index_t>(n), dp,
                                                     static_cast<float>(1 - s.lr * s.weight_decay));
        // adamw_fp8_stage1_compute (bias_correction=True)
        float bias_correction1 = 1 - std::pow(beta1, static_cast<int>(step));
        float bias_correction2 = 1 - std::pow(beta2, static_cast<int>(step));
        float step_size = lr / bias_correction1;
        float sqrt_bias_corr2 = std::sqrt(bias_correction2);
        adamw_fp8_stage1_kernel<<<blocks, threadsPerBlock>>>(static_cast<index_t>(n), dp, dg, dm, inv_m, amax, beta1,
                                                             dv, inv_v, amax + 1, beta2, eps, step_size,
                                                             sqrt_bias_corr2);
        check(cudaGetLastError(), "stage 1");
        compute_scaling_factor<<<1, 1>>>(amax, scales, fp_max_m);
        compute_scaling_factor<<<1, 1>>>(amax + 1, scales + 1, fp_max_v);
        float a[2], sc[2];
        check(cudaMemcpy(a, amax, 8, cudaMemcpyDeviceToHost), "copy amax");
        check(cudaMemcpy(sc, scales, 8, cudaMemcpyDeviceToHost), "copy scales");
        // .tolist(): meta.scale becomes a Python float; stage 2 gets it as float
        scale_m = sc[0], scale_v = sc[1];
        adamw_fp8_stage2_kernel<<<blocks, threadsPerBlock>>>(static_cast<index_t>(n), dg, dm, inv_m, sc[0], beta1, dv,
                                                             inv_v, sc[1], beta2);
        check(cudaGetLastError(), "stage 2");
        check(cudaMemcpy(p.data(), dp, n * 4, cudaMemcpyDeviceToHost), "copy back p");
        check(cudaMemcpy(mq.data(), dm, n * sizeof(T), cudaMemcpyDeviceToHost), "copy back m");
        check(cudaMemcpy(vq.data(), dv, n * sizeof(S), cudaMemcpyDeviceToHost), "copy back v");
        const float head[6] = {inv_m, inv_v, a[0], a[1], sc[0], sc[1]};
        std::fwrite(g.data(), 4, n, out);
        std::fwrite(head, 4, 6, out);
        std::fwrite(p.data(), 4, n, out);
        std::vector<std::uint16_t> codes(n);
        for (std::uint32_t i = 0; i < n; ++i)
            std::memcpy(&codes[i], &mq[i], sizeof(T)), codes[i] &= sizeof(T) == 1 ? 0xFF : 0xFFFF;
        std::fwrite(codes.data(), 2, n, out);
        for (std::uint32_t i = 0; i < n; ++i)
            std::memcpy(&codes[i], &vq[i], sizeof(S)), codes[i] &= sizeof(S) == 1 ? 0xFF : 0xFFFF;
        std::fwrite(codes.data(), 2, n, out);
    }
    cudaFree(dp), cudaFree(dg), cudaFree(amax), cudaFree(scales), cudaFree(dm), cudaFree(dv);
}
}  // namespace

int main(int argc, char** argv) {
    probe::name = "msamp_adam_probe";
    if (argc != 2 && argc != 3) {
        std::fprintf(stderr, "usage: msamp_adam_probe OUT.bin [N]\n");
        return 2;
    }
    const std::uint32_t n = argc == 3 ? static_cast<std::uint32_t>(std::atoi(argv[2])) : 8192u, steps = 6;
    if (n == 0) {
        std::fprintf(stderr, "msamp_adam_probe: N must be a positive number, got '%s'\n", argv[2]);
        return 2;
    }
    const Set sets[] = {
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 0, 1, -40, 2, false},
        {4e-2, 0.9, 0.95, 1e-6, 0.1, 0, 1, -20, 6, false},
        {3e-4, 0.8, 0.99, 1e-5, 0.0, 0, 1, -30, -4, false},
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 0, 1, -40, 2, true},
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1, -40, 2, false},
        {4e-2, 0.9, 0.95, 1e-6, 0.1, 1, 1, -20, 6, false},
        {3e-4, 0.8, 0.99, 1e-5, 0.0, 1, 1, -30, -4, false},
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1, -40, 2, true},
        // Where the moments' FMAs round differently from the separate multiply and add: the inverse
        // factor 1 / scale is a power of two, so (beta * state) * factor is exact unless it is
        // subnormal. Tiny first moments (scales near 2^126, gradients 2^[-128, -107)) and tiny
        // second moments (gradients 2^[-70, -50), eps 1e-30 so that sqrt(v) sets the denominator).
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 0, 1, -126, -114, false, true},
        {1e-3, 0.9, 0.999, 1e-30, 0.01, 0, 1, -70, -50, false, true},
        {1e-3, 0.9, 0.999, 1e-8, 0.01, 1, 1, -128, -107, false, true},
        {1e-3, 0.9, 0.999, 1e-30, 0.01, 1, 1, -70, -50, false, true},
    };
    const std::uint32_t nsets = sizeof(sets) / sizeof(sets[0]);
    std::FILE* out = std::fopen(argv[1], "wb");
    if (!out) {
        std::perror(argv[1]);
        return 1;
    }
    const std::uint32_t head[4] = {0x5041534Du, nsets, steps, n};
    std::fwrite(head, 4, 4, out);
    for (const Set& s : sets) {
        std::fwrite(&s.lr, 8, 5, out);
        std::fwrite(&s.m_dtype, 4, 2, out);
        if (s.m_dtype == 0)
            run_set<fp8e4m3, fp16>(s, n, steps, out);
        else
            run_set<fp16, fp16>(s, n, steps, out);
    }
    return std::fclose(out) == 0 ? 0 : 1;
}
