// One-pass statistics of a tensor under a format, policy and scale: fp8kit::compute_stats's
// numbers (docs/statistics.md) in its result type: each element through numerics::element_step
// (numerics/include/fp8kit/numerics/element_stats.hpp), or, for the common elements, through the
// fast path that computes what element_step gives them (see fast_group); the code through
// element.cuh. Counts go
// through integer atomics (exact in any order); the binary64 sums are written per CTA and added
// by one thread in CTA order, so a given device and launch always gives the same sums.
// Both entry points (statistics: host scale, host result; statistics_async: scale from a device
// amax, result in a device record) run this one kernel on a zeroed StatsRecord, so they give the
// same numbers for the same scale; the last CTA to finish adds the partial sums in a fixed order and
// completes the record (one launch per call).
#include <algorithm>
#include <cfloat>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_fp8.h>

#include "elementwise.cuh"
#include "stats_record.cuh"
#include "fp8kit/cuda/statistics_async.hpp"
#include "fp8kit/numerics/element_stats.hpp"
#include "fp8kit/numerics/packed_kinds.hpp"

namespace fp8kit::cuda {

using namespace detail;
using numerics::kHistogramBins;

namespace {

using Acc = StatsAcc;

struct Globals {
    StatsRecord* rec;  // zeroed by the caller; completed by the last CTA
    double* partial;   // gridDim.x * kSums (the workspace)
};

struct Params {
    Format format;
    float scale;                     // the caller's (d_amax null) or, in the kernel, the rule's
    numerics::ElementConsts consts;  // scale-dependent part (rescale) set in the kernel
    std::uint32_t fast_hi;           // min(max_bits, limit[0], limit[1]): |s| at most this never overflows
    std::uint32_t te_bits;           // bits of consts.te_threshold (> 0, possibly +Inf), set in the kernel
    std::uint32_t sample;            // blocks of 16 elements counted: those whose index is a multiple of it
    float scale_inv;                 // the caller's (d_amax null)
    const float* d_amax;             // not null: scale, scale_inv = numerics::rule_scale(rule, *d_amax)
    numerics::ScaleParams rule;
    std::uint64_t numel;  // sampled_count(n, sample), for the record
    // statistics_async_multi's aliases (see there): a plan whose numbers equal an earlier plan's
    // whenever the two rules give the same scale pair at the amax. alias_src not null: when
    // rule_scale(alias_rule) equals this launch's usable pair, CTA 0 copies the record at
    // alias_src (complete: its launch came earlier on the stream) and the launch does nothing else.
    const StatsRecord* alias_src;
    numerics::ScaleParams alias_rule;
};

// One histogram increment per distinct bin in the warp (warp-aggregated): lanes with the same bin
// are found with one match, and the lowest of them adds their number. Counts are integers, so the
// result is the same as one atomic per element.
__device__ __forceinline__ void histogram_add(std::uint32_t* hist, int bin) {
    const unsigned active = __activemask();
    const unsigned peers = __match_any_sync(active, bin);
    if (static_cast<int>(threadIdx.x & 31) == __ffs(peers) - 1)
        atomicAdd(hist + bin, static_cast<std::uint32_t>(__popc(peers)));
}

// Tables every CTA fills at start from emu/numerics: x^ = decode(code) * scale_inv in binary64
// (exact: a short code value times a float32, so computing it once per code gives the same double
// as element_step's per-element product) and the kind of every code.
// inc: the fast path's packed counter increment of a code (see fast_four): kind zero -> 1 (an
// underflow: the fast path's x is nonzero), kind subnormal -> 1 << 5, and 0x80 for a NaN/Inf code
// (never on the fast path: such an element takes element_step). One byte per code, at
// inc_index(code): the bytes of four neighbouring codes share a shared-memory word, and the
// negative codes sit 16 banks away from the positive codes of the same magnitude, so the lanes of
// a warp rarely read different words of one bank (ncu at 6c3f513: 3.1-way bank conflicts on the
// shared loads with one 32-bit entry per code). xhat likewise at xhat_index(code): a 64-bit load
// serves 16 lanes per 128 bytes, so negative codes sit 8 entries (half of those 16 bank pairs)
// away from the positive codes of the same magnitude.
struct CodeTables {
    double xhat[264];
    numerics::CodeKind kind[256];
    std::uint8_t inc[512];
};

__device__ __forceinline__ int inc_index(std::uint32_t code) { return static_cast<int>(code + (code >> 7) * 64u); }
__device__ __forceinline__ int xhat_index(std::uint32_t code) { return static_cast<int>(code + (code >> 7) * 8u); }

// numerics::stochastic_overflows out of line: it encodes through the run-time format dispatch,
// which inlined per element made the kernels slow to compile; it runs only for |s| > max finite.
__device__ __noinline__ bool stochastic_overflow_call(const numerics::ElementConsts& c, Format f, Policy p,
                                                      std::uint32_t s, std::uint32_t random) {
    return numerics::stochastic_overflows(c, f, p, s, random);
}

// Element with input bits `bits`, scaled bits s, code q and stream index `index` (its random word, drawn
// again here only for a stochastic element past the largest finite magnitude).
template <class S, int R>
__device__ __forceinline__ void stat_element(typename S::storage_t bits, std::uint32_t s, std::uint8_t q,
                                             const ElementCtx& ctx, std::uint64_t index, Acc& acc, std::uint32_t* hist,
                                             const CodeTables& t, const Params& prm, const Policy& policy,
                                             const numerics::ElementConsts& consts1) {
    const float x = widen<S>(bits);
    histogram_add(hist, numerics::histogram_bin(s));
    // consts1: prm.consts with scale_inv 1, since t.xhat already holds decode(q) * scale_inv.
    const numerics::Element e = numerics::element_step(x, t.kind[q], t.xhat[xhat_index(q)], consts1, [&] {
        if constexpr (R == static_cast<int>(emu::Rounding::stochastic))
            return (s & 0x7FFFFFFFu) > prm.consts.max_bits &&
                   stochastic_overflow_call(prm.consts, prm.format, policy, s, stochastic_word(ctx.seed, index));
        else
            return numerics::overflows(prm.consts, s);
    });
    add_element(acc, e, x);
}

// The fast path (issue 14: the per-element work is integer counting and the two binary64 terms).
// It takes an element whose x is finite and nonzero, whose s = fl32(x * scale) is a normal float32
// of magnitude at most fast_hi (so it overflows under no rounding: fast_hi <= max finite and <= the
// overflow limits) and whose code is not NaN/Inf. For such an element element_step gives: zero,
// nan, inf, overflow false; nonzero_x true; underflow = (kind zero); subnormal = (kind
// subnormal); nonzero_q = !underflow (x^ = 0 exactly for a zero code only); te_overflow =
// |x| > te_threshold (compared as bits: both non-negative, neither NaN); finite, with x2 = x^2 and
// err2 = (x - x^)^2, x^ finite. Its histogram bin (s normal) is 1 + floor_log2|s| + 149, a
// function of the exponent field alone, counted per (field, lane) in hist_fast without conflicts
// between the lanes of a warp. Everything else goes through stat_element.
// The test per group of four (2026-11-26: taking exactly the groups that main's per-element
// test took, with fewer instructions): first on the plain products p = fl32(x * scale), without
// scaled_bits' NaN selects: each |p| a normal float32 of at most fast_hi. p normal implies x
// finite and nonzero (a NaN, Inf or zero x gives a NaN, Inf or zero product under a finite scale
// > 0), and for an x that is not a NaN, p is scaled_bits. Then, on the codes, no NaN/Inf code
// (fast_codes_ok; one test of the four increments OR-ed).
__device__ __forceinline__ bool fast_group(const std::uint32_t (&p)[4], const Params& prm) {
    bool ok = true;
#pragma unroll
    for (int k = 0; k < 4; ++k) ok &= (p[k] & 0x7FFFFFFFu) - 0x00800000u <= prm.fast_hi - 0x00800000u;
    return ok;
}

// 2026-11-26: where D allows, the fast path reads neither table. The kinds of its four codes
// come from the packed code word by SWAR bit operations (numerics::packed_kinds, derived from D's
// traits), and for the OCP formats E4M3 and E5M2 x^ from the hardware's exact decode
// (cvt.rn.f16x2.e4m3x2 / .e5m2x2 through cuda_fp8.h's __nv_cvt_fp8x2_to_halfraw2: every finite
// code is a binary16 value; the fast path has no NaN/Inf code). Other formats keep the tables.
template <class D>
constexpr bool kSwarKinds = numerics::packed_kinds_apply<D>();
template <class D>
constexpr bool kHwDecode = std::is_same_v<D, emu::E4M3> || std::is_same_v<D, emu::E5M2>;

// The fast path's code test and packed counts of four codes (code k in bits 8k..8k+7 of w; q the
// same codes): false for a NaN/Inf code; else inc = the sum of their increments (kind zero -> 1,
// subnormal -> 1 << 5; see fast_four).
template <class D>
__device__ __forceinline__ bool fast_codes(std::uint32_t w, const std::uint8_t (&q)[4], const CodeTables& t,
                                           std::uint32_t& inc) {
    if constexpr (kSwarKinds<D>) {
        const numerics::PackedKinds k = numerics::packed_kinds<D>(w);
        inc = __popc(k.zero) + (__popc(k.subnormal) << 5);
        return k.special == 0u;
    } else {
        std::uint32_t i[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) i[k] = t.inc[inc_index(q[k])];
        inc = i[0] + i[1] + i[2] + i[3];
        return ((i[0] | i[1] | i[2] | i[3]) & 0x80u) == 0u;
    }
}

// x - x^ for the four codes, x^ = decode(q) * scale_inv in binary64 (exact: a short code value
// times a float32). From the hardware decode: one fma, x - decode(q) * scale_inv with its exact
// product, rounded once like the table path's subtraction of the exact x^.
// kFromGrid (the stochastic grid paths, kGridSr): decode(q) is v, the grid value the code was
// encoded from. On the fast path v is finite with |v| <= D's largest finite value (a stochastic
// step ends on one of the two grid values around |y|, and |y| <= fast_hi <= that largest value,
// itself on the grid), so its code is exact and decodes to v (a zero's sign aside: +-0 times
// scale_inv leaves x - 0 = x either way).
// The same fma then gives the same double as the decode, with no decode (2 cvt and 4 HADD2.F32
// per four elements in the SASS).
template <class D, bool kFromGrid>
__device__ __forceinline__ void differences(const float (&x)[4], std::uint32_t w, const std::uint8_t (&q)[4],
                                            const std::uint32_t (&v)[4], const CodeTables& t, double scale_inv,
                                            double (&d)[4]) {
    if constexpr (kFromGrid) {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            d[k] = __fma_rn(-static_cast<double>(__uint_as_float(v[k])), scale_inv, static_cast<double>(x[k]));
    } else if constexpr (kHwDecode<D>) {
        constexpr __nv_fp8_interpretation_t kind = std::is_same_v<D, emu::E4M3> ? __NV_E4M3 : __NV_E5M2;
#pragma unroll
        for (int h = 0; h < 2; ++h) {
            const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(w >> (16 * h)), kind);
            const float2 f = __half22float2(__half2(r));
            d[2 * h] = __fma_rn(-static_cast<double>(f.x), scale_inv, static_cast<double>(x[2 * h]));
            d[2 * h + 1] = __fma_rn(-static_cast<double>(f.y), scale_inv, static_cast<double>(x[2 * h + 1]));
        }
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) d[k] = static_cast<double>(x[k]) - t.xhat[xhat_index(q[k])];
    }
}

// hist_fast[field of s][lane] from hist_lane = &hist_fast[0][lane]: (s >> 23) & 0xFF rows of 32
// words, as a byte offset (one shift and one mask; s normal, so the field is 1..254).
__device__ __forceinline__ std::uint32_t* field_counter(std::uint32_t* hist_lane, std::uint32_t s) {
    return reinterpret_cast<std::uint32_t*>(reinterpret_cast<char*>(hist_lane) + ((s >> 16) & 0x7F80u));
}

// The fast path of a group of four elements x (input bits e[base..base+3]) with s = y, codes q and
// increments inc. pk: packed counts of a 16-element step (underflow bits 0-4, subnormal 5-9,
// te_overflow 16-20; at most 16 each). hist_lane: &hist_fast[0][lane]. amax and the minimum are
// taken over the four first, and te_overflow (|x| > te_threshold, compared as bits: both
// non-negative, neither NaN) per element only when the largest |x| passes it. The binary64 terms
// are element_step's, added in element order.
// The extremes are taken on the floats (FMNMX with the |.| modifier: for finite x the order of
// |x| equals the order of its bits, which the record keeps; the fast path has no NaN), not on
// the bits of fabsf (a LOP3 more per element). x^2 is added with one fma: the product of two
// float32 values is exact in binary64 (48 significant bits, exponents within binary64's normal
// range), so fma(x, x, sum) is the sum plus element_step's term x * x, rounded once as before.
template <class S, class D, bool kFromGrid>
__device__ __forceinline__ void fast_four(const typename S::storage_t (&e)[16], int base, const std::uint32_t (&y)[4],
                                          const std::uint8_t (&q)[4], std::uint32_t w, const std::uint32_t (&v)[4],
                                          std::uint32_t inc, Acc& acc, std::uint32_t& pk, std::uint32_t* hist_lane,
                                          const CodeTables& t, const Params& prm) {
    float x[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) x[k] = widen<S>(e[base + k]);
    const float hi = fmaxf(fmaxf(fabsf(x[0]), fabsf(x[1])), fmaxf(fabsf(x[2]), fabsf(x[3])));
    const float lo = fminf(fminf(fabsf(x[0]), fabsf(x[1])), fminf(fabsf(x[2]), fabsf(x[3])));
    acc.amax = max(acc.amax, __float_as_uint(hi));
    acc.min_nz = min(acc.min_nz, __float_as_uint(lo));
    pk += inc;
    if (__float_as_uint(hi) > prm.te_bits) {
#pragma unroll
        for (int k = 0; k < 4; ++k) pk += __float_as_uint(fabsf(x[k])) > prm.te_bits ? (1u << 16) : 0u;
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) atomicAdd(field_counter(hist_lane, y[k]), 1u);
    double d[4];
    differences<D, kFromGrid>(x, w, q, v, t, prm.consts.scale_inv, d);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
        const double xd = x[k];
        acc.sum[kX2] = __fma_rn(xd, xd, acc.sum[kX2]);
        acc.sum[kErr2] += __dmul_rn(d[k], d[k]);  // __dmul_rn: the term rounded alone, as element_step's
    }
}

__device__ __forceinline__ void flush_fast(Acc& acc, std::uint32_t pk, std::uint32_t nfast) {
    acc.count[kUnderflow] += pk & 0x1Fu;
    acc.count[kSubnormal] += (pk >> 5) & 0x1Fu;
    acc.count[kTeOverflow] += pk >> 16;
    acc.count[kNonzeroX] += nfast;
    acc.count[kNonzeroQ] += nfast - (pk & 0x1Fu);
}

// The stochastic grid paths: codes encoded from grid values (differences reads those values).
template <int P, int R>
constexpr bool kGridSr = R == static_cast<int>(emu::Rounding::stochastic) && (P == kSrCvt || P == kSrTable);

// Codes of four elements of y (stream indices index0..+3), packed little-endian in w and one per
// byte in q; on the grid paths (kGridSr) also their grid values v (else v is not written).
// On the grid paths the four random words die here: stat_element,
// which needs one only for an element past the largest finite magnitude (rare), draws it again
// (stochastic_word), so that the fast path does not keep four more registers live (the stochastic
// instantiations spilled at the 64 registers four CTAs per SM allow).
template <class D, int P, int R>
__device__ __forceinline__ void codes_four(const std::uint32_t (&y)[4], const ElementCtx& c, std::uint64_t index0,
                                           std::uint8_t (&q)[4], std::uint32_t& w, std::uint32_t (&v)[4]) {
    if constexpr (R == static_cast<int>(emu::Rounding::stochastic)) {
        std::uint32_t rnd[4];
        if ((index0 & 3u) == 0) {
            // The launch's round keys (ElementCtx::keys): recomputed from the seed per call, they
            // cost about 20 instructions per four elements.
            const emu::PhiloxWords pw = emu::philox4x32_10(c.keys, index0 >> 2);
#pragma unroll
            for (int k = 0; k < 4; ++k) rnd[k] = pw.w[k];
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) rnd[k] = stochastic_word(c.seed, index0 + k);
        }
        if constexpr (kGridSr<P, R>) {
            stochastic_grid_four<D, P>(y, rnd, v);
            w = encode_grid_four<D, P>(v, c);
        } else {
            w = 0;
#pragma unroll
            for (int k = 0; k < 4; ++k) w |= std::uint32_t{stochastic_code<D, P, R>(y[k], c, rnd[k])} << (8 * k);
        }
    } else {
        w = encode_four<D, P, R>(y, c, index0);
    }
#pragma unroll
    for (int k = 0; k < 4; ++k) q[k] = static_cast<std::uint8_t>(w >> (8 * k));
}

// On the paths of nan_codes_alike (element.cuh) the product's NaN serves as scaled_bits' y: it
// codes alike, lands in the same histogram bin, and element_step reads x itself for a NaN (its
// overflow test is asked for finite x only). The selects, predicated off but issued on the fast
// path, cost 19 issue slots per four elements (the 2026-11-27 SASS).
template <int P>
constexpr bool kAnyNanSame = nan_codes_alike(P);

__device__ __forceinline__ bool same_pair(const numerics::BlockScale& b, float scale, float scale_inv) {
    return __float_as_uint(b.scale) == __float_as_uint(scale) &&
           __float_as_uint(b.scale_inv) == __float_as_uint(scale_inv);
}

// Four CTAs per SM at least (at most 64 registers): with 128-157 registers two were resident and
// the kernel had too few loads in flight (2026-11-25 03:51 UTC run, docs/performance.md); with the
// tables off the fast path (2026-11-26) four fit with no spill on the deterministic paths
// (40-112 B on the stochastic ones, ptxas -v), and four measured faster than three on both rows
// (docs/performance.md at 09ae615): the kernel waits on latency, so more warps help.
template <class S, class D, int P, int R>
__global__ void __launch_bounds__(kThreads, 4)
    statistics_kernel(const void* __restrict__ in, std::uint32_t n, ElementCtx ctx,
                      const std::uint8_t* __restrict__ table, Params prm0, std::uint64_t first_index, Globals g) {
    using T = typename S::storage_t;
    // The scale: the rule at the device amax (one thread per CTA; every CTA gets the same bits) or
    // the caller's. A scale that is not finite and > 0 gives no statistics: the record says so.
    __shared__ float scale_pair[2];
    __shared__ bool skip_all;
    if (threadIdx.x == 0) {
        scale_pair[0] = prm0.scale;
        scale_pair[1] = prm0.scale_inv;
        skip_all = false;
        if (prm0.d_amax != nullptr) {
            const float amax = *prm0.d_amax;
            const numerics::BlockScale b = numerics::rule_scale(prm0.rule, amax);
            scale_pair[0] = b.scale;
            scale_pair[1] = b.scale_inv;
            skip_all = prm0.alias_src != nullptr && usable(b.scale, b.scale_inv) &&
                       same_pair(numerics::rule_scale(prm0.alias_rule, amax), b.scale, b.scale_inv);
        }
    }
    __syncthreads();
    if (skip_all) {  // an earlier launch of the same cast wrote these numbers: copy them
        if (blockIdx.x == 0) {
            const auto* src = reinterpret_cast<const unsigned long long*>(prm0.alias_src);
            auto* dst = reinterpret_cast<unsigned long long*>(g.rec);
            for (unsigned i = threadIdx.x; i < sizeof(StatsRecord) / 8; i += blockDim.x) dst[i] = src[i];
        }
        return;
    }
    Params prm = prm0;
    prm.scale = scale_pair[0];
    const float scale_inv = scale_pair[1];
    if (!usable(prm.scale, scale_inv)) {
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            g.rec->scale = prm.scale;
            g.rec->scale_inv = scale_inv;
            g.rec->numel = prm.numel;
            g.rec->sample = prm.sample;  // scale_ok stays 0
        }
        return;
    }
    numerics::rescale(prm.consts, scale_inv);
    prm.te_bits = numerics::bits_of(prm.consts.te_threshold);
    constexpr int kWarps = kThreads / 32;
    extern __shared__ __align__(16) std::uint8_t smem[];
    __shared__ std::uint32_t hist_fast[256][32];    // fast path: [exponent field of s][lane]
    __shared__ std::uint32_t hist[kHistogramBins];  // stat_element's bins (the rare elements)
    __shared__ double sums[kWarps][kSums];
    __shared__ CodeTables tables;
    for (int i = threadIdx.x; i < 256 * 32; i += blockDim.x) (&hist_fast[0][0])[i] = 0u;
    for (int i = threadIdx.x; i < kHistogramBins; i += blockDim.x) hist[i] = 0u;
    for (int c = threadIdx.x; c < 256; c += blockDim.x) {
        tables.xhat[xhat_index(c)] =
            static_cast<double>(__uint_as_float(static_cast<std::uint32_t>(
                emu::convert<D, Binary32>(static_cast<std::uint8_t>(c), emu::kDecodePolicy)))) *
            prm.consts.scale_inv;
        const numerics::CodeKind k = numerics::code_kind(prm.format, static_cast<std::uint8_t>(c));
        tables.kind[c] = k;
        tables.inc[inc_index(c)] = k == numerics::CodeKind::zero        ? 1u
                                   : k == numerics::CodeKind::subnormal ? (1u << 5)
                                   : k == numerics::CodeKind::special   ? 0x80u
                                                                        : 0u;
    }
    load_cast_table<D, P>(ctx, table, smem);  // synchronizes the CTA
    __syncthreads();

    numerics::ElementConsts consts1 = prm.consts;
    consts1.scale_inv = 1.0;
    const int lane = threadIdx.x & 31;
    std::uint32_t* hist_lane = &hist_fast[0][lane];
    Acc acc{};
    acc.min_nz = 0xFFFFFFFFu;
    const std::uint32_t stride = gridDim.x * blockDim.x;
    const std::uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    const std::uint32_t chunks = aligned16(in) ? n / 16 : 0;
    const std::uint32_t sample = prm.sample, picked = static_cast<std::uint32_t>((chunks + sample - 1ull) / sample);
    for (std::uint32_t j = tid; j < picked; j += stride) {
        const std::uint32_t c = j * sample;  // the chunk (block of 16) the sample takes
        T e[16];
        load16<S>(in, c, e);
        // Four elements at a time (fewer live registers than 16): the fast path's test on the
        // products, their codes, then the fast path if all four qualify, else element_step for
        // each.
        std::uint32_t pk = 0, nfast = 0;
#pragma unroll
        for (int g4 = 0; g4 < 4; ++g4) {
            std::uint32_t y[4], w, inc = 0, v[4];
            std::uint8_t q[4];
#pragma unroll
            for (int k = 0; k < 4; ++k) y[k] = __float_as_uint(__fmul_rn(widen<S>(e[4 * g4 + k]), prm.scale));
            bool fast = fast_group(y, prm);
            if (!kAnyNanSame<P> && !fast) {  // scaled_bits' NaN cases (about 5 instructions per element)
#pragma unroll
                for (int k = 0; k < 4; ++k) y[k] = scaled_bits<S>(e[4 * g4 + k], prm.scale);
            }
            const std::uint64_t index0 = first_index + 16ull * c + 4 * g4;
            codes_four<D, P, R>(y, ctx, index0, q, w, v);
            if (fast) fast = fast_codes<D>(w, q, tables, inc);
            if (fast) {
                fast_four<S, D, kGridSr<P, R>>(e, 4 * g4, y, q, w, v, inc, acc, pk, hist_lane, tables, prm);
                nfast += 4;
            } else {
#pragma unroll
                for (int k = 0; k < 4; ++k)
                    stat_element<S, R>(e[4 * g4 + k], y[k], q[k], ctx, index0 + k, acc, hist, tables, prm, ctx.policy,
                                       consts1);
            }
        }
        flush_fast(acc, pk, nfast);  // pk: at most 16 per field since the last flush
    }
    // The rest one element at a time: the tail after the last whole chunk, or every element of an
    // input not aligned to 16 bytes. Only the elements of sampled blocks (block b of 16 is taken when
    // b % sample == 0) are visited, so the grid, sized by the sampled count, covers them in one sweep
    // (sample 1: i = chunks * 16 + j, the whole rest).
    const T* in_t = static_cast<const T*>(in);
    const std::uint64_t blocks = (n + 15ull) / 16, first_kept = (chunks + sample - 1ull) / sample * sample;
    const std::uint64_t kept = blocks > first_kept ? (blocks - first_kept + sample - 1) / sample : 0;
    for (std::uint64_t j = tid; j < kept * 16; j += stride) {
        const std::uint64_t i = (first_kept + j / 16 * sample) * 16 + j % 16;
        if (i >= n) continue;  // the last block's missing elements
        const std::uint32_t y = scaled_bits<S>(in_t[i], prm.scale);
        const std::uint8_t q = encode_one<D, P, R>(y, ctx, first_index + i);
        stat_element<S, R>(in_t[i], y, q, ctx, first_index + i, acc, hist, tables, prm, ctx.policy, consts1);
    }

    // Counts and extremes: one atomic per warp; sums per warp (stats_record.cuh).
    add_warp_totals(acc, g.rec, sums);
    __syncthreads();
    for (int b = threadIdx.x; b < kHistogramBins; b += blockDim.x)
        if (hist[b])
            atomicAdd(reinterpret_cast<unsigned long long*>(g.rec->histogram + b),
                      static_cast<unsigned long long>(hist[b]));
    // Exponent fields 1..254 (normal s) to their bins; the lanes are read in a rotated order so
    // that the threads of a warp hit different banks.
    for (int f = 1 + threadIdx.x; f < 255; f += blockDim.x) {
        unsigned long long t = 0;
        for (int l = 0; l < 32; ++l) t += hist_fast[f][(l + f) & 31];
        if (t)
            atomicAdd(
                reinterpret_cast<unsigned long long*>(g.rec->histogram + numerics::histogram_bin_of_exponent(f - 127)),
                t);
    }
    // The last CTA to finish adds the partial sums and writes the rest of the record.
    if (!finish_record(sums, g.partial, g.rec)) return;
    if (threadIdx.x == 0) {
        g.rec->scale = prm.scale;
        g.rec->scale_inv = scale_inv;
        g.rec->numel = prm.numel;
        g.rec->sample = prm.sample;
        g.rec->scale_ok = 1u;
    }
}

// The most CTAs a launch uses (grid_for's cap), for the workspace of partial sums.
unsigned max_ctas() { return grid_for(~std::size_t{0} >> 1); }

// statistics_async_multi's link of one launch (none by default): see Params::alias_src.
struct Aliases {
    const StatsRecord* src = nullptr;
    const numerics::ScaleParams* rule = nullptr;
};

// The kernel on a zeroed record, queued on s: one launch.
void launch_statistics(Format to, Wide from, const void* in, std::size_t n, const Policy& policy,
                       const numerics::ScaleParams& rule, const float* d_amax, float scale, float scale_inv,
                       StatsRecord* rec, double* workspace, std::uint32_t sample, std::uint64_t seed,
                       std::uint64_t first_index, cudaStream_t s, const Aliases& alias = Aliases{}) {
    // The scale-independent constants (overflow limits, max finite); the kernel rescales them.
    Params prm{to,
               scale,
               numerics::element_consts(to, policy, 1.0f),
               0,
               0,
               sample,
               scale_inv,
               d_amax,
               rule,
               sampled_count(n, sample)};
    prm.fast_hi = std::min({prm.consts.max_bits, prm.consts.limit[0], prm.consts.limit[1]});
    const std::uint8_t* table = element_table(to, policy, s);
    const ElementCtx ctx{policy, nullptr, seed};
    const unsigned grid = grid_for(((n + 15) / 16 + sample - 1) / sample);  // at most; `wave` CTAs run
    const Globals g{rec, workspace};
    prm.alias_src = alias.src;
    if (alias.src != nullptr) prm.alias_rule = *alias.rule;
    with_input(from, [&](auto si) {
        with_cast_format(to, [&](auto di) {
            using S = decltype(si);
            using D = decltype(di);
            with_element_path(to, policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                if constexpr (path_exists<D, P, R>()) {
                    // hist_fast (32 KiB) and the cast table together pass the default 48 KiB.
                    constexpr int dyn = static_cast<int>(element_smem<D, P>());
                    // One wave: as many CTAs as fit on the device at once (at most grid). With
                    // grid_for's 8 per SM and 3 resident, the last of 2.67 waves ran alone (ncu).
                    // Asked once per kernel (like grid_for's SM count: one kind of device).
                    static const unsigned wave = [] {
                        if (dyn > 0)
                            FP8KIT_CUDA_CHECK(cudaFuncSetAttribute(statistics_kernel<S, D, P, R>,
                                                                   cudaFuncAttributeMaxDynamicSharedMemorySize, dyn));
                        int dev = 0, sms = 0, per_sm = 0;
                        FP8KIT_CUDA_CHECK(cudaGetDevice(&dev));
                        FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
                        FP8KIT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
                            &per_sm, statistics_kernel<S, D, P, R>, kThreads, dyn));
                        return static_cast<unsigned>(std::max(1, sms * std::max(1, per_sm)));
                    }();
                    statistics_kernel<S, D, P, R><<<std::min(grid, wave), kThreads, dyn, s>>>(
                        in, static_cast<std::uint32_t>(n), ctx, table, prm, first_index, g);
                }
            });
            return 0;
        });
    });
    check_launch("statistics_kernel");
}

}  // namespace

std::size_t statistics_workspace_bytes() { return static_cast<std::size_t>(max_ctas()) * kSums * sizeof(double); }

std::uint64_t sampled_count(std::size_t n, std::uint32_t sample) {
    const std::uint64_t blocks = (static_cast<std::uint64_t>(n) + 15) / 16;
    if (sample <= 1 || blocks == 0) return n;
    const std::uint64_t kept = (blocks + sample - 1) / sample, last = (kept - 1) * sample;
    return (kept - 1) * 16 + std::min<std::uint64_t>(16, n - last * 16);
}

numerics::QuantStats stats_of_record(const StatsRecord& h) {
    if (!h.scale_ok)
        throw std::invalid_argument("fp8kit::cuda::statistics: the recipe's scale " + std::to_string(h.scale) +
                                    " (scale_inv " + std::to_string(h.scale_inv) + ") must be finite and > 0");
    numerics::QuantStats r;
    r.numel = h.numel;
    r.zeros = h.counts[kZeros];
    r.nan = h.counts[kNan];
    r.inf = h.counts[kInf];
    r.underflow = h.counts[kUnderflow];
    r.subnormal = h.counts[kSubnormal];
    r.overflow = h.counts[kOverflow];
    r.te_overflow = h.counts[kTeOverflow];
    r.te_underflow = static_cast<std::int64_t>(h.counts[kNonzeroX]) - static_cast<std::int64_t>(h.counts[kNonzeroQ]);
    std::memcpy(r.exp_hist.data(), h.histogram, kHistogramBins * 8);
    r.amax = numerics::float_of(h.amax_bits);
    r.min_nonzero = numerics::float_of(h.min_bits == 0xFFFFFFFFu ? 0u : h.min_bits);
    r.sum_x2 = h.sums[kX2];
    r.sum_err2 = h.sums[kErr2];
    return r;
}

void statistics_async(Format to, Wide from, const void* in, std::size_t n, const Policy& policy,
                      const numerics::ScaleParams& rule, const float* d_amax, StatsRecord* d_record, void* d_workspace,
                      std::uint32_t sample, std::uint64_t seed, std::uint64_t first_index, Stream stream) {
    require_input(from, "statistics_async");
    require_gpu_format(to, "statistics_async");
    if (d_amax == nullptr || d_record == nullptr || d_workspace == nullptr)
        throw std::invalid_argument(
            "fp8kit::cuda::statistics_async: d_amax, d_record and d_workspace must be device pointers");
    if (numerics::rule_uses_global_amax(rule.rule))
        throw std::invalid_argument(
            "fp8kit::cuda::statistics_async: NVFP4 rules (a global amax) have no statistics kernel");
    if (rule.format != to)
        throw std::invalid_argument("fp8kit::cuda::statistics_async: the rule's format differs from the cast's");
    if (sample < 1) throw std::invalid_argument("fp8kit::cuda::statistics_async: sample must be >= 1");
    if (n >= kPiece) throw std::invalid_argument("fp8kit::cuda::statistics_async: at most 2^31 - 1 elements per call");
    launch_statistics(to, from, in, n, policy, rule, d_amax, 0.0f, 0.0f, d_record, static_cast<double*>(d_workspace),
                      sample, seed, first_index, as_stream(stream));
}

namespace {

// Whether two plans of one tensor give the same statistics whenever their rules give the same
// scale pair: the same format, input type, rounding and overflow, and NaN encodings that both turn
// a NaN input into a NaN code (then the code of every element decodes alike: a NaN input's code is
// some NaN, which element_step counts the same way, nan and nonzero_q; every other input's code
// does not depend on the NaN encoding, emu/include/fp8kit/emu/policy.hpp). E4M3 and E5M2 only
// (formats with NaN codes).
bool nan_stays_nan(emu::NanEncoding e) {
    using N = emu::NanEncoding;
    return e == N::canonical || e == N::signed_all_ones || e == N::signed_quiet || e == N::signed_quiet_payload;
}
bool same_numbers(const StatsPlan& a, const StatsPlan& b) {
    return a.to == b.to && (a.to == Format::e4m3 || a.to == Format::e5m2) && a.from == b.from &&
           a.policy.rounding == b.policy.rounding && a.policy.overflow == b.policy.overflow &&
           (a.policy.nan == b.policy.nan || (nan_stays_nan(a.policy.nan) && nan_stays_nan(b.policy.nan)));
}

}  // namespace

namespace detail {

void check_async_args(const StatsPlan& p, const float* d_amax, const void* d_record, const void* d_workspace,
                      std::uint32_t sample, std::size_t n, const char* fn) {
    require_input(p.from, fn);
    require_gpu_format(p.to, fn);
    // The message is built only on failure: the monitor calls this for every tensor of a step.
    auto fail = [fn](const char* why) { throw std::invalid_argument(std::string("fp8kit::cuda::") + fn + why); };
    if (d_amax == nullptr || d_record == nullptr || d_workspace == nullptr)
        fail(": d_amax, d_record and d_workspace must be device pointers");
    if (numerics::rule_uses_global_amax(p.rule.rule)) fail(": NVFP4 rules (a global amax) have no statistics kernel");
    if (p.rule.format != p.to) fail(": the rule's format differs from the cast's");
    if (sample < 1) fail(": sample must be >= 1");
    if (n >= kPiece) fail(": at most 2^31 - 1 elements per call");
}

}  // namespace detail

void statistics_async_multi(const StatsPlan* plans, std::size_t count, const void* in, std::size_t n,
                            const float* d_amax, StatsRecord* d_records, void* d_workspace, std::uint32_t sample,
                            std::uint64_t seed, std::uint64_t first_index, Stream stream) {
    for (std::size_t k = 0; k < count; ++k)
        check_async_args(plans[k], d_amax, d_records, d_workspace, sample, n, "statistics_async_multi");
    // links[k]: the first earlier plan with the same numbers, launched (and so finished) before k.
    std::vector<Aliases> links(count);
    for (std::size_t k = 0; k < count; ++k)
        for (std::size_t j = 0; j < k; ++j)
            if (links[j].src == nullptr && same_numbers(plans[j], plans[k])) {
                links[k] = {d_records + j, &plans[j].rule};
                break;
            }
    for (std::size_t k = 0; k < count; ++k)
        launch_statistics(plans[k].to, plans[k].from, in, n, plans[k].policy, plans[k].rule, d_amax, 0.0f, 0.0f,
                          d_records + k, static_cast<double*>(d_workspace), sample, seed, first_index,
                          as_stream(stream), links[k]);
}

numerics::QuantStats statistics(Format to, Wide from, const void* in, std::size_t n, const Policy& policy, float scale,
                                float scale_inv, std::uint64_t seed, std::uint64_t first_index, Stream stream) {
    require_input(from, "statistics");
    if (!is_narrow_format(to)) require_gpu_format(to, "statistics");  // narrow formats: kConvert path
    if (!(scale > 0.0f) || scale > FLT_MAX)
        throw std::invalid_argument("fp8kit::cuda::statistics: scale " + std::to_string(scale) +
                                    " must be finite and > 0");
    if (scale_inv == 0.0f) scale_inv = 1.0f / scale;
    if (!(scale_inv > 0.0f) || scale_inv > FLT_MAX)
        throw std::invalid_argument("fp8kit::cuda::statistics: scale_inv " + std::to_string(scale_inv) +
                                    " must be finite and > 0");
    if (n >= kPiece) throw std::invalid_argument("fp8kit::cuda::statistics: at most 2^31 - 1 elements per call");
    const cudaStream_t s = as_stream(stream);
    // The record, then the workspace.
    auto* rec = static_cast<StatsRecord*>(scratch_alloc(sizeof(StatsRecord) + statistics_workspace_bytes(), s));
    FP8KIT_CUDA_CHECK(cudaMemsetAsync(rec, 0, sizeof(StatsRecord), s));
    const numerics::ScaleParams unused =
        numerics::make_scale_params(numerics::ScaleRule::te, to, 0.0, false, FLT_MAX, 0);
    launch_statistics(to, from, in, n, policy, unused, nullptr, scale, scale_inv, rec,
                      reinterpret_cast<double*>(rec + 1), 1, seed, first_index, s);
    StatsRecord host;
    FP8KIT_CUDA_CHECK(cudaMemcpyAsync(&host, rec, sizeof host, cudaMemcpyDeviceToHost, s));
    scratch_free(rec, s);
    FP8KIT_CUDA_CHECK(cudaStreamSynchronize(s));
    return stats_of_record(host);
}

}  // namespace fp8kit::cuda
