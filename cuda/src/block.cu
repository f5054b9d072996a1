// Block scaling: TransformerEngine 1x128 rows and 128x128 tiles (float32 scale per block), and MX
// (32 elements of a row per E8M0 code, OCP floor rule or TransformerEngine round-up rule). Every
// scale comes from numerics::rule_scale (numerics/include/fp8kit/numerics/scale_rules.hpp); the
// elements go through element.cuh. Each thread owns 16 consecutive elements of a row (a segment:
// 16-byte loads and one 16-byte store when the row layout allows); partial blocks at the right
// and bottom edges use only the elements that exist.
#include <cfloat>

#include "elementwise.cuh"

namespace fp8kit::cuda {

using namespace detail;

namespace {

// Segment [c0, c0 + 16) of a row; elements past `cols` read as +0 (which changes no amax).
template <class S>
__device__ __forceinline__ void load_segment(const typename S::storage_t* row, std::uint32_t c0, std::uint32_t cols,
                                             bool vec, typename S::storage_t (&e)[16]) {
    using T = typename S::storage_t;
    if (vec && c0 + 16 <= cols) {
        constexpr int kVecs = 16 * static_cast<int>(sizeof(T)) / 16;
        union {
            uint4 v[kVecs];
            T e[16];
        } u;
#pragma unroll
        for (int k = 0; k < kVecs; ++k) u.v[k] = __ldg(reinterpret_cast<const uint4*>(row + c0) + k);
#pragma unroll
        for (int k = 0; k < 16; ++k) e[k] = u.e[k];
    } else {
#pragma unroll
        for (int k = 0; k < 16; ++k) e[k] = c0 + k < cols ? row[c0 + k] : T{0};
    }
}

__device__ __forceinline__ void store_segment(std::uint8_t* row, std::uint32_t c0, std::uint32_t cols, bool vec,
                                              uint4 codes) {
    if (vec && c0 + 16 <= cols) {
        *reinterpret_cast<uint4*>(row + c0) = codes;
    } else {
        const std::uint32_t w[4] = {codes.x, codes.y, codes.z, codes.w};
#pragma unroll
        for (int k = 0; k < 16; ++k)
            if (c0 + k < cols) row[c0 + k] = static_cast<std::uint8_t>(w[k / 4] >> (8 * (k % 4)));
    }
}

template <class S>
__device__ __forceinline__ std::uint32_t segment_amax(const typename S::storage_t (&e)[16]) {
    std::uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < 16; ++k) m = max(m, abs_bits_for_max<S>(e[k]));
    return m;
}

// Codes of one segment whose stream index (row * cols + col) starts at index0; elements past
// `cols` are encoded too but never stored, so they draw no random bits that matter.
template <class S, class D, int P, int R, bool kInline = true>
__device__ __forceinline__ uint4 encode_segment(const typename S::storage_t (&e)[16], float scale, const ElementCtx& c,
                                                std::uint64_t index0) {
    Step16<S> u;
#pragma unroll
    for (int k = 0; k < 16; ++k) u.e[k] = e[k];
    // The block's scale decides per segment whether the float step applies (stochastic_grid_float;
    // not the coarse step, whose range costs more integer work per segment).
    StepRanges ranges;
    if constexpr (kCoarseStep<S, D, P>) ranges.fstep = float_step_range<S, D, P>(scale);
    return encode16<S, D, P, R, kInline>(u, scale, c, index0, false, ranges);
}

// 1 x G blocks along rows (G = 32 or 128): G / 16 lanes per block. Segments are numbered row by
// row with each row padded to whole blocks, so a block's lanes are adjacent in one warp.
template <class S, class D, int P, int R, int G>
__global__ void __launch_bounds__(kThreads)
    row_block_kernel(const void* __restrict__ in, std::uint8_t* __restrict__ out, std::uint32_t rows,
                     std::uint32_t cols, ElementCtx ctx, const std::uint8_t* __restrict__ table,
                     numerics::ScaleParams rule, float* scale_inv, std::uint8_t* scale_codes,
                     std::uint64_t first_index) {
    using T = typename S::storage_t;
    constexpr std::uint32_t kLanes = G / 16;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    const std::uint32_t nb = (cols + G - 1) / G;
    const std::uint32_t segs_per_row = nb * kLanes;
    const std::uint32_t total = rows * segs_per_row;  // < 2^31: the host splits by rows
    const bool vec = cols % 16 == 0 && aligned16(in) && aligned16(out);
    const std::uint32_t lane = threadIdx.x & 31;
    const std::uint32_t stride = gridDim.x * blockDim.x;
    // Whole warps iterate together (the shuffles need every lane): the bound is rounded up.
    const std::uint32_t warp_first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31u;
    for (std::uint32_t base = warp_first; base < total; base += stride) {
        const std::uint32_t s = base + lane;
        const bool valid = s < total;
        const std::uint32_t r = valid ? s / segs_per_row : 0;
        const std::uint32_t seg = valid ? s - r * segs_per_row : 0;
        const std::uint32_t c0 = seg * 16;
        const T* row = static_cast<const T*>(in) + static_cast<std::size_t>(r) * cols;
        T e[16];
        if (valid && c0 < cols)
            load_segment<S>(row, c0, cols, vec, e);
        else
#pragma unroll
            for (int k = 0; k < 16; ++k) e[k] = T{0};
        std::uint32_t m = segment_amax<S>(e);
#pragma unroll
        for (std::uint32_t o = kLanes / 2; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
        if (!valid) continue;
        const numerics::BlockScale bs = numerics::rule_scale(rule, __uint_as_float(m));
        const std::uint32_t b = r * nb + seg / kLanes;
        if (seg % kLanes == 0) {
            if (scale_inv) scale_inv[b] = bs.scale_inv;
            if (scale_codes) scale_codes[b] = bs.code;
        }
        if (c0 >= cols) continue;
        const uint4 codes =
            encode_segment<S, D, P, R>(e, bs.scale, ctx, first_index + static_cast<std::uint64_t>(r) * cols + c0);
        store_segment(out + static_cast<std::size_t>(r) * cols, c0, cols, vec, codes);
    }
}

// Max over the CTA, returned to every thread (256 threads).
__device__ __forceinline__ std::uint32_t cta_max(std::uint32_t v) {
    __shared__ std::uint32_t w[kThreads / 32];
    v = warp_max(v);
    if ((threadIdx.x & 31) == 0) w[threadIdx.x >> 5] = v;
    __syncthreads();
    std::uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < kThreads / 32; ++k) m = max(m, w[k]);
    __syncthreads();  // w is reused by the next tile
    return m;
}

// 128 x 128 tiles, one CTA per tile at a time: each thread holds 4 segments (rows t/8 + 32 j,
// columns 16 (t % 8) ..) in registers from the amax to the cast, so the tile is read once.
// At least 3 CTAs per SM (at most 85 registers): left to itself ptxas took 104 registers from
// float32, 2 CTAs per SM (25% occupancy), and the kernel read at 61.5% of DRAM throughput
// (Nsight Compute, H200: docs/performance.md).
template <class S, class D, int P, int R>
__global__ void __launch_bounds__(kThreads, 3)
    tile_kernel(const void* __restrict__ in, std::uint8_t* __restrict__ out, std::uint32_t rows, std::uint32_t cols,
                ElementCtx ctx, const std::uint8_t* __restrict__ table, numerics::ScaleParams rule, float* scale_inv,
                std::uint64_t first_index) {
    using T = typename S::storage_t;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    const std::uint32_t tr = (rows + 127) / 128, tc = (cols + 127) / 128;
    const bool vec = cols % 16 == 0 && aligned16(in) && aligned16(out);
    const std::uint32_t c_off = (threadIdx.x & 7) * 16, r_off = threadIdx.x >> 3;
    for (std::uint32_t t = blockIdx.x; t < tr * tc; t += gridDim.x) {
        const std::uint32_t ti = t / tc;
        const std::uint32_t r0 = ti * 128, c0 = (t - ti * tc) * 128 + c_off;
        T e[4][16];
        std::uint32_t m = 0;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const std::uint32_t r = r0 + r_off + 32 * j;
            if (r < rows && c0 < cols)
                load_segment<S>(static_cast<const T*>(in) + static_cast<std::size_t>(r) * cols, c0, cols, vec, e[j]);
            else
#pragma unroll
                for (int k = 0; k < 16; ++k) e[j][k] = T{0};
            m = max(m, segment_amax<S>(e[j]));
        }
        m = cta_max(m);
        const numerics::BlockScale bs = numerics::rule_scale(rule, __uint_as_float(m));
        if (threadIdx.x == 0) scale_inv[t] = bs.scale_inv;
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            const std::uint32_t r = r0 + r_off + 32 * j;
            if (r >= rows || c0 >= cols) continue;
            const uint4 codes = encode_segment<S, D, P, R, false>(
                e[j], bs.scale, ctx, first_index + static_cast<std::uint64_t>(r) * cols + c0);
            store_segment(out + static_cast<std::size_t>(r) * cols, c0, cols, vec, codes);
        }
    }
}

float input_max(Wide w) {
    switch (w) {
        case Wide::f16: return 65504.0f;
        case Wide::bf16: return 3.38953139e38f;  // 0x7F7F
        default: return FLT_MAX;
    }
}

enum class Shape { row128, row32, tile128 };

void launch_blocks(Shape shape, Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows,
                   std::size_t cols, const Policy& policy, const numerics::ScaleParams& rule, float* scale_inv,
                   std::uint8_t* codes, std::uint64_t seed, std::uint64_t first, cudaStream_t s) {
    if (rows == 0 || cols == 0) return;
    if (cols >= (std::size_t{1} << 31))
        throw std::invalid_argument("fp8kit::cuda: block scaling needs fewer than 2^31 columns, got " +
                                    std::to_string(cols));
    const std::uint8_t* table = element_table(to, policy, s);
    const ElementCtx ctx{policy, nullptr, seed};
    const std::size_t es = wide_bytes(from);
    // Rows per launch: 32-bit segment and tile indices, and tile pieces of whole 128-row bands.
    const std::size_t segs_per_row = (cols + 15) / 16 + 8;
    std::size_t piece = (std::size_t{1} << 30) / segs_per_row;
    piece = piece < 128 ? 128 : piece / 128 * 128;
    with_input(from, [&](auto si) {
        with_fp8(to, [&](auto di) {
            using S = decltype(si);
            using D = decltype(di);
            with_element_path(to, policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                if constexpr (D::has_zero && path_exists<D, P, R>()) {  // E8M0 elements are rejected earlier
                    constexpr std::size_t smem = element_smem<D, P>();
                    for (std::size_t r0 = 0; r0 < rows; r0 += piece) {
                        const std::size_t pr = rows - r0 < piece ? rows - r0 : piece;
                        const void* pin = static_cast<const char*>(in) + r0 * cols * es;
                        std::uint8_t* pout = out + r0 * cols;
                        const auto r32 = static_cast<std::uint32_t>(pr), c32 = static_cast<std::uint32_t>(cols);
                        const std::uint64_t f = first + r0 * cols;
                        switch (shape) {
                            case Shape::row128: {
                                const std::size_t nb = (cols + 127) / 128;
                                row_block_kernel<S, D, P, R, 128>
                                    <<<grid_for_path<P, R>(pr * nb * 8), kThreads, smem, s>>>(
                                        pin, pout, r32, c32, ctx, table, rule, scale_inv + r0 * nb, nullptr, f);
                                break;
                            }
                            case Shape::row32: {
                                const std::size_t nb = (cols + 31) / 32;
                                row_block_kernel<S, D, P, R, 32>
                                    <<<grid_for_path<P, R>(pr * nb * 2), kThreads, smem, s>>>(
                                        pin, pout, r32, c32, ctx, table, rule, nullptr, codes + r0 * nb, f);
                                break;
                            }
                            case Shape::tile128: {
                                const std::size_t tiles = ((pr + 127) / 128) * ((cols + 127) / 128);
                                tile_kernel<S, D, P, R><<<grid_for_path<P, R>(tiles * kThreads), kThreads, smem, s>>>(
                                    pin, pout, r32, c32, ctx, table, rule,
                                    scale_inv + (r0 / 128) * ((cols + 127) / 128), f);
                                break;
                            }
                        }
                    }
                }
            });
            return 0;
        });
    });
    check_launch("block scaling kernel");
}

}  // namespace

void quantize_block_1x128(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                          const Policy& policy, float* d_scale_inv, const ScaleOptions& options, std::uint64_t seed,
                          std::uint64_t first_index, Stream stream) {
    require_input(from, "quantize_block_1x128");
    require_fp8(to, "quantize_block_1x128");
    const auto rule =
        numerics::make_scale_params(numerics::ScaleRule::te, to, options.epsilon, options.pow2, input_max(from), 0);
    launch_blocks(Shape::row128, to, from, in, out, rows, cols, policy, rule, d_scale_inv, nullptr, seed, first_index,
                  as_stream(stream));
}

void quantize_block_128x128(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                            const Policy& policy, float* d_scale_inv, const ScaleOptions& options, std::uint64_t seed,
                            std::uint64_t first_index, Stream stream) {
    require_input(from, "quantize_block_128x128");
    require_fp8(to, "quantize_block_128x128");
    const auto rule =
        numerics::make_scale_params(numerics::ScaleRule::te, to, options.epsilon, options.pow2, input_max(from), 0);
    launch_blocks(Shape::tile128, to, from, in, out, rows, cols, policy, rule, d_scale_inv, nullptr, seed, first_index,
                  as_stream(stream));
}

void quantize_mx(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows, std::size_t cols,
                 const Policy& policy, MxRule rule, std::uint8_t* d_scales, std::uint64_t seed,
                 std::uint64_t first_index, Stream stream) {
    require_input(from, "quantize_mx");
    require_fp8(to, "quantize_mx");
    const auto params = numerics::make_scale_params(
        rule == MxRule::ocp_floor ? numerics::ScaleRule::mx_ocp_floor : numerics::ScaleRule::mx_roundup, to, 0.0, false,
        FLT_MAX, 0);
    launch_blocks(Shape::row32, to, from, in, out, rows, cols, policy, params, nullptr, d_scales, seed, first_index,
                  as_stream(stream));
}

}  // namespace fp8kit::cuda
