// One-pass statistics of a tensor under a format, policy and scale: fp8kit::compute_stats's
// numbers (docs/statistics.md) in its result type, each element through numerics::element_step
// (numerics/include/fp8kit/numerics/element_stats.hpp), the code through element.cuh. Counts go
// through integer atomics (exact in any order); the binary64 sums are written per CTA and added
// by one thread in CTA order, so a given device and launch always gives the same sums.
#include <cfloat>
#include <string>
#include <vector>

#include "elementwise.cuh"
#include "fp8kit/numerics/element_stats.hpp"

namespace fp8kit::cuda {

using namespace detail;
using numerics::kHistogramBins;

namespace {

enum Count { kZeros, kNan, kInf, kUnderflow, kSubnormal, kOverflow, kTeOverflow, kNonzeroX, kNonzeroQ, kCounts };
enum Sum { kX2, kErr2, kSums };

struct Acc {
    unsigned long long count[kCounts];
    std::uint32_t cnt[kCounts];  // per element; added into count after each 16-element step
    double sum[kSums];
    std::uint32_t amax, min_nz;  // float32 bits of |x|
};

struct Globals {
    unsigned long long* counts;     // kCounts
    unsigned long long* histogram;  // kHistogramBins
    unsigned int* amax;
    unsigned int* min_nz;
    double* partial;                // gridDim.x * kSums
};

struct Params {
    Format format;
    float scale;
    numerics::ElementConsts consts;
};

// One histogram increment per distinct bin in the warp (warp-aggregated): lanes with the same bin
// are found with one match, and the lowest of them adds their number. Counts are integers, so the
// result is the same as one atomic per element.
__device__ __forceinline__ void histogram_add(std::uint32_t* hist, int bin) {
    const unsigned active = __activemask();
    const unsigned peers = __match_any_sync(active, bin);
    if (static_cast<int>(threadIdx.x & 31) == __ffs(peers) - 1) atomicAdd(hist + bin, static_cast<std::uint32_t>(__popc(peers)));
}

// Tables every CTA fills at start from emu/numerics: x^ = decode(code) * scale_inv in binary64
// (exact: a short code value times a float32, so computing it once per code gives the same double
// as element_step's per-element product) and the kind of every code.
struct CodeTables {
    double xhat[256];
    numerics::CodeKind kind[256];
};

// numerics::stochastic_overflows out of line: it encodes through the run-time format dispatch,
// which inlined per element made the kernels slow to compile; it runs only for |s| > max finite.
__device__ __noinline__ bool stochastic_overflow_call(const numerics::ElementConsts& c, Format f, Policy p,
                                                      std::uint32_t s, std::uint32_t random) {
    return numerics::stochastic_overflows(c, f, p, s, random);
}

// Element with input bits `bits`, code q, stochastic random word `random` (0 otherwise).
template <class S, int R>
__device__ __forceinline__ void stat_element(typename S::storage_t bits, std::uint32_t s, std::uint8_t q,
                                             std::uint32_t random, Acc& acc, std::uint32_t* hist,
                                             const CodeTables& t, const Params& prm, const Policy& policy,
                                             const numerics::ElementConsts& consts1) {
    const float x = widen<S>(bits);
    histogram_add(hist, numerics::histogram_bin(s));
    // consts1: prm.consts with scale_inv 1, since t.xhat already holds decode(q) * scale_inv.
    const numerics::Element e = numerics::element_step(x, t.kind[q], t.xhat[q], consts1, [&] {
        if constexpr (R == static_cast<int>(emu::Rounding::stochastic))
            return (s & 0x7FFFFFFFu) > prm.consts.max_bits && stochastic_overflow_call(prm.consts, prm.format, policy, s, random);
        else
            return numerics::overflows(prm.consts, s);
    });
    acc.cnt[kZeros] += e.zero;
    acc.cnt[kNan] += e.nan;
    acc.cnt[kInf] += e.inf;
    acc.cnt[kUnderflow] += e.underflow;
    acc.cnt[kSubnormal] += e.subnormal;
    acc.cnt[kOverflow] += e.overflow;
    acc.cnt[kTeOverflow] += e.te_overflow;
    acc.cnt[kNonzeroX] += e.nonzero_x;
    acc.cnt[kNonzeroQ] += e.nonzero_q;
    if (e.finite) {
        const std::uint32_t a = __float_as_uint(fabsf(x));
        acc.amax = max(acc.amax, a);
        if (a != 0u) acc.min_nz = min(acc.min_nz, a);
        acc.sum[kX2] += e.x2;
        acc.sum[kErr2] += e.err2;
    }
}

__device__ __forceinline__ void flush_counts(Acc& acc) {
#pragma unroll
    for (int k = 0; k < kCounts; ++k) {
        acc.count[k] += acc.cnt[k];
        acc.cnt[k] = 0;
    }
}

// Codes of four elements of y (stream indices index0..+3) and their random words.
template <class D, int P, int R>
__device__ __forceinline__ void codes_four(const std::uint32_t (&y)[4], const ElementCtx& c, std::uint64_t index0,
                                           std::uint8_t (&q)[4], std::uint32_t (&rnd)[4]) {
    if constexpr (R == static_cast<int>(emu::Rounding::stochastic)) {
        if ((index0 & 3u) == 0) {
            const emu::PhiloxWords w = emu::philox4x32_10(c.seed, index0 >> 2);
#pragma unroll
            for (int k = 0; k < 4; ++k) rnd[k] = w.w[k];
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) rnd[k] = stochastic_word(c.seed, index0 + k);
        }
#pragma unroll
        for (int k = 0; k < 4; ++k) q[k] = stochastic_code<D, P, R>(y[k], c, rnd[k]);
    } else {
        const std::uint32_t w = encode_four<D, P, R>(y, c, index0);
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            q[k] = static_cast<std::uint8_t>(w >> (8 * k));
            rnd[k] = 0;
        }
    }
}

template <class S, class D, int P, int R>
__global__ void __launch_bounds__(kThreads)
statistics_kernel(const void* __restrict__ in, std::uint32_t n, ElementCtx ctx, const std::uint8_t* __restrict__ table,
                  Params prm, std::uint64_t first_index, Globals g) {
    using T = typename S::storage_t;
    constexpr int kWarps = kThreads / 32;
    extern __shared__ __align__(16) std::uint8_t smem[];
    __shared__ std::uint32_t hist[kWarps][kHistogramBins];  // one per warp: less contention
    __shared__ double sums[kWarps][kSums];
    __shared__ CodeTables tables;
    for (int i = threadIdx.x; i < kWarps * kHistogramBins; i += blockDim.x) (&hist[0][0])[i] = 0u;
    for (int c = threadIdx.x; c < 256; c += blockDim.x) {
        tables.xhat[c] = static_cast<double>(__uint_as_float(static_cast<std::uint32_t>(
                             emu::convert<D, Binary32>(static_cast<std::uint8_t>(c), emu::kDecodePolicy)))) *
                         prm.consts.scale_inv;
        tables.kind[c] = numerics::code_kind(prm.format, static_cast<std::uint8_t>(c));
    }
    load_cast_table<D, P>(ctx, table, smem);  // synchronizes the CTA
    __syncthreads();

    numerics::ElementConsts consts1 = prm.consts;
    consts1.scale_inv = 1.0;
    std::uint32_t* my_hist = hist[threadIdx.x >> 5];
    Acc acc{};
    acc.min_nz = 0xFFFFFFFFu;
    const std::uint32_t stride = gridDim.x * blockDim.x;
    const std::uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    const std::uint32_t chunks = aligned16(in) ? n / 16 : 0;
    for (std::uint32_t c = tid; c < chunks; c += stride) {
        T e[16];
        load16<S>(in, c, e);
#pragma unroll
        for (int g4 = 0; g4 < 4; ++g4) {
            std::uint32_t y[4], rnd[4];
            std::uint8_t q[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) y[k] = scaled_bits<S>(e[4 * g4 + k], prm.scale);
            codes_four<D, P, R>(y, ctx, first_index + 16ull * c + 4 * g4, q, rnd);
#pragma unroll
            for (int k = 0; k < 4; ++k) stat_element<S, R>(e[4 * g4 + k], y[k], q[k], rnd[k], acc, my_hist, tables, prm, ctx.policy, consts1);
        }
        flush_counts(acc);  // at most 16 per counter since the last flush: no 32-bit overflow
    }
    const T* in_t = static_cast<const T*>(in);
    for (std::uint32_t i = chunks * 16 + tid; i < n; i += stride) {
        const std::uint32_t y = scaled_bits<S>(in_t[i], prm.scale);
        const std::uint32_t rnd = R == static_cast<int>(emu::Rounding::stochastic) ? stochastic_word(ctx.seed, first_index + i) : 0u;
        const std::uint8_t q = R == static_cast<int>(emu::Rounding::stochastic) ? stochastic_code<D, P, R>(y, ctx, rnd)
                                                                                 : encode_one<D, P, R>(y, ctx, first_index + i);
        stat_element<S, R>(in_t[i], y, q, rnd, acc, my_hist, tables, prm, ctx.policy, consts1);
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

numerics::QuantStats statistics(Format to, Wide from, const void* in, std::size_t n, const Policy& policy,
                                float scale, float scale_inv, std::uint64_t seed, std::uint64_t first_index,
                                Stream stream) {
    require_input(from, "statistics");
    require_gpu_format(to, "statistics");
    if (!(scale > 0.0f) || scale > FLT_MAX)
        throw std::invalid_argument("fp8kit::cuda::statistics: scale " + std::to_string(scale) + " must be finite and > 0");
    if (scale_inv == 0.0f) scale_inv = 1.0f / scale;
    if (!(scale_inv > 0.0f) || scale_inv > FLT_MAX)
        throw std::invalid_argument("fp8kit::cuda::statistics: scale_inv " + std::to_string(scale_inv) + " must be finite and > 0");
    if (n >= kPiece) throw std::invalid_argument("fp8kit::cuda::statistics: at most 2^31 - 1 elements per call");
    const Params prm{to, scale, numerics::element_consts(to, policy, scale_inv)};
    const cudaStream_t s = as_stream(stream);
    const std::uint8_t* table = element_table(to, policy, s);
    const ElementCtx ctx{policy, nullptr, seed};
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
            using S = decltype(si);
            using D = decltype(di);
            with_element_path(to, policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                if constexpr (path_exists<D, P, R>())
                    statistics_kernel<S, D, P, R><<<grid, kThreads, element_smem<D, P>(), s>>>(
                        in, static_cast<std::uint32_t>(n), ctx, table, prm, first_index, g);
            });
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

    numerics::QuantStats r;
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
    r.amax = numerics::float_of(amax_bits);
    r.min_nonzero = numerics::float_of(min_bits);
    double sums[kSums];
    std::memcpy(sums, host.data() + off_sums, sizeof sums);
    r.sum_x2 = sums[kX2];
    r.sum_err2 = sums[kErr2];
    return r;
}

}  // namespace fp8kit::cuda
