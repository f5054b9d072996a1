// The layout of a StatsRecord's counters and sums as the statistics kernels fill them, written once
// for statistics.cu (the element loop), statistics_bins.cu (the magnitude histogram) and
// block_statistics.cu (per-tile scales), and read by stats_of_record; and the end of a kernel
// that fills one record from every CTA (statistics.cu, block_statistics.cu).
#pragma once

#include <cfloat>

#include "fp8kit/cuda/statistics_async.hpp"
#include "fp8kit/numerics/element_stats.hpp"

namespace fp8kit::cuda::detail {

enum Count { kZeros, kNan, kInf, kUnderflow, kSubnormal, kOverflow, kTeOverflow, kNonzeroX, kNonzeroQ, kCounts };
enum Sum { kX2, kErr2, kSums };
static_assert(sizeof(StatsRecord) % 8 == 0, "records are copied as 64-bit words");
static_assert(kCounts <= 16 && kSums == 2, "StatsRecord holds 16 counters and 2 sums");

// A scale pair the statistics can use (finite and > 0 both); otherwise the record says scale_ok 0.
__device__ __forceinline__ bool usable(float scale, float scale_inv) {
    return scale > 0.0f && scale <= FLT_MAX && scale_inv > 0.0f && scale_inv <= FLT_MAX;
}

// One thread's running totals over the elements it visited (statistics.cu's element loop,
// block_statistics.cu's tiles). 32-bit counts: every total, even over a whole grid, is at most
// n < 2^31 (the hosts split larger tensors), and fewer registers keep more warps resident.
struct StatsAcc {
    std::uint32_t count[kCounts];
    double sum[kSums];
    std::uint32_t amax, min_nz;  // float32 bits of |x| over finite x (min_nz: nonzero; 0xFFFFFFFF: none)
};

// One element's numerics::element_step result (x: the input as float32) added to a thread's totals.
__device__ __forceinline__ void add_element(StatsAcc& a, const numerics::Element& e, float x) {
    a.count[kZeros] += e.zero;
    a.count[kNan] += e.nan;
    a.count[kInf] += e.inf;
    a.count[kUnderflow] += e.underflow;
    a.count[kSubnormal] += e.subnormal;
    a.count[kOverflow] += e.overflow;
    a.count[kTeOverflow] += e.te_overflow;
    a.count[kNonzeroX] += e.nonzero_x;
    a.count[kNonzeroQ] += e.nonzero_q;
    if (e.finite) {
        const std::uint32_t ax = __float_as_uint(fabsf(x));
        a.amax = max(a.amax, ax);
        if (ax != 0u) a.min_nz = min(a.min_nz, ax);
        a.sum[kX2] += e.x2;
        a.sum[kErr2] += e.err2;
    }
}

// The end of a statistics kernel that fills one record from every CTA, in two calls, both by
// every thread of the CTA (blockDim.x a multiple of 32, at most kMaxWarps warps):
// 1. add_warp_totals: the warp's counts and extremes go to *rec by one atomic each (integers:
//    exact in any order) and its sums to sums[warp].
// 2. finish_record (after the CTA's __syncthreads and its other atomics): the CTA's sums, added
//    over its warps in warp order, to partial[blockIdx.x]; the last CTA to finish (CUDA's
//    threadFenceReduction pattern) adds every CTA's partials in a fixed order and writes
//    rec->sums and rec->min_bits; it returns true there (on every thread of that CTA), so the
//    caller writes its own fields. The order: thread t adds CTAs t, t + blockDim, ... in order,
//    each warp its 32 by a shuffle butterfly (both lanes of a pair add the same two numbers), then
//    the warps in order; so a given device and grid always give the same bits. All threads load:
//    one thread adding gridDim partials one after another made every launch wait for up to 1056
//    dependent L2 round trips.
inline constexpr int kMaxWarps = 32;

__device__ __forceinline__ void add_warp_totals(StatsAcc& a, StatsRecord* rec, double (*sums)[kSums]) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int k = 0; k < kCounts; ++k) a.count[k] = __reduce_add_sync(0xFFFFFFFFu, a.count[k]);
    a.amax = __reduce_max_sync(0xFFFFFFFFu, a.amax);
    a.min_nz = __reduce_min_sync(0xFFFFFFFFu, a.min_nz);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int k = 0; k < kSums; ++k) a.sum[k] += __shfl_xor_sync(0xFFFFFFFFu, a.sum[k], o);
    if (lane == 0) {
        for (int k = 0; k < kCounts; ++k)
            if (a.count[k])
                atomicAdd(reinterpret_cast<unsigned long long*>(rec->counts + k),
                          static_cast<unsigned long long>(a.count[k]));
        if (a.amax) atomicMax(&rec->amax_bits, a.amax);
        if (a.min_nz != 0xFFFFFFFFu) atomicMax(&rec->min_not, ~a.min_nz);  // max of ~ = min
        for (int k = 0; k < kSums; ++k) sums[warp][k] = a.sum[k];
    }
}

__device__ __forceinline__ bool finish_record(double (*sums)[kSums], double* partial, StatsRecord* rec) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = static_cast<int>(blockDim.x >> 5);
    __shared__ bool last;
    __syncthreads();  // every warp's sums[] written
    if (threadIdx.x < kSums) {
        double s = 0;
        for (int w = 0; w < warps; ++w) s += sums[w][threadIdx.x];  // fixed order
        partial[static_cast<std::size_t>(blockIdx.x) * kSums + threadIdx.x] = s;
    }
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0) last = atomicAdd(&rec->ctas_done, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last) return false;
    __threadfence();
#pragma unroll
    for (int k = 0; k < kSums; ++k) {
        double s = 0;
        for (unsigned b = threadIdx.x; b < gridDim.x; b += blockDim.x)
            s += __ldcg(partial + static_cast<std::size_t>(b) * kSums + k);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xFFFFFFFFu, s, o);
        if (lane == 0) sums[warp][k] = s;  // free: read before the __syncthreads above
    }
    __syncthreads();
    if (threadIdx.x < kSums) {
        double s = 0;
        for (int w = 0; w < warps; ++w) s += sums[w][threadIdx.x];  // fixed order
        rec->sums[threadIdx.x] = s;
    }
    if (threadIdx.x == 0) rec->min_bits = ~atomicOr(&rec->min_not, 0u);
    return true;
}

// The checks every asynchronous statistics entry point makes of one plan and its buffers
// (statistics.cu); `fn` names the entry point in the message.
void check_async_args(const StatsPlan& p, const float* d_amax, const void* d_record, const void* d_workspace,
                      std::uint32_t sample, std::size_t n, const char* fn);

}  // namespace fp8kit::cuda::detail
