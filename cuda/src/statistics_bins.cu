// The statistics of a float16 or bfloat16 tensor from a histogram of its magnitudes (issue 23: the
// monitor's every-step overhead). Why it is exact: under a deterministic rounding that treats +x
// and -x alike (nearest-even, nearest-away, toward zero) and an FP8 format with a sign, every
// number of a statistics record (docs/statistics.md) is a sum, a max or a min over the elements of
// a function of |x| alone. numerics::element_step's flags and terms depend on x, the code's kind,
// x^ and s = fl32(x * scale); the sign flips x, x^ and s together and changes none of the kinds,
// |x - x^| or the exponent bin of s (a NaN input's code is a NaN in every FP8 format, so it counts
// the same whatever its sign and payload). A 16-bit float has 2^15 magnitudes, so:
//   K1 (magnitude_histogram_kernel) reads the tensor once: a shared-memory histogram per CTA,
//       added into the workspace, and the largest non-NaN magnitude (the amax, as amax_kernel
//       defines it: NaN ignored, Inf counts);
//   K2 (evaluate_magnitudes_kernel) evaluates element_step once per magnitude present, for every
//       plan, weighted by its count, and writes the records.
// The tensor is read once for the amax and every recipe, instead of once for the amax and once per
// distinct cast (statistics.cu). Counts, extremes and the exponent histogram are integers or
// max/min and equal the element loop's exactly; the two binary64 sums are count * term per
// magnitude, added in magnitude order in a fixed tree (the same bits for any grid and launch),
// which is a different order from the element loop's: the documented 1e-9 relative tolerance.
#include <algorithm>
#include <string>
#include <vector>

#include "elementwise.cuh"
#include "stats_record.cuh"
#include "fp8kit/cuda/statistics_async.hpp"
#include "fp8kit/numerics/element_stats.hpp"

namespace fp8kit::cuda {

using namespace detail;

namespace {

constexpr int kMagnitudes = 1 << 15;                // |x| of a 16-bit float: its low 15 bits
constexpr int kBinThreads = 1024;                   // K1
constexpr int kEvalSpan = 128;                      // K2: magnitudes per CTA, one per thread
constexpr int kEvalCtas = kMagnitudes / kEvalSpan;  // and one group of kEvalSpan threads per plan
constexpr int kMaxBinPlans = 8;

// One plan as K2 reads it: the element step's constants at scale_inv 1 (K2 rescales them).
struct BinPlan {
    Format to;
    Policy policy;
    numerics::ScaleParams rule;
    numerics::ElementConsts consts;
};
struct BinPlans {
    BinPlan p[kMaxBinPlans];
    int count;
};

// watch_async's part of the workspace, after statistics_workspace_bytes(). hist, amax_mag and
// ctas_done are zero between calls (zeroed by the caller before the first, re-zeroed by K2).
struct BinsWorkspace {
    std::uint32_t hist[kMagnitudes];
    std::uint32_t amax_mag;   // K1: the largest non-NaN magnitude present (its 15 bits)
    std::uint32_t top_mag;    // K1: the largest magnitude present (NaN included)
    std::uint32_t low_not;    // K1: ~(the smallest magnitude present), max-reduced (0: none)
    std::uint32_t ctas_done;  // K2: CTAs finished; the last one completes the records
    double partial[kEvalCtas][kMaxBinPlans][kSums];
};

std::size_t bins_offset() { return (statistics_workspace_bytes() + 255) / 256 * 256; }

// K2's work on one tensor: its histogram (K1's workspace), its records and amax slot, and the
// index of its plans in the launch's groups.
struct WatchItem {
    BinsWorkspace* ws;
    float* d_amax;
    StatsRecord* recs;
    std::uint64_t numel;
    std::uint32_t group;
    std::uint32_t amax_from_histogram;  // compute_amax: K2 writes *d_amax from K1's largest magnitude
    std::uint32_t sample;               // the record's `sample` (numel is sampled_count's)
};

// One K2 launch: Items tensors (blockIdx.y) over Groups plan lists. Passed by value as one
// __grid_constant__ parameter (read in place, indexed at run time, no copy per thread): a
// batch's launch needs no host-to-device copy (CUDA 12.1's 32 KiB kernel parameters).
template <int Items, int Groups>
struct WatchLaunch {
    BinPlans groups[Groups];
    WatchItem items[Items];
};
using SingleLaunch = WatchLaunch<1, 1>;
using BatchLaunch = WatchLaunch<static_cast<int>(WatchBatch::kMaxItems), static_cast<int>(WatchBatch::kMaxGroups)>;
static_assert(sizeof(BatchLaunch) <= 32000, "K2's batch must fit the 32764 bytes of kernel parameters");

// The plans whose numbers depend on |x| alone (see the top of this file).
bool sign_symmetric(const StatsPlan& p) {
    using R = emu::Rounding;
    const bool rounding = p.policy.rounding == R::nearest_even || p.policy.rounding == R::nearest_away ||
                          p.policy.rounding == R::toward_zero;
    const bool signed_fp8 =
        p.to == Format::e4m3 || p.to == Format::e5m2 || p.to == Format::e4m3fnuz || p.to == Format::e5m2fnuz;
    return rounding && signed_fp8;
}

// ---- K1 ---------------------------------------------------------------------------------------

// sample > 1 with the amax to compute: the largest non-NaN magnitude over every element (the amax
// covers the whole tensor, only the statistics the sample). A read of the tensor with two integer
// operations per element, no shared atomics: the floor the sampled path adds to.
template <class S>
__device__ std::uint32_t whole_amax_mag(const void* in, std::uint32_t n, std::uint32_t chunks, std::uint32_t tid,
                                        std::uint32_t stride) {
    using T = typename S::storage_t;
    std::uint32_t top = 0;
    auto take = [&](T bits) {
        const std::uint32_t mag = bits & 0x7FFFu;
        top = max(top, is_nan_bits<S>(static_cast<T>(mag)) ? 0u : mag);
    };
    for (std::uint32_t c = tid; c < chunks; c += stride) {
        T e[16];
        load16<S>(in, c, e);
#pragma unroll
        for (int k = 0; k < 16; ++k) take(e[k]);
    }
    const T* in_t = static_cast<const T*>(in);
    for (std::uint32_t i = chunks * 16 + tid; i < n; i += stride) take(in_t[i]);
    return top;
}

// sample > 1: `add` over the elements of the blocks of 16 whose index is a multiple of sample (a
// partial last block included), as statistics.cu samples; consecutive threads take consecutive
// sampled blocks, so a warp's lanes all count.
template <class S, class Add>
__device__ void sampled_blocks(const void* in, std::uint32_t n, std::uint32_t chunks, std::uint32_t sample,
                               std::uint32_t tid, std::uint32_t stride, Add& add) {
    using T = typename S::storage_t;
    const T* in_t = static_cast<const T*>(in);
    const std::uint64_t blocks = (static_cast<std::uint64_t>(n) + 15u) / 16u;
    const std::uint64_t taken = (blocks + sample - 1u) / sample;
    for (std::uint64_t j = tid; j < taken; j += stride) {
        const std::uint64_t b = j * sample;
        if (b < chunks) {
            T e[16];
            load16<S>(in, static_cast<std::uint32_t>(b), e);
#pragma unroll
            for (int k = 0; k < 16; ++k) add(e[k]);
        } else {
            const std::uint64_t end = std::min<std::uint64_t>(n, 16u * b + 16u);
            for (std::uint64_t i = 16u * b; i < end; ++i) add(in_t[i]);
        }
    }
}

// One CTA per SM (128 KiB of shared counters). Zeros, the commonest single value in activations
// and gradients, are counted in a register: 32 lanes adding to one shared word would serialise.
// Each thread also keeps the smallest and largest magnitude it saw (two integer ops per element),
// so the scan at the end covers only the CTA's range of magnitudes.
template <class S>
__global__ void __launch_bounds__(kBinThreads, 1)
    magnitude_histogram_kernel(const void* __restrict__ in, std::uint32_t n, std::uint32_t sample, bool whole_amax,
                               BinsWorkspace* ws) {
    using T = typename S::storage_t;
    static_assert(sizeof(T) == 2, "16-bit inputs only");
    extern __shared__ __align__(16) std::uint32_t hist[];  // kMagnitudes
    __shared__ std::uint32_t range[2];                     // the CTA's lowest and highest magnitude
    uint4* hist4 = reinterpret_cast<uint4*>(hist);         // 16-byte stores and loads: 8 per thread
    for (int i = threadIdx.x; i < kMagnitudes / 4; i += blockDim.x) hist4[i] = make_uint4(0u, 0u, 0u, 0u);
    if (threadIdx.x == 0) {
        range[0] = kMagnitudes;
        range[1] = 0u;
    }
    __syncthreads();
    std::uint32_t zeros = 0, lo = kMagnitudes, hi = 0;
    auto add = [&](T bits) {
        const std::uint32_t mag = bits & 0x7FFFu;
        lo = min(lo, mag);
        hi = max(hi, mag);
        if (mag == 0u)
            ++zeros;
        else
            atomicAdd(hist + mag, 1u);
    };
    const std::uint32_t stride = gridDim.x * blockDim.x, tid = blockIdx.x * blockDim.x + threadIdx.x;
    const std::uint32_t chunks = aligned16(in) ? n / 16 : 0;
    const T* in_t = static_cast<const T*>(in);
    std::uint32_t whole_top = 0;  // sample > 1: the largest non-NaN magnitude of every element
    if (sample == 1) {
        // Two chunks of 16 loaded before their counts: twice the loads in flight per thread.
        for (std::uint32_t c = tid; c < chunks; c += 2 * stride) {
            T e[16], f[16];
            const bool two = c + stride < chunks;
            load16<S>(in, c, e);
            if (two) load16<S>(in, c + stride, f);
#pragma unroll
            for (int k = 0; k < 16; ++k) add(e[k]);
            if (two) {
#pragma unroll
                for (int k = 0; k < 16; ++k) add(f[k]);
            }
        }
        for (std::uint32_t i = chunks * 16 + tid; i < n; i += stride) add(in_t[i]);
    } else {
        if (whole_amax) whole_top = whole_amax_mag<S>(in, n, chunks, tid, stride);
        sampled_blocks<S>(in, n, chunks, sample, tid, stride, add);
    }
    zeros = __reduce_add_sync(0xFFFFFFFFu, zeros);
    lo = __reduce_min_sync(0xFFFFFFFFu, lo);
    hi = __reduce_max_sync(0xFFFFFFFFu, hi);
    if ((threadIdx.x & 31) == 0) {
        if (zeros != 0u) atomicAdd(hist, zeros);
        atomicMin(range, lo);
        atomicMax(range + 1, hi);
    }
    __syncthreads();
    // Into the workspace (only the magnitudes present), and the CTA's largest non-NaN magnitude
    // (the amax: the bits of a non-NaN magnitude are ordered as its value). K2's CTAs outside the
    // range of all CTAs do nothing.
    const std::uint32_t lo4 = range[0] / 4, hi4 = range[1] / 4;  // range[0] > range[1]: none
    std::uint32_t top = 0;
    for (std::uint32_t i = lo4 + threadIdx.x; i <= hi4 && range[0] <= range[1]; i += blockDim.x) {
        const uint4 v = hist4[i];
        if ((v.x | v.y | v.z | v.w) == 0u) continue;
        const std::uint32_t c4[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const std::uint32_t m = 4u * i + j, c = c4[j];
            if (c == 0u) continue;
            atomicAdd(ws->hist + m, c);
            if (!is_nan_bits<S>(static_cast<T>(m))) top = max(top, m);
        }
    }
    if (sample != 1) top = whole_top;  // the amax stays the whole tensor's (statistics_async.hpp)
    top = __reduce_max_sync(0xFFFFFFFFu, top);
    if ((threadIdx.x & 31) == 0 && top != 0u) atomicMax(&ws->amax_mag, top);
    if (threadIdx.x == 0 && range[0] <= range[1]) {
        atomicMax(&ws->top_mag, range[1]);
        atomicMax(&ws->low_not, ~range[0]);
    }
}

// ---- K2 ---------------------------------------------------------------------------------------

// emu's conversion of a float32 to the plan's format (run-time format: once per magnitude, out
// of line so that the dispatch over every format is compiled once).
__device__ __noinline__ std::uint8_t encode_scaled(Format to, std::uint32_t s, Policy policy) {
    return emu::encode(to, emu::Wide::f32, s, policy, 0u);
}
__device__ __noinline__ std::uint32_t decode_code(Format to, std::uint8_t q) {
    return static_cast<std::uint32_t>(emu::decode(to, emu::Wide::f32, q));
}

// The code of s under plan p. Nearest-even with saturate-all into E4M3/E5M2 is what
// cvt.rn.satfinite computes for every input but a NaN, whatever the NaN encoding (the encoding
// acts on NaN inputs only, emu/include/fp8kit/emu/policy.hpp; the cast kernels' kCvt path, checked
// against emu::convert by the exhaustive check): one instruction instead of emu's conversion.
__device__ __forceinline__ std::uint8_t encode_fast(const BinPlan& p, std::uint32_t s) {
    const bool cvt = p.policy.rounding == emu::Rounding::nearest_even &&
                     p.policy.overflow == emu::Overflow::saturate_all && (s & 0x7FFFFFFFu) <= 0x7F800000u;
    if (cvt && p.to == Format::e4m3) return cvt_one<emu::E4M3>(s);
    if (cvt && p.to == Format::e5m2) return cvt_one<emu::E5M2>(s);
    return encode_scaled(p.to, s, p.policy);
}

// What one thread adds for one plan (its magnitude times its count).
struct BinAcc {
    std::uint32_t count[kCounts];  // one magnitude per thread: at most its count (all counts add to n < 2^31)
    double sum[kSums];
    std::uint32_t amax, min_nz;  // float32 bits of |x| over finite x (min: nonzero)
};

// element_step of the magnitude `mag` (count c > 0) under plan p at (scale, scale_inv); the
// exponent bin of s goes to the CTA's histogram.
template <class S>
__device__ __forceinline__ void evaluate_magnitude(std::uint32_t mag, std::uint32_t c, const BinPlan& p, float scale,
                                                   float scale_inv, BinAcc& a, std::uint32_t* hist) {
    using T = typename S::storage_t;
    const T bits = static_cast<T>(mag);
    const float x = widen<S>(bits);
    const std::uint32_t s = scaled_bits<S>(bits, scale);
    const std::uint8_t q = encode_fast(p, s);
    numerics::ElementConsts consts = p.consts;
    numerics::rescale(consts, scale_inv);
    const std::uint32_t decoded = decode_code(p.to, q);
    const numerics::Element e = numerics::element_step(x, numerics::code_kind_of_decoded(p.to, decoded),
                                                       static_cast<double>(__uint_as_float(decoded)), consts,
                                                       [&] { return numerics::overflows(consts, s); });
    const std::uint32_t w = c;
    a.count[kZeros] += e.zero ? w : 0;
    a.count[kNan] += e.nan ? w : 0;
    a.count[kInf] += e.inf ? w : 0;
    a.count[kUnderflow] += e.underflow ? w : 0;
    a.count[kSubnormal] += e.subnormal ? w : 0;
    a.count[kOverflow] += e.overflow ? w : 0;
    a.count[kTeOverflow] += e.te_overflow ? w : 0;
    a.count[kNonzeroX] += e.nonzero_x ? w : 0;
    a.count[kNonzeroQ] += e.nonzero_q ? w : 0;
    atomicAdd(hist + numerics::histogram_bin(s), w);
    if (e.finite) {
        const std::uint32_t ax = __float_as_uint(x);  // x >= 0 here
        a.amax = max(a.amax, ax);
        if (ax != 0u) a.min_nz = min(a.min_nz, ax);
        // count * term: the term the element loop adds c times, multiplied once (x^2 of a 16-bit
        // float times an integer below 2^31 is exact; err2 rounds once).
        a.sum[kX2] += static_cast<double>(c) * e.x2;
        a.sum[kErr2] += static_cast<double>(c) * e.err2;
    }
}

// The CTA's integer totals of one plan: kCounts counts, then amax and ~min (max-reduced).
constexpr int kCtaInts = kCounts + 2;

// The warp's totals of its plan into the CTA's (shared atomics, exact in any order; the CTA adds
// them to the record with one global atomic each) and its two sums into sums[warp]. A warp whose
// lanes hold no magnitude adds nothing.
__device__ __forceinline__ void flush_warp(BinAcc& a, bool warp_has, double (*sums)[kSums], std::uint32_t* cta_ints) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    if (warp_has) {
        // Integer totals with the warp reduction instruction: a total is at most n < 2^31.
        std::uint32_t total[kCounts];
#pragma unroll
        for (int j = 0; j < kCounts; ++j) total[j] = __reduce_add_sync(0xFFFFFFFFu, a.count[j]);
        const std::uint32_t amax = __reduce_max_sync(0xFFFFFFFFu, a.amax),
                            min_nz = __reduce_min_sync(0xFFFFFFFFu, a.min_nz);
#pragma unroll
        for (int o = 16; o > 0; o >>= 1)
#pragma unroll
            for (int j = 0; j < kSums; ++j) a.sum[j] += __shfl_xor_sync(0xFFFFFFFFu, a.sum[j], o);
        if (lane == 0) {
            for (int j = 0; j < kCounts; ++j)
                if (total[j]) atomicAdd(cta_ints + j, total[j]);
            atomicMax(cta_ints + kCounts, amax);
            atomicMax(cta_ints + kCounts + 1, ~min_nz);  // max of ~ = min; ~0xFFFFFFFF = 0: none
        }
    }
    if (lane == 0)
        for (int j = 0; j < kSums; ++j) sums[warp][j] = warp_has ? a.sum[j] : 0.0;
}

// The CTA's integer totals into the records: one global atomic per nonzero total.
__device__ __forceinline__ void flush_cta_ints(const std::uint32_t (*cta_ints)[kCtaInts], int count,
                                               StatsRecord* recs) {
    for (int t = threadIdx.x; t < count * kCtaInts; t += blockDim.x) {
        const int p = t / kCtaInts, j = t % kCtaInts;
        const std::uint32_t v = cta_ints[p][j];
        if (v == 0u) continue;
        if (j < kCounts)
            atomicAdd(reinterpret_cast<unsigned long long*>(recs[p].counts + j), static_cast<unsigned long long>(v));
        else if (j == kCounts)
            atomicMax(&recs[p].amax_bits, v);
        else
            atomicMax(&recs[p].min_not, v);
    }
}

// The last CTA: each record's two sums, the partials of the CTAs that took part (cta_lo ..
// cta_hi) added in a fixed order (warp w takes (plan, sum) pairs w, w + warps, ...: lane l adds
// CTAs cta_lo + l, cta_lo + l + 32, ... in order, then a butterfly); then the rest of each record.
__device__ void complete_records(int count, const float (*pair)[2], const bool* ok, const WatchItem& item,
                                 BinsWorkspace* ws, std::uint32_t cta_lo, std::uint32_t cta_hi) {
    StatsRecord* const recs = item.recs;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    for (int kj = warp; kj < count * kSums; kj += warps) {
        const int k = kj / kSums, j = kj % kSums;
        if (!ok[k]) continue;
        // All of a lane's loads first (one round trip, not one per load), then the adds in order.
        double v[kEvalCtas / 32];
#pragma unroll
        for (int r = 0; r < kEvalCtas / 32; ++r) {
            const std::uint32_t b = cta_lo + lane + 32u * r;
            v[r] = b <= cta_hi ? __ldcg(&ws->partial[b][k][j]) : 0.0;
        }
        double t = 0;
#pragma unroll
        for (int r = 0; r < kEvalCtas / 32; ++r) t += v[r];
#pragma unroll
        for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xFFFFFFFFu, t, o);
        if (lane == 0) recs[k].sums[j] = t;
    }
    if (static_cast<int>(threadIdx.x) < count) {
        const int k = threadIdx.x;
        StatsRecord* r = recs + k;
        if (ok[k]) {
            r->min_bits = ~atomicOr(&r->min_not, 0u);
            r->scale_ok = 1u;
        }
        r->scale = pair[k][0];
        r->scale_inv = pair[k][1];
        r->numel = item.numel;
        r->sample = item.sample;
    }
}

// kEvalSpan magnitudes per CTA of tensor blockIdx.y, blockDim = kEvalSpan * (the launch's largest
// plan count): thread t evaluates magnitude first + t % kEvalSpan under plan t / kEvalSpan (idle
// when its tensor has fewer plans), so the plans of a magnitude run in parallel warps (the
// evaluation is a long dependent chain: emu's conversion, element_step).
template <class S, int Items, int Groups>
__global__ void __launch_bounds__(kEvalSpan* kMaxBinPlans)
    evaluate_magnitudes_kernel(const __grid_constant__ WatchLaunch<Items, Groups> launch) {
    using T = typename S::storage_t;
    constexpr int kWarpsPerPlan = kEvalSpan / 32;
    const WatchItem& item = launch.items[blockIdx.y];
    const BinPlans& plans = launch.groups[item.group];
    BinsWorkspace* const ws = item.ws;
    StatsRecord* const recs = item.recs;
    const bool amax_from_histogram = item.amax_from_histogram != 0u;
    __shared__ BinPlan plan[kMaxBinPlans];
    __shared__ float amax_s;
    __shared__ float pair[kMaxBinPlans][2];
    __shared__ bool ok[kMaxBinPlans];
    // 32-bit counters (native shared atomics; 64-bit ones are a compare-and-swap loop): a bin's
    // total is at most n < 2^31.
    __shared__ std::uint32_t hist[kMaxBinPlans][numerics::kHistogramBins];
    __shared__ double sums[kMaxBinPlans * kWarpsPerPlan][kSums];
    __shared__ std::uint32_t cta_ints[kMaxBinPlans][kCtaInts];
    __shared__ bool last;
    // Only the CTAs whose magnitudes meet K1's range [low, top] take part (CTA 0 alone when the
    // tensor is empty): the others hold zero counts and return at once, so the launch costs what
    // the range holds, not 2^15 magnitudes. The range is read before anything is reset (the last
    // taking part resets it, after every CTA that takes part has read it).
    const std::uint32_t low_not = __ldcg(&ws->low_not), top = __ldcg(&ws->top_mag);
    const std::uint32_t cta_lo = low_not ? ~low_not / kEvalSpan : 0u, cta_hi = low_not ? top / kEvalSpan : 0u;
    if (blockIdx.x < cta_lo || blockIdx.x > cta_hi) return;
    const int count = plans.count;
    if (static_cast<int>(threadIdx.x) < count) plan[threadIdx.x] = plans.p[threadIdx.x];
    if (threadIdx.x == 0) amax_s = amax_from_histogram ? widen<S>(static_cast<T>(__ldcg(&ws->amax_mag))) : *item.d_amax;
    const std::uint32_t first = blockIdx.x * kEvalSpan, mag = first + threadIdx.x % kEvalSpan;
    const int k = threadIdx.x / kEvalSpan;
    const bool mine = k < count;  // this thread has a plan of its tensor
    const std::uint32_t c = __ldcg(ws->hist + mag);
    const bool cta_has = __syncthreads_or(c != 0u);  // also: plan and amax_s written
    if (static_cast<int>(threadIdx.x) < count) {     // each plan's scale: the rule at the amax
        const numerics::BlockScale b = numerics::rule_scale(plan[threadIdx.x].rule, amax_s);
        pair[threadIdx.x][0] = b.scale;
        pair[threadIdx.x][1] = b.scale_inv;
        ok[threadIdx.x] = usable(b.scale, b.scale_inv);
    }
    if (cta_has) {
        for (int b = threadIdx.x; b < count * numerics::kHistogramBins; b += blockDim.x) (&hist[0][0])[b] = 0u;
        for (int b = threadIdx.x; b < count * kCtaInts; b += blockDim.x) (&cta_ints[0][0])[b] = 0u;
    }
    __syncthreads();  // every plan's counts read before plan 0's threads zero them
    if (cta_has) {
        if (k == 0 && c != 0u) ws->hist[mag] = 0u;                                // left zeroed for the next call
        const bool warp_has = __any_sync(0xFFFFFFFFu, mine && c != 0u && ok[k]);  // uniform per warp
        BinAcc a{};
        a.min_nz = 0xFFFFFFFFu;
        if (mine && c != 0u && ok[k]) evaluate_magnitude<S>(mag, c, plan[k], pair[k][0], pair[k][1], a, hist[k]);
        flush_warp(a, warp_has, sums, mine ? cta_ints[k] : nullptr);
        __syncthreads();
        flush_cta_ints(cta_ints, count, recs);
        for (int b = threadIdx.x; b < count * numerics::kHistogramBins; b += blockDim.x) {
            const int p = b / numerics::kHistogramBins, bin = b % numerics::kHistogramBins;
            if (hist[p][bin])
                atomicAdd(reinterpret_cast<unsigned long long*>(recs[p].histogram + bin),
                          static_cast<unsigned long long>(hist[p][bin]));
        }
    }
    if (static_cast<int>(threadIdx.x) < count * kSums) {  // the CTA's partial sums, warps in order
        const int p = threadIdx.x / kSums, j = threadIdx.x % kSums;
        double t = 0;
        if (cta_has)
            for (int w = 0; w < kWarpsPerPlan; ++w) t += sums[p * kWarpsPerPlan + w][j];
        ws->partial[blockIdx.x][p][j] = t;
    }
    // The last CTA taking part to finish (threadFenceReduction, as statistics.cu) completes the
    // records: the barrier makes the CTA's writes visible to thread 0, whose fence (cumulative)
    // makes them visible to the device before its count.
    __syncthreads();
    if (threadIdx.x == 0) {
        __threadfence();
        last = atomicAdd(&ws->ctas_done, 1u) == cta_hi - cta_lo;
    }
    __syncthreads();
    if (!last) return;
    __threadfence();
    complete_records(count, pair, ok, item, ws, cta_lo, cta_hi);
    if (threadIdx.x == 0) {
        if (amax_from_histogram) *item.d_amax = amax_s;
        ws->amax_mag = ws->top_mag = ws->low_not = 0u;
        ws->ctas_done = 0u;
    }
}

// numerics::element_consts(to, policy, 1) (two binary searches through emu's conversion, some
// microseconds: the monitor calls watch_async for every tensor of every step), remembered per
// thread for the (format, policy) pairs met so far.
numerics::ElementConsts element_consts_cached(Format to, const Policy& p) {
    struct Entry {
        Format to;
        Policy policy;
        numerics::ElementConsts consts;
    };
    thread_local std::vector<Entry> cache;
    for (const Entry& e : cache)
        if (e.to == to && e.policy.rounding == p.rounding && e.policy.overflow == p.overflow && e.policy.nan == p.nan)
            return e.consts;
    cache.push_back({to, p, numerics::element_consts(to, p, 1.0f)});
    return cache.back().consts;
}

// K2's view of plans[0 .. count) (count <= kMaxBinPlans).
BinPlans bin_plans(const StatsPlan* plans, std::size_t count) {
    BinPlans bp{};
    bp.count = static_cast<int>(count);
    for (std::size_t k = 0; k < count; ++k) {
        const StatsPlan& p = plans[k];
        bp.p[k] = {p.to, p.policy, p.rule, element_consts_cached(p.to, p.policy)};
    }
    return bp;
}

// K1: the magnitude histogram of `in` into ws.
template <class S>
void launch_histogram(const void* in, std::size_t n, std::uint32_t sample, bool whole_amax, BinsWorkspace* ws,
                      cudaStream_t s) {
    constexpr int smem = kMagnitudes * 4;
    static const unsigned sms = [] {
        FP8KIT_CUDA_CHECK(
            cudaFuncSetAttribute(magnitude_histogram_kernel<S>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
        int dev = 0, count = 0;
        FP8KIT_CUDA_CHECK(cudaGetDevice(&dev));
        FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, dev));
        return static_cast<unsigned>(std::max(1, count));
    }();
    // At least 32 elements per thread (each CTA zeroes and scans 2^15 counters and adds the ones it
    // holds into the workspace), at most one CTA per SM: the shared-memory atomics bound the rate.
    const unsigned grid =
        static_cast<unsigned>(std::min<std::size_t>(sms, std::max<std::size_t>(1, n / (kBinThreads * 32))));
    magnitude_histogram_kernel<S>
        <<<grid, kBinThreads, smem, s>>>(in, static_cast<std::uint32_t>(n), sample, whole_amax, ws);
    check_launch("magnitude_histogram_kernel");
}

// K2 over launch.items[0 .. items), blockDim for the largest plan count among them.
template <class S, int Items, int Groups>
void launch_evaluate(const WatchLaunch<Items, Groups>& launch, unsigned items, int max_plans, cudaStream_t s) {
    evaluate_magnitudes_kernel<S, Items, Groups><<<dim3(kEvalCtas, items), kEvalSpan * max_plans, 0, s>>>(launch);
    check_launch("evaluate_magnitudes_kernel");
}

// K1 and K2 for plans[0 .. count) (count <= kMaxBinPlans), records d_records[0 .. count).
template <class S>
void launch_bins(const StatsPlan* plans, std::size_t count, const void* in, std::size_t n, float* d_amax,
                 bool compute_amax, StatsRecord* d_records, std::uint32_t sample, BinsWorkspace* ws, cudaStream_t s) {
    SingleLaunch launch{};
    launch.groups[0] = bin_plans(plans, count);
    launch.items[0] = {ws, d_amax, d_records, sampled_count(n, sample), 0u, compute_amax ? 1u : 0u, sample};
    launch_histogram<S>(in, n, sample, compute_amax, ws, s);
    launch_evaluate<S>(launch, 1u, static_cast<int>(count), s);
}

// How many of plans[0 .. count) the magnitude path takes (a leading run of sign-symmetric plans
// of the tensor's input type, at most kMaxBinPlans; 0 for float32 tensors). Sampled tensors take it
// too: K1 then histograms the sampled blocks only and reads the rest for the amax alone.
std::size_t bins_plans(const StatsPlan* plans, std::size_t count) {
    const Wide from = count ? plans[0].from : Wide::f32;
    std::size_t bins = 0;
    if (from == Wide::f16 || from == Wide::bf16)
        while (bins < count && bins < kMaxBinPlans && plans[bins].from == from && sign_symmetric(plans[bins])) ++bins;
    return bins;
}

}  // namespace

std::size_t watch_workspace_bytes() { return bins_offset() + sizeof(BinsWorkspace); }

void watch_async(const StatsPlan* plans, std::size_t count, const void* in, std::size_t n, float* d_amax,
                 bool compute_amax, StatsRecord* d_records, void* d_workspace, std::uint32_t sample, std::uint64_t seed,
                 std::uint64_t first_index, Stream stream) {
    for (std::size_t k = 0; k < count; ++k)
        check_async_args(plans[k], d_amax, d_records, d_workspace, sample, n, "watch_async");
    const cudaStream_t s = as_stream(stream);
    const Wide from = count ? plans[0].from : Wide::f32;
    // The magnitude path takes a leading run of sign-symmetric plans (records contiguous from 0);
    // the plans after it take statistics_async one by one, at the amax K2 wrote.
    const std::size_t bins = bins_plans(plans, count);
    if (bins == 0) {
        if (compute_amax) amax(from, in, n, d_amax, stream);
        if (count)
            statistics_async_multi(plans, count, in, n, d_amax, d_records, d_workspace, sample, seed, first_index,
                                   stream);
        return;
    }
    auto* ws = reinterpret_cast<BinsWorkspace*>(static_cast<char*>(d_workspace) + bins_offset());
    if (from == Wide::bf16)
        launch_bins<BFloat16>(plans, bins, in, n, d_amax, compute_amax, d_records, sample, ws, s);
    else
        launch_bins<Binary16>(plans, bins, in, n, d_amax, compute_amax, d_records, sample, ws, s);
    for (std::size_t k = bins; k < count; ++k)
        statistics_async(plans[k].to, plans[k].from, in, n, plans[k].policy, plans[k].rule, d_amax, d_records + k,
                         d_workspace, sample, seed, first_index, stream);
}

// ---- WatchBatch ----------------------------------------------------------------------------

namespace {

bool same_bits(float a, float b) { return __builtin_memcmp(&a, &b, sizeof a) == 0; }
bool same_bits(double a, double b) { return __builtin_memcmp(&a, &b, sizeof a) == 0; }

// Field by field (the structs have padding): the same plan, so the same BinPlan.
bool same_plan(const StatsPlan& a, const StatsPlan& b) {
    const numerics::ScaleParams &r = a.rule, &t = b.rule;
    return a.to == b.to && a.from == b.from && a.policy.rounding == b.policy.rounding &&
           a.policy.overflow == b.policy.overflow && a.policy.nan == b.policy.nan && r.rule == t.rule &&
           r.format == t.format && same_bits(r.epsilon, t.epsilon) && r.pow2 == t.pow2 &&
           same_bits(r.value_for_inf, t.value_for_inf) && r.margin == t.margin && same_bits(r.fmax, t.fmax) &&
           r.emax == t.emax && same_bits(r.global_amax, t.global_amax) && same_bits(r.global_encode, t.global_encode) &&
           same_bits(r.te_s_dec, t.te_s_dec) && same_bits(r.te_byte_factor, t.te_byte_factor) &&
           same_bits(r.torchao_pts, t.torchao_pts) && same_bits(r.torchao_pts_inv, t.torchao_pts_inv);
}

}  // namespace

struct WatchBatch::Impl {
    // The tensors of one input type waiting for K2, as its launch will read them.
    struct Pending {
        BatchLaunch launch{};
        std::vector<StatsPlan> group_plans[kMaxGroups];  // launch.groups[g]'s plans, to find them again
        unsigned items = 0, groups = 0;
        int max_plans = 0;
    };
    cudaStream_t stream;
    void* general = nullptr;            // watch_workspace_bytes(), zeroed: add()'s immediate path
    std::vector<BinsWorkspace*> slots;  // one histogram per pending tensor, zeroed between uses
    Pending bf16, f16;

    std::size_t used() const { return bf16.items + f16.items; }

    void* zeroed(std::size_t bytes) {
        void* p = nullptr;
        FP8KIT_CUDA_CHECK(cudaMallocAsync(&p, bytes, stream));
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream));
        return p;
    }
    BinsWorkspace* slot(std::size_t i) {
        while (slots.size() <= i) slots.push_back(static_cast<BinsWorkspace*>(zeroed(sizeof(BinsWorkspace))));
        return slots[i];
    }
    // The index of plans[0 .. count) among p's groups; kMaxGroups when they are new and p is full.
    unsigned group_of(Pending& p, const StatsPlan* plans, std::size_t count) {
        for (unsigned g = 0; g < p.groups; ++g) {
            const std::vector<StatsPlan>& q = p.group_plans[g];
            bool same = q.size() == count;
            for (std::size_t k = 0; same && k < count; ++k) same = same_plan(q[k], plans[k]);
            if (same) return g;
        }
        if (p.groups == kMaxGroups) return kMaxGroups;
        p.group_plans[p.groups].assign(plans, plans + count);
        p.launch.groups[p.groups] = bin_plans(plans, count);
        return p.groups++;
    }
    template <class S>
    void evaluate(Pending& p) {
        if (p.items == 0) return;
        launch_evaluate<S>(p.launch, p.items, p.max_plans, stream);
        p.items = p.groups = 0;
        p.max_plans = 0;
    }
};

WatchBatch::WatchBatch(Stream stream) : impl_(std::make_unique<Impl>()) { impl_->stream = as_stream(stream); }

WatchBatch::~WatchBatch() {
    // Stream-ordered: after everything queued. Errors are ignored (the context may be gone at exit).
    for (BinsWorkspace* w : impl_->slots) (void)cudaFreeAsync(w, impl_->stream);
    if (impl_->general) (void)cudaFreeAsync(impl_->general, impl_->stream);
}

std::size_t WatchBatch::pending() const { return impl_->used(); }

void WatchBatch::add(const StatsPlan* plans, std::size_t count, const void* in, std::size_t n, float* d_amax,
                     bool compute_amax, StatsRecord* d_records, std::uint32_t sample, std::uint64_t seed,
                     std::uint64_t first_index) {
    Impl& b = *impl_;
    const std::size_t bins = bins_plans(plans, count);
    if (bins == 0 || bins < count) {  // not (only) the magnitude path: all of it now
        if (b.general == nullptr) b.general = b.zeroed(watch_workspace_bytes());
        watch_async(plans, count, in, n, d_amax, compute_amax, d_records, b.general, sample, seed, first_index,
                    b.stream);
        return;
    }
    for (std::size_t k = 0; k < count; ++k)
        check_async_args(plans[k], d_amax, d_records, this, sample, n, "WatchBatch::add");
    Impl::Pending* p = plans[0].from == Wide::bf16 ? &b.bf16 : &b.f16;
    unsigned g = b.group_of(*p, plans, count);
    if (g == kMaxGroups || b.used() == kMaxItems) {  // a full launch: evaluate what is pending first
        flush();
        g = b.group_of(*p, plans, count);
    }
    BinsWorkspace* ws = b.slot(b.used());
    if (plans[0].from == Wide::bf16)
        launch_histogram<BFloat16>(in, n, sample, compute_amax, ws, b.stream);
    else
        launch_histogram<Binary16>(in, n, sample, compute_amax, ws, b.stream);
    p->launch.items[p->items++] = {ws, d_amax, d_records, sampled_count(n, sample), g, compute_amax ? 1u : 0u, sample};
    p->max_plans = std::max(p->max_plans, static_cast<int>(count));
}

void WatchBatch::flush() {
    impl_->evaluate<BFloat16>(impl_->bf16);
    impl_->evaluate<Binary16>(impl_->f16);
}

}  // namespace fp8kit::cuda
