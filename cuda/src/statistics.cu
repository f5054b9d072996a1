// One-pass statistics of a tensor under a format, policy and scale: the numbers of
// fp8kit::compute_stats, defined in docs/statistics.md. Counts go through integer atomics (exact in any order); the binary64 sums
// are written per CTA and added by one thread in CTA order, so a given device and launch always
// gives the same sums.
#include <cfloat>
#include <string>
#include <vector>

#include <math_constants.h>

#include "common.cuh"

namespace fp8kit::cuda {

using namespace detail;

namespace {

enum Count { kZeros, kNan, kInf, kUnderflow, kSubnormal, kOverflow, kTeOverflow, kNonzeroX, kNonzeroQ, kCounts };
enum Sum { kX2, kErr2, kSums };

struct Acc {
    unsigned long long count[kCounts];
    std::uint32_t cnt[kCounts];  // per element; added into count after each chunk (16 elements)
    double sum[kSums];
    std::uint32_t amax, min_nz;
};

struct Globals {
    unsigned long long* counts;   // kCounts
    unsigned long long* histogram;  // kHistogramBins
    unsigned int* amax;
    unsigned int* min_nz;
    double* partial;              // gridDim.x * kSums
};

// Bin of s from its bits (docs/statistics.md): 0 zero, 1 + e + 149 for floor(log2|s|) = e,
// 278 NaN/Inf.
__device__ __forceinline__ int histogram_bin(std::uint32_t s) {
    const std::uint32_t mag = s & 0x7FFFFFFFu;
    if (mag == 0u) return 0;
    if (mag >= 0x7F800000u) return kHistogramBins - 1;
    const int e = mag >= 0x00800000u ? static_cast<int>(mag >> 23) - 127 : (31 - __clz(mag)) - 149;
    return 1 + e + 149;
}

struct Params {
    Policy policy;
    float scale, scale_inv, te_threshold;  // te_threshold = fl32(fmax * scale_inv)
    std::uint64_t seed, first_index;
};

// One histogram increment per distinct bin in the warp (warp-aggregated): lanes with the same bin
// are found with one match, and the lowest of them adds their number. Counts are integers, so the
// result is the same as one atomic per element.
__device__ __forceinline__ void histogram_add(std::uint32_t* hist, int bin) {
    const unsigned active = __activemask();
    const unsigned peers = __match_any_sync(active, bin);
    if (static_cast<int>(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(hist + bin, static_cast<std::uint32_t>(__popc(peers)));
}

// R: kNearestEven fixes the rounding at compile time (convert's rounding switch folds away);
// kRuntime reads prm.policy.rounding. `decoded` holds emu::convert<D, Binary32> of all 256 codes.
template <class S, class D, int R>
__device__ __forceinline__ void stat_element(typename S::storage_t bits, Acc& acc, std::uint32_t* hist,
                                             const float* decoded, const Params& prm, std::uint64_t index) {
    const float x = widen<S>(bits);
    const std::uint32_t s = __float_as_uint(__fmul_rn(x, prm.scale));  // scale is finite and > 0
    // A NaN input gives a NaN s, so its bin is the NaN/Inf bin, as before the split below.
    histogram_add(hist, histogram_bin(s));
    if (is_nan_bits<S>(bits)) {  // any NaN input becomes a NaN code: nonzero on both sides
        ++acc.cnt[kNan];
        ++acc.cnt[kNonzeroX];
        ++acc.cnt[kNonzeroQ];
        return;
    }
    const std::uint32_t a = __float_as_uint(fabsf(x));
    const bool finite = a < 0x7F800000u;
    Policy policy = prm.policy;
    if (R == kNearestEven) policy.rounding = emu::Rounding::nearest_even;
    const std::uint32_t random =
        (R == kRuntime && policy.rounding == emu::Rounding::stochastic) ? emu::stochastic_bits(prm.seed, index) : 0u;
    const std::uint8_t code = emu::convert<Binary32, D>(s, policy, random);
    const float v = decoded[code];
    const float av = fabsf(v);
    acc.cnt[kNonzeroX] += a != 0u;
    acc.cnt[kNonzeroQ] += !(v == 0.0f);  // NaN counts as nonzero
    if (__uint_as_float(a) > prm.te_threshold) ++acc.cnt[kTeOverflow];
    if (!finite) {
        ++acc.cnt[kInf];
        return;
    }
    acc.amax = max(acc.amax, a);
    if (a == 0u) {
        ++acc.cnt[kZeros];
    } else {
        acc.min_nz = min(acc.min_nz, a);
        const float min_normal = D::has_subnormals ? __uint_as_float(static_cast<std::uint32_t>(D::emin + 127) << 23) : 0.0f;
        if (D::has_zero && v == 0.0f) ++acc.cnt[kUnderflow];
        else if (D::has_subnormals && av < min_normal) ++acc.cnt[kSubnormal];
    }
    // Overflow (rounds past the largest finite value whatever the policy then does): only a code
    // at +-max finite or non-finite can come from an overflow; confirm under no-saturate.
    const bool v_finite = av <= 3.402823466e38f;
    const float max_finite = __uint_as_float(static_cast<std::uint32_t>(
        emu::convert<D, Binary32>(static_cast<std::uint8_t>(D::max_finite_code), emu::kDecodePolicy)));
    if (!v_finite || av == max_finite) {
        const Policy nosat{policy.rounding, emu::Overflow::no_saturate, policy.nan};
        const float w = decoded[emu::convert<Binary32, D>(s, nosat, random)];
        if (!(fabsf(w) <= 3.402823466e38f)) ++acc.cnt[kOverflow];
    }
    const double xd = x;
    const double xh = static_cast<double>(v) * static_cast<double>(prm.scale_inv);
    const double e = xd - xh;
    acc.sum[kX2] += xd * xd;
    acc.sum[kErr2] += isfinite(xh) ? e * e : CUDART_INF;
}

__device__ __forceinline__ void flush_counts(Acc& acc) {
#pragma unroll
    for (int k = 0; k < kCounts; ++k) {
        acc.count[k] += acc.cnt[k];
        acc.cnt[k] = 0;
    }
}

template <class S, class D, int R>
__global__ void __launch_bounds__(kThreads)
statistics_kernel(const void* __restrict__ in, std::size_t n, Params prm, Globals g) {
    using T = typename S::storage_t;
    constexpr int kWarps = kThreads / 32;
    __shared__ std::uint32_t hist[kWarps][kHistogramBins];  // one per warp: less contention
    __shared__ double sums[kWarps][kSums];
    __shared__ float decoded[256];  // the decode of every code, through emu::convert
    for (int i = threadIdx.x; i < kWarps * kHistogramBins; i += blockDim.x) (&hist[0][0])[i] = 0u;
    for (int c = threadIdx.x; c < 256; c += blockDim.x)
        decoded[c] = __uint_as_float(static_cast<std::uint32_t>(
            emu::convert<D, Binary32>(static_cast<std::uint8_t>(c), emu::kDecodePolicy)));
    __syncthreads();

    std::uint32_t* my_hist = hist[threadIdx.x >> 5];
    Acc acc{};
    acc.min_nz = 0xFFFFFFFFu;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    const std::size_t tid = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    const std::size_t chunks = aligned16(in) ? n / Chunk<S>::kElems : 0;
    for (std::size_t c = tid; c < chunks; c += stride) {
        Chunk<S> ch;
        load_chunk<S>(ch, in, c);
#pragma unroll 4
        for (int k = 0; k < Chunk<S>::kElems; ++k)
            stat_element<S, D, R>(ch.e[k], acc, my_hist, decoded, prm, prm.first_index + c * Chunk<S>::kElems + k);
        flush_counts(acc);  // at most 16 per counter since the last flush: no 32-bit overflow
    }
    const T* in_t = static_cast<const T*>(in);
    for (std::size_t i = chunks * Chunk<S>::kElems + tid; i < n; i += stride) {
        stat_element<S, D, R>(in_t[i], acc, my_hist, decoded, prm, prm.first_index + i);
        flush_counts(acc);
    }

    // Counts and extremes: warp shuffles, then one atomic per warp.
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
#pragma unroll
        for (int k = 0; k < kCounts; ++k) acc.count[k] += __shfl_xor_sync(0xFFFFFFFFu, acc.count[k], o);
#pragma unroll
        for (int k = 0; k < kSums; ++k) acc.sum[k] += __shfl_xor_sync(0xFFFFFFFFu, acc.sum[k], o);
        acc.amax = max(acc.amax, __shfl_xor_sync(0xFFFFFFFFu, acc.amax, o));
        acc.min_nz = min(acc.min_nz, __shfl_xor_sync(0xFFFFFFFFu, acc.min_nz, o));
    }
    if (lane == 0) {
        for (int k = 0; k < kCounts; ++k)
            if (acc.count[k]) atomicAdd(g.counts + k, acc.count[k]);
        if (acc.amax) atomicMax(g.amax, acc.amax);
        if (acc.min_nz != 0xFFFFFFFFu) atomicMin(g.min_nz, acc.min_nz);
        for (int k = 0; k < kSums; ++k) sums[warp][k] = acc.sum[k];
    }
    __syncthreads();
    if (threadIdx.x < kSums) {
        double s = 0;
        for (int w = 0; w < kWarps; ++w) s += sums[w][threadIdx.x];  // fixed order
        g.partial[static_cast<std::size_t>(blockIdx.x) * kSums + threadIdx.x] = s;
    }
    for (int b = threadIdx.x; b < kHistogramBins; b += blockDim.x) {
        unsigned long long t = 0;
        for (int w = 0; w < kWarps; ++w) t += hist[w][b];
        if (t) atomicAdd(g.histogram + b, t);
    }
}

__global__ void sum_partials(const double* partial, unsigned blocks, double* out) {
    if (threadIdx.x < kSums) {
        double s = 0;
        for (unsigned b = 0; b < blocks; ++b) s += partial[static_cast<std::size_t>(b) * kSums + threadIdx.x];
        out[threadIdx.x] = s;
    }
}

}  // namespace

Statistics statistics(Format to, Wide from, const void* in, std::size_t n, const Policy& policy,
                      float scale, float scale_inv, std::uint64_t seed, std::uint64_t first_index,
                      Stream stream) {
    require_input(from, "statistics");
    if (!(scale > 0.0f) || scale > FLT_MAX)
        throw std::invalid_argument("fp8kit::cuda::statistics: scale " + std::to_string(scale) + " must be finite and > 0");
    if (scale_inv == 0.0f) scale_inv = 1.0f / scale;
    if (!(scale_inv > 0.0f) || scale_inv > FLT_MAX)
        throw std::invalid_argument("fp8kit::cuda::statistics: scale_inv " + std::to_string(scale_inv) + " must be finite and > 0");
    const Params prm{policy, scale, scale_inv, format_max(to) * scale_inv, seed, first_index};
    const cudaStream_t s = as_stream(stream);
    const unsigned grid = grid_for((n + 15) / 16);

    // One allocation: counts, histogram, amax, min, per-CTA partial sums, final sums.
    const std::size_t off_hist = kCounts * 8, off_amax = off_hist + kHistogramBins * 8,
                      off_min = off_amax + 8, off_partial = off_min + 8,
                      off_sums = off_partial + static_cast<std::size_t>(grid) * kSums * 8,
                      bytes = off_sums + kSums * 8;
    char* buf = nullptr;
    FP8KIT_CUDA_CHECK(cudaMallocAsync(reinterpret_cast<void**>(&buf), bytes, s));
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(buf, 0, bytes, s));
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(buf + off_min, 0xFF, 4, s));
    Globals g{reinterpret_cast<unsigned long long*>(buf), reinterpret_cast<unsigned long long*>(buf + off_hist),
              reinterpret_cast<unsigned int*>(buf + off_amax), reinterpret_cast<unsigned int*>(buf + off_min),
              reinterpret_cast<double*>(buf + off_partial)};
    with_input(from, [&](auto si) {
        with_fp8(to, [&](auto di) {
            if (policy.rounding == emu::Rounding::nearest_even)
                statistics_kernel<decltype(si), decltype(di), kNearestEven><<<grid, kThreads, 0, s>>>(in, n, prm, g);
            else
                statistics_kernel<decltype(si), decltype(di), kRuntime><<<grid, kThreads, 0, s>>>(in, n, prm, g);
            return 0;
        });
    });
    check_launch("statistics_kernel");
    sum_partials<<<1, 32, 0, s>>>(g.partial, grid, reinterpret_cast<double*>(buf + off_sums));
    check_launch("sum_partials");

    std::vector<char> host(bytes);
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(host.data(), buf, bytes, cudaMemcpyDeviceToHost, s));
    FP8KIT_CUDA_CHECK(cudaFreeAsync(buf, s));
    FP8KIT_CUDA_CHECK(cudaStreamSynchronize(s));

    Statistics r;
    std::uint64_t counts[kCounts];
    std::memcpy(counts, host.data(), sizeof counts);
    r.numel = n;
    r.zeros = counts[kZeros];
    r.nan = counts[kNan];
    r.inf = counts[kInf];
    r.underflow = counts[kUnderflow];
    r.subnormal = counts[kSubnormal];
    r.overflow = counts[kOverflow];
    r.te_overflow = counts[kTeOverflow];
    r.te_underflow = static_cast<std::int64_t>(counts[kNonzeroX]) - static_cast<std::int64_t>(counts[kNonzeroQ]);
    std::memcpy(r.exp_hist.data(), host.data() + off_hist, kHistogramBins * 8);
    std::uint32_t amax_bits, min_bits;
    std::memcpy(&amax_bits, host.data() + off_amax, 4);
    std::memcpy(&min_bits, host.data() + off_min, 4);
    if (min_bits == 0xFFFFFFFFu) min_bits = 0;
    float amax_f, min_f;
    std::memcpy(&amax_f, &amax_bits, 4);
    std::memcpy(&min_f, &min_bits, 4);
    r.amax = amax_f;
    r.min_nonzero = min_f;
    double sums[kSums];
    std::memcpy(sums, host.data() + off_sums, sizeof sums);
    r.sum_x2 = sums[kX2];
    r.sum_err2 = sums[kErr2];
    return r;
}

}  // namespace fp8kit::cuda
