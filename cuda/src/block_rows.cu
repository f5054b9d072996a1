// The fast path of quantize_blocks (blocks.hpp) for the block shapes of NVFP4 and MX: 1 x 16 and
// 16 x 16 (NVFP4, TE and torchao) and 1 x 32 (MXFP4, MXFP6, MXFP8 under every E8M0 rule), in the
// style of block.cu: each lane owns 16 consecutive elements of a row (a segment: 16-byte loads,
// one 16-byte store of codes or one 8-byte store of packed E2M1 pairs), the lanes of one block are
// adjacent in a warp and meet in shuffles for its amax, and the element conversion's path is fixed
// at compile time (element.cuh). Scales come from numerics::rule_scale, the products from
// host_mul_bits (lib's host multiply), and the codes from emu::convert's results: through
// element.cuh's paths for the FP8 formats, and for E2M1 / E2M3 / E3M2 from the exact steps below,
// which fall back to emu::convert itself for every element they do not cover.
#include <cfloat>
#include <type_traits>

#include "block_common.cuh"
#include "elementwise.cuh"

namespace fp8kit::cuda::detail {

namespace {

// The OCP MX element formats (E2M1, E2M3, E3M2: no Inf, no NaN) with the exact steps below.
template <class D>
constexpr bool kMxNarrow = std::is_same_v<D, emu::E2M1> || std::is_same_v<D, emu::E2M3> || std::is_same_v<D, emu::E3M2>;

// Float32 bits of D's largest finite value (E2M1 6, E2M3 7.5, E3M2 28).
template <class D>
constexpr std::uint32_t kMaxBits = (static_cast<std::uint32_t>(D::emax + 127) << 23) |
                                   (static_cast<std::uint32_t>((1u << D::man_bits) - 1u) << (23 - D::man_bits));

// The code of y (float32 bits, |y| <= D's largest finite value) under nearest-even: D's normal
// range rounds y's mantissa to D::man_bits bits (ties to even, a carry moves into the exponent)
// and re-biases the exponent; below D's smallest normal 2^emin the quantum is 2^(emin - man_bits),
// and one float32 add of C = 2^(emin - man_bits + 23), whose ulp is that quantum, rounds |y| to a
// multiple of it (roundTiesToEven), the multiple being the code (bits(|y| + C) - bits(C); a
// carry to 2^emin gives the first normal code). The sign goes to D's top bit (-0 and negatives
// that round to zero keep it). On D's grid (stochastic rounding's grid values) it is the exact
// encoding.
template <class D>
__device__ __forceinline__ std::uint32_t mx_narrow_code_rne(std::uint32_t y) {
    constexpr int kM = D::man_bits, kS = 23 - kM;
    constexpr std::uint32_t kNormalLo = static_cast<std::uint32_t>(D::emin + 127) << 23;
    constexpr std::uint32_t kCBits = static_cast<std::uint32_t>(D::quantum_min + 23 + 127) << 23;
    constexpr std::uint32_t kRebias = static_cast<std::uint32_t>(127 - D::bias) << kM;
    const std::uint32_t u = y & 0x7FFFFFFFu;
    const std::uint32_t sub = __float_as_uint(__fadd_rn(__uint_as_float(u), __uint_as_float(kCBits))) - kCBits;
    const std::uint32_t b = u + ((1u << (kS - 1)) - 1u) + ((u >> kS) & 1u);
    const std::uint32_t nor = (b >> kS) - kRebias;
    return (u < kNormalLo ? sub : nor) | ((y >> 31) << (D::total_bits - 1));
}

// Codes of four E2M1 / E2M3 / E3M2 elements (stream indices index0 ..), little-endian bytes.
// Nearest-even (read at run time when R < 0) and stochastic rounding take the steps above when
// all four |y| are at most D's largest finite value; otherwise (NaN, Inf, overflow, the other
// roundings) emu::convert itself, with the same random words.
template <class D, int R>
__device__ __forceinline__ std::uint32_t mx_narrow_four(const std::uint32_t (&y)[4], const ElementCtx& c,
                                                        std::uint64_t index0) {
    const std::uint32_t hi = max(max(y[0] & 0x7FFFFFFFu, y[1] & 0x7FFFFFFFu), max(y[2] & 0x7FFFFFFFu, y[3] & 0x7FFFFFFFu));
    const bool in_range = hi <= kMaxBits<D>;
    std::uint32_t out = 0;
    if constexpr (R == static_cast<int>(emu::Rounding::stochastic)) {
        std::uint32_t w[4];
        if ((index0 & 3u) == 0) {
            const emu::PhiloxWords pw = emu::philox4x32_10(c.keys, index0 >> 2);
#pragma unroll
            for (int k = 0; k < 4; ++k) w[k] = pw.w[k];
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) w[k] = stochastic_word(c.seed, index0 + k);
        }
        if (in_range) {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
                const std::uint32_t v = (y[k] & 0x80000000u) | stochastic_grid_general<D>(y[k] & 0x7FFFFFFFu, w[k]);
                out |= mx_narrow_code_rne<D>(v) << (8 * k);
            }
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) out |= std::uint32_t{convert_fixed<D, R>(y[k], c.policy, w[k])} << (8 * k);
        }
    } else {
        if (in_range && c.policy.rounding == emu::Rounding::nearest_even) {
#pragma unroll
            for (int k = 0; k < 4; ++k) out |= mx_narrow_code_rne<D>(y[k]) << (8 * k);
        } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) out |= std::uint32_t{convert_fixed<D, R>(y[k], c.policy, 0u)} << (8 * k);
        }
    }
    return out;
}

// The (format, path) pairs with a kernel here: E2M1 / E2M3 / E3M2 under every policy, and E4M3 /
// E5M2 on the cvt paths (nearest-even and stochastic rounding with the saturating, canonical
// policies, and nearest-even with any overflow and NaN policy: MXFP8 as TE, torchao and the OCP
// rule give it). The rest (the FNUZ formats, the other roundings into FP8, the ml_dtypes formats)
// run the general kernel of fp4_blocks.cu, so that this file compiles in reasonable time.
template <class D, int P, int R>
constexpr bool kFastPath = kMxNarrow<D> ? P == kConvert
                                        : (std::is_same_v<D, emu::E4M3> || std::is_same_v<D, emu::E5M2>) &&
                                              (P == kCvt || P == kCvtFix || P == kSrCvt) && path_exists<D, P, R>();

// Codes of one segment (16 elements, stream indices index0 ..) at the block's scale.
template <class S, class D, int P, int R>
__device__ __forceinline__ uint4 encode_block_segment(const typename S::storage_t (&e)[16], float scale,
                                                      const ElementCtx& c, std::uint64_t index0) {
    std::uint32_t w[4];
#pragma unroll
    for (int g = 0; g < 4; ++g) {
        std::uint32_t y[4];
#pragma unroll
        for (int k = 0; k < 4; ++k) y[k] = host_mul_bits(widen_bits<S>(e[4 * g + k]), scale);
        if constexpr (kMxNarrow<D>) w[g] = mx_narrow_four<D, R>(y, c, index0 + 4 * g);
        else w[g] = encode_four<D, P, R>(y, c, index0 + 4 * g);
    }
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// Two E2M1 codes per byte, element 2k in the low nibble (emu::pack_fp4, NibbleOrder::low_first):
// the four codes of word w (bytes c0..c3, each < 16) become the 16 bits c0 | c1 << 4 | c2 << 8 | c3 << 12.
__device__ __forceinline__ std::uint32_t pack_word(std::uint32_t w) {
    const std::uint32_t t = (w & 0x000F000Fu) | ((w & 0x0F000F00u) >> 4);
    return (t & 0xFFu) | ((t >> 8) & 0xFF00u);
}

struct RowGeom {
    std::uint32_t rows, cols;
    std::uint32_t block_rows;  // 1 or 16
    std::uint32_t seg_log2;    // log2(segments across a block): 0 (16 columns) or 1 (32)
    std::uint32_t lanes_log2;  // log2(lanes per block) = log2(block_rows) + seg_log2
    std::uint32_t grid_cols;
    std::uint32_t segs;  // grid_rows * grid_cols lanes per block (< 2^31)
};

struct RowOut {
    std::uint8_t* codes;
    std::uint8_t* scale_codes;
    float* scale;
    float* scale_inv;
};

// Segment s: block b = s >> lanes_log2 (row-major in the block grid), lane w = s & (lanes - 1)
// within it: row w >> seg_log2 of the block, segment w & (2^seg_log2 - 1) across it. Segments
// past the tensor's edge read as +0 (which changes no amax) and store nothing.
template <class S, class D, int P, int R, bool kPacked>
__global__ void __launch_bounds__(kThreads)
row_blocks_kernel(const void* __restrict__ in, RowGeom g, ElementCtx ctx, const std::uint8_t* __restrict__ table,
                  numerics::ScaleParams rule, const float* __restrict__ d_global_amax, float* amax_out, RowOut o) {
    using T = typename S::storage_t;
    extern __shared__ __align__(16) std::uint8_t smem[];
    load_cast_table<D, P>(ctx, table, smem);
    if (numerics::rule_uses_global_amax(rule.rule)) numerics::set_global_amax(rule, *d_global_amax);
    const bool vec = g.cols % 16 == 0 && aligned16(in) &&
                     (reinterpret_cast<std::uintptr_t>(o.codes) & (kPacked ? 7u : 15u)) == 0;
    const std::uint32_t lanes = 1u << g.lanes_log2;
    const std::uint32_t lane = threadIdx.x & 31;
    const std::uint32_t stride = gridDim.x * blockDim.x;
    const std::uint32_t warp_first = (blockIdx.x * blockDim.x + threadIdx.x) & ~31u;
    std::uint32_t tensor_max = 0;  // amax_out: the blocks' amax bits, as lib's amax_of
    for (std::uint32_t base = warp_first; base < g.segs; base += stride) {
        const std::uint32_t s = base + lane;
        const bool valid = s < g.segs;
        const std::uint32_t b = s >> g.lanes_log2, w = s & (lanes - 1u);
        const std::uint32_t bi = b / g.grid_cols, bj = b - bi * g.grid_cols;
        const std::uint32_t r = bi * g.block_rows + (w >> g.seg_log2);
        const std::uint32_t c0 = ((bj << g.seg_log2) + (w & ((1u << g.seg_log2) - 1u))) * 16;
        const bool here = valid && r < g.rows && c0 < g.cols;
        const T* row = static_cast<const T*>(in) + static_cast<std::size_t>(r) * g.cols;
        T e[16];
        if (here && vec) {
            union {
                uint4 v[Step16<S>::kVecs];
                T e[16];
            } u;
#pragma unroll
            for (int k = 0; k < Step16<S>::kVecs; ++k) u.v[k] = __ldg(reinterpret_cast<const uint4*>(row + c0) + k);
#pragma unroll
            for (int k = 0; k < 16; ++k) e[k] = u.e[k];
        } else {
#pragma unroll
            for (int k = 0; k < 16; ++k) e[k] = here && c0 + k < g.cols ? row[c0 + k] : T{0};
        }
        std::uint32_t m = 0;  // |x| bits, NaN ignored (as lib's amax_of)
#pragma unroll
        for (int k = 0; k < 16; ++k) m = max(m, abs_bits_for_max<S>(e[k]));
        for (std::uint32_t d = lanes >> 1; d > 0; d >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, d));
        tensor_max = max(tensor_max, m);
        if (!valid) continue;
        const numerics::BlockScale bs = numerics::rule_scale(rule, __uint_as_float(m));
        if (w == 0) {
            if (o.scale_codes) o.scale_codes[b] = bs.code;
            if (o.scale) o.scale[b] = bs.scale;
            if (o.scale_inv) o.scale_inv[b] = bs.scale_inv;
        }
        if (!here) continue;
        const uint4 q = encode_block_segment<S, D, P, R>(e, bs.scale, ctx, static_cast<std::uint64_t>(r) * g.cols + c0);
        if constexpr (kPacked) {
            const uint2 p = make_uint2(pack_word(q.x) | (pack_word(q.y) << 16), pack_word(q.z) | (pack_word(q.w) << 16));
            std::uint8_t* dst = o.codes + static_cast<std::size_t>(r) * (g.cols / 2) + c0 / 2;
            if (vec) {
                *reinterpret_cast<uint2*>(dst) = p;
            } else {
                const std::uint32_t pw[2] = {p.x, p.y};
#pragma unroll
                for (int k = 0; k < 8; ++k)
                    if (c0 + 2 * k < g.cols) dst[k] = static_cast<std::uint8_t>(pw[k / 4] >> (8 * (k % 4)));
            }
        } else {
            std::uint8_t* dst = o.codes + static_cast<std::size_t>(r) * g.cols + c0;
            if (vec) {
                *reinterpret_cast<uint4*>(dst) = q;
            } else {
                const std::uint32_t qw[4] = {q.x, q.y, q.z, q.w};
#pragma unroll
                for (int k = 0; k < 16; ++k)
                    if (c0 + k < g.cols) dst[k] = static_cast<std::uint8_t>(qw[k / 4] >> (8 * (k % 4)));
            }
        }
    }
    if (amax_out) block_amax_atomic(tensor_max, amax_out);  // every thread of the CTA gets here
}

}  // namespace

bool quantize_row_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                         std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                         float* d_scale_inv, float* d_global_amax, std::uint64_t seed, cudaStream_t stream) {
    if (!(spec.block_rows == 1 || spec.block_rows == 16) || !(spec.block_cols == 16 || spec.block_cols == 32)) return false;
    if (spec.block_rows * spec.block_cols / 16 > 32) return false;  // 16 x 32: more lanes than a warp
    if (rows == 0 || cols == 0) {
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(d_global_amax, 0, sizeof(float), stream));  // amax of nothing: +0
        return true;
    }
    const std::size_t grid_rows = (rows + spec.block_rows - 1) / spec.block_rows;
    const std::size_t grid_cols = (cols + spec.block_cols - 1) / spec.block_cols;
    const std::uint32_t seg_log2 = spec.block_cols == 32 ? 1 : 0;
    const std::uint32_t lanes_log2 = (spec.block_rows == 16 ? 4 : 0) + seg_log2;
    const std::size_t segs = (grid_rows * grid_cols) << lanes_log2;
    if (segs >= (std::size_t{1} << 31) || rows >= (std::size_t{1} << 32) || cols >= (std::size_t{1} << 31)) return false;
    const RowGeom g{static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols), static_cast<std::uint32_t>(spec.block_rows),
                    seg_log2, lanes_log2, static_cast<std::uint32_t>(grid_cols), static_cast<std::uint32_t>(segs)};
    const numerics::ScaleParams rule =
        numerics::make_scale_params(spec.rule, spec.format, spec.epsilon, spec.pow2, spec.value_for_inf, 0);
    const RowOut o{d_codes, d_scale_codes, d_scale, d_scale_inv};
    bool fast = false;
    with_cast_format(spec.format, [&](auto di) {
        with_element_path(spec.format, spec.policy, [&](auto p, auto r) {
            fast = kFastPath<decltype(di), decltype(p)::value, decltype(r)::value>;
        });
        return 0;
    });
    if (!fast) return false;
    // The global amax: a pass of its own before the blocks where the rule reads it (NVFP4),
    // else the blocks' amax folded into it by the kernel (one atomicMax per CTA on zeroed bits).
    float* amax_out = nullptr;
    if (numerics::rule_uses_global_amax(spec.rule)) {
        fp8kit::cuda::amax(from, in, rows * cols, d_global_amax, stream);
    } else {
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(d_global_amax, 0, sizeof(float), stream));
        amax_out = d_global_amax;
    }
    const std::uint8_t* table = element_table(spec.format, spec.policy, stream);
    const ElementCtx ctx{spec.policy, nullptr, seed};
    bool launched = false;
    with_input(from, [&](auto si) {
        with_cast_format(spec.format, [&](auto di) {
            using S = decltype(si);
            using D = decltype(di);
            with_element_path(spec.format, spec.policy, [&](auto p, auto r) {
                constexpr int P = decltype(p)::value, R = decltype(r)::value;
                if constexpr (kFastPath<D, P, R>) {
                    launched = true;
                    constexpr std::size_t smem = element_smem<D, P>();
                    const unsigned grid = grid_for_path<P, R>(segs);
                    if constexpr (std::is_same_v<D, emu::E2M1>) {
                        if (packed) {
                            row_blocks_kernel<S, D, P, R, true><<<grid, kThreads, smem, stream>>>(in, g, ctx, table, rule, d_global_amax, amax_out, o);
                            return;
                        }
                    }
                    row_blocks_kernel<S, D, P, R, false><<<grid, kThreads, smem, stream>>>(in, g, ctx, table, rule, d_global_amax,
                                                                                          amax_out, o);
                }
            });
            return 0;
        });
    });
    check_launch("row_blocks_kernel");
    return launched;
}

}  // namespace fp8kit::cuda::detail
