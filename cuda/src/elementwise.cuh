// The element-wise cast behind quantize, delayed scaling and current scaling: each thread takes
// 16 consecutive elements per step (16-byte loads, one 16-byte store of codes), a grid-stride
// loop with 32-bit indices (the host splits larger arrays into pieces), the conversion path
// fixed at compile time (element.cuh), and an optional amax of the input in the same pass.
#pragma once

#include <cfloat>

#include "element.cuh"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::cuda::detail {

// Where the scale comes from; read once per thread at kernel start.
struct ScaleSource {
    enum Mode : std::uint8_t { host_value, device_value, from_amax } mode = host_value;
    float value = 1.0f;              // host_value
    const float* d_value = nullptr;  // device_value
    const float* d_amax = nullptr;   // from_amax: numerics::te_scale on *d_amax
    float fmax = 0.0f;
    bool pow2 = false;
    float epsilon = 0.0f;
    float* d_scale_out = nullptr;      // from_amax: block 0 writes the scale ...
    float* d_scale_inv_out = nullptr;  // ... and fl32(1 / scale) (may be null)
};

__device__ __forceinline__ float resolve_scale(const ScaleSource& src) {
    float s = src.value;
    if (src.mode == ScaleSource::device_value) {
        s = *src.d_value;
    } else if (src.mode == ScaleSource::from_amax) {
        s = numerics::te_scale(*src.d_amax, src.fmax, src.epsilon, src.pow2, FLT_MAX);
        if (blockIdx.x == 0 && threadIdx.x == 0) {
            *src.d_scale_out = s;
            if (src.d_scale_inv_out) *src.d_scale_inv_out = numerics::div_rn(1.0f, s);
        }
    }
    return s;
}

// Step chunk (16 elements of type S) from 16-byte-aligned memory, as loaded.
template <class S>
__device__ __forceinline__ void load_step(const void* base, std::uint32_t chunk, Step16<S>& u) {
    const uint4* p = static_cast<const uint4*>(base) + static_cast<std::size_t>(chunk) * Step16<S>::kVecs;
#pragma unroll
    for (int k = 0; k < Step16<S>::kVecs; ++k) u.v[k] = __ldg(p + k);
}

// 16 elements of type S from 16-byte-aligned memory.
template <class S>
__device__ __forceinline__ void load16(const void* base, std::uint32_t chunk, typename S::storage_t (&e)[16]) {
    Step16<S> u;
    load_step<S>(base, chunk, u);
#pragma unroll
    for (int k = 0; k < 16; ++k) e[k] = u.e[k];
}

// Codes of 16 elements whose stream indices index0 .. index0 + 15 start an aligned group
// (index0 % 4 == 0 for every step of a launch or none): four Philox calls side by side, without a
// branch between them, so that ptxas can interleave the four dependent chains of ten rounds (about
// 44 instructions each); grid_four(g, words, v) puts group g's four elements on D's grid.
template <class D, int P, class GridFour>
__device__ __forceinline__ uint4 encode16_aligned(const ElementCtx& c, std::uint64_t index0, GridFour&& grid_four) {
    emu::PhiloxWords r[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) r[g] = emu::philox4x32_10(c.keys, (index0 >> 2) + g);
    std::uint32_t w[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) {
        std::uint32_t v[4];
        grid_four(g, r[g].w, v);
        w[g] = encode_grid_four<D, P>(v, c);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Codes of 16 f16 / bf16 inputs through stochastic_grid_coarse or stochastic_grid_float (an
// aligned group).
// kCoarse: the coarse step (kUnit: at scale 1, no multiply), else the float step. No input is a
// NaN (see encode16). On kSrCvt every input is finite (finite16): the steps give magnitudes, and
// the signs go onto the codes four at a time (sign_bytes: cvt into E4M3 is symmetric in the
// sign); there bf16 takes step_bits' add form too (see step_bits).
template <class S, class D, int P, bool kCoarse, bool kUnit = false>
__device__ __forceinline__ uint4 encode16_branchless(const Step16<S>& u, float scale, const ElementCtx& c,
                                                     std::uint64_t index0) {
    // f16 halves widen from their packed words (HADD2.F32 .H0_H0 / .H1_H1): read one by one from
    // `e`, half of them were first shifted into place (SHF, ALU pipe), and f16 -> E4M3 at scale
    // 0.37 measured 82.9% of copy against 85.5% (H100, 2026-11-27). bf16 keeps `e` (from the words it
    // measured a point slower).
    constexpr bool kF16 = S::man_bits == 10;
    constexpr bool kSignOnCodes = P == kSrCvt;
    constexpr bool kAddForm = kF16 || kSignOnCodes;
    uint4 out = encode16_aligned<D, P>(c, index0, [&](int g, const std::uint32_t(&words)[4], std::uint32_t(&v)[4]) {
#pragma unroll
        for (int k = 0; k < 4; ++k) {
            std::uint32_t w;
            if constexpr (kF16)
                w = widen_half<S>(u.word(2 * g + k / 2), k % 2);
            else
                w = widen_non_nan<S>(u.e[4 * g + k]);
            v[k] = kCoarse ? stochastic_grid_coarse<D, !kUnit, kAddForm, !kSignOnCodes>(w, scale, words[k])
                           : stochastic_grid_float<D, kAddForm, !kSignOnCodes>(w, scale, words[k]);
        }
    });
    if constexpr (kSignOnCodes) {
        out.x |= sign_bytes(u.word(0), u.word(1));
        out.y |= sign_bytes(u.word(2), u.word(3));
        out.z |= sign_bytes(u.word(4), u.word(5));
        out.w |= sign_bytes(u.word(6), u.word(7));
    }
    return out;
}

// The branch-free steps of one launch (the defaults, off, are always correct, only slower).
struct StepRanges {
    CoarseRange coarse;
    FloatStepRange fstep;
};
template <class S, class D, int P>
__device__ __forceinline__ StepRanges step_ranges(float scale) {
    StepRanges r;
    if constexpr (kCoarseStep<S, D, P>) {
        r.coarse = coarse_range<S, D, P>(scale);
        r.fstep = float_step_range<S, D, P>(scale);
    }
    return r;
}

// The branch-free steps of an aligned step of 16 (kCoarseStep), when one applies: the coarse step
// when its 16 inputs lie in its range, else the float step when it is on (kSrTable: unless one of
// the 16 inputs is at or above its `from`). Returns whether it took one (codes in `out`).
template <class S, class D, int P>
__device__ __forceinline__ bool branchless16(const Step16<S>& u, float scale, const ElementCtx& c, std::uint64_t index0,
                                             const StepRanges& ranges, uint4& out) {
    if (ranges.coarse.tiny_below != 0 && !outside_coarse16<S>(u, ranges.coarse)) {
        if (ranges.coarse.unit)
            out = encode16_branchless<S, D, P, true, true>(u, scale, c, index0);
        else
            out = encode16_branchless<S, D, P, true, false>(u, scale, c, index0);
        return true;
    }
    if (ranges.fstep.on && (P != kSrTable || !any_from16<S>(u, ranges.fstep.from))) {
        out = encode16_branchless<S, D, P, false, false>(u, scale, c, index0);
        return true;
    }
    return false;
}

// Codes of 16 elements with stream indices index0 .. index0 + 15.
// plain: plain_scale(scale), the launch's or the block's (false is always correct, only slower).
// ranges: step_ranges<S, D, P>(scale): f16 / bf16 inputs under stochastic rounding into the
// E4M3-like formats take stochastic_grid_coarse when their 16 inputs lie in its range, else
// stochastic_grid_float when it is on (kSrTable: unless one of the 16 inputs is at or above its
// `from`), else the general step.
template <class S, class D, int P, int R, bool kInline = true>
__device__ __forceinline__ uint4 encode16(const Step16<S>& u, float scale, const ElementCtx& c, std::uint64_t index0,
                                          bool plain = false, const StepRanges& ranges = {}) {
    if constexpr (kCoarseStep<S, D, P>) {
        if ((index0 & 3u) == 0) {
            // The steps take no NaN input: on kSrTable the ranges' `from` keeps NaNs out; on
            // kSrCvt a step of 16 with a NaN or an Inf takes the general step (finite16, on the
            // FP pipes). That replaced a NaN clamp per element (VIMNMX, integer ALU pipe), and on
            // kSrCvt the sign merge per element too (sign_bytes): H100, 2026-11-27 to 2026-11-28
            // (docs/performance.md), f16 -> E4M3 at scale 0.37 84% -> 87% of copy, bf16 84% -> 86%.
            uint4 out;
            if ((P == kSrTable || finite16<S>(u)) && branchless16<S, D, P>(u, scale, c, index0, ranges, out))
                return out;
        }
    }
    const auto& e = u.e;
    std::uint32_t y16[16];
    constexpr bool kSr = P == kSrCvt || P == kSrTable;
    scaled16<S, kSr, kSr && nan_codes_alike(P)>(e, scale, plain, y16);
    if constexpr (P == kSrCvt || P == kSrTable) {
        if ((index0 & 3u) == 0) {
            return encode16_aligned<D, P>(c, index0, [&](int g, const std::uint32_t(&words)[4], std::uint32_t(&v)[4]) {
                const std::uint32_t y[4] = {y16[4 * g], y16[4 * g + 1], y16[4 * g + 2], y16[4 * g + 3]};
                stochastic_grid_four<D, P, sizeof(typename S::storage_t) == 2>(y, words, v);
            });
        }
    }
    std::uint32_t w[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) {
        const std::uint32_t y[4] = {y16[4 * g], y16[4 * g + 1], y16[4 * g + 2], y16[4 * g + 3]};
        w[g] = encode_four<D, P, R, kInline>(y, c, index0 + 4 * g);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// __launch_bounds__' second argument (minimum CTAs per SM; 0 emits no .minnctapersm, as if
// omitted). The stochastic paths were measured with 1 (2026-11-26, docs/performance.md
// at 09ae615) and with 5 (48 registers and spills: the float32 and delayed-scaling
// stochastic casts 6-12% slower, f16 / bf16 unchanged). The deterministic paths get none: with
// .minnctapersm 1 ptxas gave the float32 casts 35 registers instead of 29-30 (6 CTAs per SM
// instead of 8), and in that run, their code otherwise unchanged, they were 4-5% slower.
// f16 / bf16 into the E4M3-like formats (kCoarseStep) get 3: with the float step ptxas took 96
// registers (2 CTAs per SM) and the kernels fell from 90% to 79% of copy; capped at 80 (3 CTAs,
// no spill) they measured 80-84%, with 4 (64 registers, 4-24 bytes of spills) within a point of
// that (2026-11-27, H100).
template <class S, class D, int P>
constexpr int cast_min_blocks() {
    if constexpr (kCoarseStep<S, D, P>) return 3;
    return P == kSrCvt || P == kSrTable ? 1 : 0;
}

// The grid of an element-wise or block kernel on path (P, R). Deterministic paths: one step per
// thread (grid_per_item). Stochastic rounding (Philox: issue-bound, and the 16-bit inputs
// prefetch the next step) keeps a grid-stride loop over at most 32 CTAs per SM: one step per
// thread was 4-35% slower there, 32 per SM 1-3% faster than 8 (2026-11-27, docs/performance.md at 09ae615).
template <int P, int R>
inline unsigned grid_for_path(std::size_t work_items) {
    constexpr bool kStochastic = P == kSrCvt || P == kSrTable || R == static_cast<int>(emu::Rounding::stochastic);
    return kStochastic ? grid_for(work_items, kThreads, 32) : grid_per_item(work_items);
}

// Under stochastic rounding the kernel loads the next step's input before converting this one, so
// that its bytes are in flight during the Philox rounds: 16-bit inputs (below), and float32 too
// (H200, docs/performance.md: f32 -> E4M3 81% -> 86% of copy, -> E5M2 88% -> 97%, delayed
// scaling 73% -> 75%; at 2 CTAs per SM instead of 4 delayed scaling fell to 55%: these kernels
// wait on latency).
template <class S, int P>
constexpr bool kPrefetchStep = P == kSrCvt || P == kSrTable;

template <class S, class D, int P, int R, bool kAmax>
__global__ void __launch_bounds__(kThreads, cast_min_blocks<S, D, P>())
    cast_kernel(const void* __restrict__ in, std::uint8_t* __restrict__ out, std::uint32_t n, ElementCtx ctx,
                const std::uint8_t* __restrict__ table, ScaleSource scale_src, std::uint64_t first_index, float* amax) {
    using T = typename S::storage_t;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    const float scale = resolve_scale(scale_src);
    const bool plain = plain_scale(scale);
    const StepRanges ranges = step_ranges<S, D, P>(scale);
    const std::uint32_t stride = gridDim.x * blockDim.x;
    const std::uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    float local_max = 0.0f;

    const bool vec = aligned16(in) && aligned16(out);
    const std::uint32_t chunks = vec ? n / 16 : 0;
    constexpr bool kPrefetch = kPrefetchStep<S, P>;
    if constexpr (kPrefetch) {
        // The next step's input loaded before this step's conversion, so that its 32 bytes are
        // in flight while this step computes (bf16 -> e5m2 stochastic 83% -> 87% of copy,
        // H100, 2026-11-27). chunks < 2^27 and stride <= 2^27 + 255 (grid_for_path): c + stride does not wrap.
        // The step's input is kept as loaded (16-byte vectors): held as 16 separate 16-bit
        // elements, the hand-over to the next step cost 16 predicated PRMT and the re-packing 10
        // more per step. The next step's load is unconditional (the last chunk again at the end).
        Step16<S> cur;
        if (tid < chunks) load_step<S>(in, tid, cur);
        for (std::uint32_t c = tid; c < chunks; c += stride) {
            Step16<S> nx;
            load_step<S>(in, min(c + stride, chunks - 1), nx);
            if (kAmax) {
#pragma unroll
                for (int k = 0; k < 16; ++k) local_max = max_abs<S>(local_max, cur.e[k]);
            }
            reinterpret_cast<uint4*>(out)[c] =
                encode16<S, D, P, R>(cur, scale, ctx, first_index + 16ull * c, plain, ranges);
            cur = nx;
        }
    }
    for (std::uint32_t c = kPrefetch ? chunks : tid; c < chunks; c += stride) {
        Step16<S> u;
        load_step<S>(in, c, u);
        // The amax before the cast, so that the inputs are dead once converted: after it, they
        // stayed live across the Philox calls (the stochastic delayed-scaling kernel needed 70
        // registers, 3 CTAs per SM; now 64, 4 CTAs, as the plain stochastic cast).
        if (kAmax) {
#pragma unroll
            for (int k = 0; k < 16; ++k) local_max = max_abs<S>(local_max, u.e[k]);
        }
        reinterpret_cast<uint4*>(out)[c] = encode16<S, D, P, R>(u, scale, ctx, first_index + 16ull * c, plain, ranges);
    }
    const T* in_t = static_cast<const T*>(in);
    for (std::uint32_t i = chunks * 16 + tid; i < n; i += stride) {
        const T x = in_t[i];
        out[i] = encode_one<D, P, R>(scaled_bits<S>(x, scale), ctx, first_index + i);
        if (kAmax) local_max = max_abs<S>(local_max, x);
    }
    if (kAmax) block_amax_atomic(__float_as_uint(local_max), amax);
}

template <class S>
__global__ void __launch_bounds__(kThreads) amax_kernel(const void* __restrict__ in, std::uint32_t n, float* amax) {
    using T = typename S::storage_t;
    const std::uint32_t stride = gridDim.x * blockDim.x;
    const std::uint32_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    float local_max = 0.0f;
    const std::uint32_t chunks = aligned16(in) ? n / 16 : 0;
    for (std::uint32_t c = tid; c < chunks; c += stride) {
        T e[16];
        load16<S>(in, c, e);
#pragma unroll
        for (int k = 0; k < 16; ++k) local_max = max_abs<S>(local_max, e[k]);
    }
    const T* in_t = static_cast<const T*>(in);
    for (std::uint32_t i = chunks * 16 + tid; i < n; i += stride) local_max = max_abs<S>(local_max, in_t[i]);
    block_amax_atomic(__float_as_uint(local_max), amax);
}

// Arrays are processed in pieces of at most 2^31 elements (a multiple of 16, so alignment
// carries over), so every kernel index fits in 32 bits.
constexpr std::size_t kPiece = std::size_t{1} << 31;

// Launch the cast for run-time (to, from, policy): one instantiation per (input, format, path).
template <bool kAmax>
void launch_cast(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy,
                 const ScaleSource& src, std::uint64_t seed, std::uint64_t first_index, float* amax,
                 cudaStream_t stream) {
    if (n == 0) return;
    const std::uint8_t* table = element_table(to, policy, stream);
    const ElementCtx ctx{policy, nullptr, seed};
    const std::size_t es = wide_bytes(from);
    with_input(from, [&](auto s) {
        with_cast_format(to, [&](auto d) {  // the FP8 formats and the narrow ones (kConvert)
            using S = decltype(s);
            using D = decltype(d);
            with_element_path(to, policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                if constexpr (path_exists<D, P, R>()) {
                    constexpr std::size_t smem = element_smem<D, P>();
                    for (std::size_t off = 0; off < n; off += kPiece) {
                        const std::size_t m = n - off < kPiece ? n - off : kPiece;
                        cast_kernel<S, D, P, R, kAmax><<<grid_for_path<P, R>((m + 15) / 16), kThreads, smem, stream>>>(
                            static_cast<const char*>(in) + off * es, out + off, static_cast<std::uint32_t>(m), ctx,
                            table, src, first_index + off, amax);
                    }
                }
            });
            return 0;
        });
    });
    check_launch("cast_kernel");
}

}  // namespace fp8kit::cuda::detail
