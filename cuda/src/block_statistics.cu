// The statistics of a block-scaled cast on the GPU (issue 23 item 2b: the monitor's block recipes):
// lib's compute_block_stats `total` (lib/src/stats/statistics.cpp block_stats), i.e. the whole
// tensor cast with one scale per tile of block_rows x block_cols, each from the recipe's rule at the
// tile's amax. One warp per tile: the tile's amax (NaN ignored, Inf counts, as amax_of), the rule's
// scale pair there (numerics::rule_scale, the call block_stats makes), then every element of the
// tile through numerics::element_step with that pair, as statistics_bins.cu's K2 calls it: the
// code from element.cuh's path for the policy (emu::convert's bits), x^ = decode(code) *
// scale_inv. Counts, extremes and the exponent histogram are integers or max/min, equal to lib's;
// the binary64 sums are added per warp, per CTA and over CTAs in a fixed order (the same bits for
// a given device and launch), a different order from lib's block after block: the documented 1e-9
// relative order tolerance of the statistics kernel (docs/cuda.md).
// NVFP4 (issue 23): the rules with a second-level scale read the tensor's amax, computed on the
// stream first (cuda::amax) and set into the rule on the device (numerics::set_global_amax, lib's
// call); TE's column-wise copy is made first by te_rht16_columnwise into a stream-ordered
// temporary (detail::with_rht_columnwise_copy, hadamard.cu), as lib's block_stats does and
// quantize_blocks (fp4_blocks.cu) does through the same helper.
#include <string>

#include "elementwise.cuh"
#include "stats_record.cuh"
#include "fp8kit/cuda/statistics_async.hpp"
#include "fp8kit/numerics/element_stats.hpp"

namespace fp8kit::cuda {

using namespace detail;
using numerics::kHistogramBins;

namespace {

using BlockAcc = StatsAcc;

struct BlockParams {
    Format format;
    Policy policy;
    numerics::ScaleParams rule;
    numerics::ElementConsts consts;  // at scale_inv 1; rescaled per tile
    std::uint32_t rows, cols, tile_rows, tile_cols, grid_cols, blocks;
    StatsRecord* rec;          // zeroed; completed by the last CTA
    double* partial;           // gridDim.x * kSums
    float* scale_inv;          // per tile, or null
    float* tile_amax;          // per tile: max |x| over finite x (0: none), or null
    float* tile_min;           // per tile: min nonzero |x| over finite x (0: none), or null
    const float* global_amax;  // NVFP4 rules: the tensor's amax (device), else null
};

__device__ __noinline__ bool block_stochastic_overflow(const numerics::ElementConsts& c, Format f, Policy p,
                                                       std::uint32_t s, std::uint32_t random) {
    return numerics::stochastic_overflows(c, f, p, s, random);
}

// One element x (bits) at row-major index `index` under the tile's scale pair: element_step's
// flags and terms into a, its exponent bin into the CTA's histogram.
template <class S, class D, int P, int R>
__device__ __forceinline__ void block_element(typename S::storage_t bits, std::uint64_t index, float scale,
                                              const numerics::ElementConsts& consts, const BlockParams& prm,
                                              const ElementCtx& ctx, BlockAcc& a, std::uint32_t* hist) {
    const float x = widen<S>(bits);
    const std::uint32_t s = scaled_bits<S>(bits, scale);
    const std::uint8_t q = encode_one<D, P, R>(s, ctx, index);
    const std::uint32_t decoded = static_cast<std::uint32_t>(emu::convert<D, Binary32>(q, emu::kDecodePolicy));
    const numerics::Element e = numerics::element_step(
        x, numerics::code_kind_of_decoded(prm.format, decoded), static_cast<double>(__uint_as_float(decoded)), consts,
        [&] {
            if constexpr (R == static_cast<int>(emu::Rounding::stochastic))
                return (s & 0x7FFFFFFFu) > consts.max_bits &&
                       block_stochastic_overflow(consts, prm.format, prm.policy, s, stochastic_word(ctx.seed, index));
            else
                return numerics::overflows(consts, s);
        });
    atomicAdd(hist + numerics::histogram_bin(s), 1u);
    add_element(a, e, x);
}

// One tile by one warp: its amax, the rule's scale pair, then its elements.
template <class S, class D, int P, int R>
__device__ void block_tile(const typename S::storage_t* in, std::uint32_t tile, const BlockParams& prm,
                           const numerics::ScaleParams& rule, const ElementCtx& ctx, BlockAcc& a, std::uint32_t* hist) {
    const int lane = threadIdx.x & 31;
    const std::uint32_t bi = tile / prm.grid_cols, bj = tile % prm.grid_cols;
    const std::uint32_t r0 = bi * prm.tile_rows, r1 = min(prm.rows, r0 + prm.tile_rows);
    const std::uint32_t c0 = bj * prm.tile_cols, c1 = min(prm.cols, c0 + prm.tile_cols), w = c1 - c0;
    const std::uint32_t m = (r1 - r0) * w;
    float amax = 0.0f;
    for (std::uint32_t k = lane; k < m; k += 32)
        amax = max_abs<S>(amax, in[static_cast<std::size_t>(r0 + k / w) * prm.cols + c0 + k % w]);
    amax = __uint_as_float(__reduce_max_sync(0xFFFFFFFFu, __float_as_uint(amax)));  // >= 0: ordered as bits
    const numerics::BlockScale b = numerics::rule_scale(rule, amax);
    if (lane == 0 && prm.scale_inv != nullptr) prm.scale_inv[tile] = b.scale_inv;
    numerics::ElementConsts consts = prm.consts;
    numerics::rescale(consts, b.scale_inv);
    BlockAcc t{};  // this tile's part, added to a at the end (counts stay small; sums in order)
    t.min_nz = 0xFFFFFFFFu;
    for (std::uint32_t k = lane; k < m; k += 32) {
        const std::size_t i = static_cast<std::size_t>(r0 + k / w) * prm.cols + c0 + k % w;
        block_element<S, D, P, R>(in[i], i, b.scale, consts, prm, ctx, t, hist);
    }
#pragma unroll
    for (int k = 0; k < kCounts; ++k) a.count[k] += t.count[k];
#pragma unroll
    for (int k = 0; k < kSums; ++k) a.sum[k] += t.sum[k];
    a.amax = max(a.amax, t.amax);
    a.min_nz = min(a.min_nz, t.min_nz);
    if (prm.tile_amax != nullptr) {  // the tile's extremes (lib's BlockStats dynamic range)
        const std::uint32_t hi = __reduce_max_sync(0xFFFFFFFFu, t.amax), lo = __reduce_min_sync(0xFFFFFFFFu, t.min_nz);
        if (lane == 0) {
            prm.tile_amax[tile] = __uint_as_float(hi);
            prm.tile_min[tile] = __uint_as_float(lo == 0xFFFFFFFFu ? 0u : lo);
        }
    }
}

template <class S, class D, int P, int R>
__global__ void __launch_bounds__(kThreads)
    block_statistics_kernel(const void* __restrict__ in, ElementCtx ctx, const std::uint8_t* __restrict__ table,
                            BlockParams prm) {
    using T = typename S::storage_t;
    constexpr int kWarps = kThreads / 32;
    extern __shared__ __align__(16) std::uint8_t smem[];
    __shared__ std::uint32_t hist[kHistogramBins];
    __shared__ double sums[kWarps][kSums];
    for (int i = threadIdx.x; i < kHistogramBins; i += blockDim.x) hist[i] = 0u;
    load_cast_table<D, P>(ctx, table, smem);  // synchronizes the CTA
    __syncthreads();
    const int warp = threadIdx.x >> 5;
    BlockAcc a{};
    a.min_nz = 0xFFFFFFFFu;
    numerics::ScaleParams rule = prm.rule;  // NVFP4: its second level from the tensor's amax
    if (prm.global_amax != nullptr) numerics::set_global_amax(rule, *prm.global_amax);
    const std::uint32_t warps = gridDim.x * kWarps;
    for (std::uint32_t t = blockIdx.x * kWarps + warp; t < prm.blocks; t += warps)
        block_tile<S, D, P, R>(static_cast<const T*>(in), t, prm, rule, ctx, a, hist);
    // Counts and extremes: one atomic per warp; sums per warp; the last CTA completes the record
    // (stats_record.cuh).
    add_warp_totals(a, prm.rec, sums);
    __syncthreads();
    for (int b = threadIdx.x; b < kHistogramBins; b += blockDim.x)
        if (hist[b])
            atomicAdd(reinterpret_cast<unsigned long long*>(prm.rec->histogram + b),
                      static_cast<unsigned long long>(hist[b]));
    if (!finish_record(sums, prm.partial, prm.rec) || threadIdx.x != 0) return;
    prm.rec->numel = static_cast<std::uint64_t>(prm.rows) * prm.cols;
    prm.rec->sample = 1u;
    prm.rec->scale_ok = 1u;  // scale, scale_inv stay 0: one pair per tile (d_scale_inv)
}

[[noreturn]] void block_fail(const std::string& why) {
    throw std::invalid_argument("fp8kit::cuda::block_statistics_async: " + why);
}

// plan.columnwise_rht: TE's column-wise copy (cols x rows) into a stream-ordered temporary, then
// the plain statistics of it, as lib's block_stats recurses on columnwise_rht_copy.
void block_statistics_columnwise(const BlockStatsPlan& plan, const void* in, std::size_t rows, std::size_t cols,
                                 StatsRecord* d_record, float* d_scale_inv, void* d_workspace, std::uint64_t seed,
                                 Stream stream, float* d_tile_amax, float* d_tile_min, float* d_global_amax) {
    const std::string why = rht_columnwise_shape_error(plan.block_rows, plan.block_cols, rows);
    if (!why.empty()) block_fail(why);
    BlockStatsPlan plain = plan;
    plain.columnwise_rht = false;
    with_rht_columnwise_copy(plan.from, in, rows, cols, stream, [&](const void* copy) {
        block_statistics_async(plain, copy, cols, rows, d_record, d_scale_inv, d_workspace, seed, stream, d_tile_amax,
                               d_tile_min, d_global_amax);
    });
}

}  // namespace

void block_statistics_async(const BlockStatsPlan& plan, const void* in, std::size_t rows, std::size_t cols,
                            StatsRecord* d_record, float* d_scale_inv, void* d_workspace, std::uint64_t seed,
                            Stream stream, float* d_tile_amax, float* d_tile_min, float* d_global_amax) {
    const char* fn = "block_statistics_async";
    require_input(plan.from, fn);
    auto fail = [](const std::string& why) { block_fail(why); };
    if (!has_cast_kernels(plan.to)) fail("format #" + std::to_string(static_cast<int>(plan.to)) + " has no GPU kernel");
    if (plan.to == Format::e8m0) fail("e8m0 is a scale format; name an element format");
    if (numerics::rule_amax_keeps_nan(plan.rule.rule))
        fail("torchao's MX / single-level NVFP4 rules (a NaN-keeping block amax) have no GPU kernel; use the CPU");
    if (d_record == nullptr || d_workspace == nullptr) fail("d_record and d_workspace must be device pointers");
    const bool global = numerics::rule_uses_global_amax(plan.rule.rule);
    if (global && d_global_amax == nullptr) fail("NVFP4 rules (a global amax) need d_global_amax, a device float");
    if (plan.columnwise_rht)
        return block_statistics_columnwise(plan, in, rows, cols, d_record, d_scale_inv, d_workspace, seed, stream,
                                           d_tile_amax, d_tile_min, d_global_amax);
    if (plan.rule.format != plan.to) fail("the rule's format differs from the cast's");
    if (plan.block_rows < 1 || plan.block_cols < 1) fail("block shape must be >= 1 x 1");
    if (rows * cols >= kPiece || rows >= kPiece || cols >= kPiece) fail("at most 2^31 - 1 elements per call");
    BlockParams prm{};
    prm.format = plan.to;
    prm.policy = plan.policy;
    prm.rule = plan.rule;
    prm.consts = numerics::element_consts(plan.to, plan.policy, 1.0f);
    prm.rows = static_cast<std::uint32_t>(rows);
    prm.cols = static_cast<std::uint32_t>(cols);
    prm.tile_rows = static_cast<std::uint32_t>(plan.block_rows);
    prm.tile_cols = static_cast<std::uint32_t>(plan.block_cols);
    prm.grid_cols = static_cast<std::uint32_t>((cols + plan.block_cols - 1) / plan.block_cols);
    prm.blocks = static_cast<std::uint32_t>((rows + plan.block_rows - 1) / plan.block_rows) * prm.grid_cols;
    prm.rec = d_record;
    prm.partial = static_cast<double*>(d_workspace);
    prm.scale_inv = d_scale_inv;
    if ((d_tile_amax == nullptr) != (d_tile_min == nullptr)) fail("d_tile_amax and d_tile_min: give both or neither");
    prm.tile_amax = d_tile_amax;
    prm.tile_min = d_tile_min;
    if (rows * cols == 0) prm.blocks = 0;
    const cudaStream_t s = as_stream(stream);
    if (global) {  // lib: set_global_amax(rule, amax_of(data)) before the blocks
        amax(plan.from, in, rows * cols, d_global_amax, stream);
        prm.global_amax = d_global_amax;
    }
    const std::uint8_t* table = element_table(plan.to, plan.policy, s);
    const ElementCtx ctx{plan.policy, nullptr, seed};
    const unsigned grid = grid_for(static_cast<std::size_t>(std::max<std::uint32_t>(prm.blocks, 1)) * 32);
    with_input(plan.from, [&](auto si) {
        with_cast_format(plan.to, [&](auto di) {
            using S = decltype(si);
            using D = decltype(di);
            with_element_path(plan.to, plan.policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                if constexpr (path_exists<D, P, R>() && D::has_zero) {
                    constexpr int dyn = static_cast<int>(element_smem<D, P>());
                    block_statistics_kernel<S, D, P, R><<<grid, kThreads, dyn, s>>>(in, ctx, table, prm);
                }
            });
            return 0;
        });
    });
    check_launch("block_statistics_kernel");
}

}  // namespace fp8kit::cuda
