// Block scaling: TransformerEngine 1x128 rows and 128x128 tiles (float32 scale per block), and MX
// (32 elements per E8M0 scale, OCP floor rule or round-up rule). Each lane owns 4 consecutive
// elements of a row (one 16-byte load for f32, 8 bytes for f16/bf16, when the row layout allows);
// partial blocks at the right and bottom edges use only the elements that exist.
#include <cfloat>

#include "common.cuh"

namespace fp8kit::cuda {

using namespace detail;

namespace {

template <class S>
struct Quad {
    typename S::storage_t e[4];
};

// Loads elements c0..c0+3 of a row (missing ones read as +0, which changes no amax).
template <class S>
__device__ __forceinline__ Quad<S> load_quad(const typename S::storage_t* row, std::size_t c0,
                                             std::size_t cols, bool vec) {
    using T = typename S::storage_t;
    Quad<S> q;
    if (vec && c0 + 4 <= cols) {
        if constexpr (sizeof(T) == 4) {
            const uint4 v = __ldg(reinterpret_cast<const uint4*>(row + c0));
            q.e[0] = v.x; q.e[1] = v.y; q.e[2] = v.z; q.e[3] = v.w;
        } else {
            const uint2 v = __ldg(reinterpret_cast<const uint2*>(row + c0));
            q.e[0] = static_cast<T>(v.x); q.e[1] = static_cast<T>(v.x >> 16);
            q.e[2] = static_cast<T>(v.y); q.e[3] = static_cast<T>(v.y >> 16);
        }
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k) q.e[k] = c0 + k < cols ? row[c0 + k] : T{0};
    }
    return q;
}

__device__ __forceinline__ void store_quad(std::uint8_t* row, std::size_t c0, std::size_t cols, bool vec,
                                           const std::uint8_t (&b)[4]) {
    if (vec && c0 + 4 <= cols) {
        *reinterpret_cast<std::uint32_t*>(row + c0) =
            b[0] | (std::uint32_t{b[1]} << 8) | (std::uint32_t{b[2]} << 16) | (std::uint32_t{b[3]} << 24);
    } else {
#pragma unroll
        for (int k = 0; k < 4; ++k)
            if (c0 + k < cols) row[c0 + k] = b[k];
    }
}

template <class S>
__device__ __forceinline__ std::uint32_t quad_amax(const Quad<S>& q) {
    std::uint32_t m = 0;
#pragma unroll
    for (int k = 0; k < 4; ++k) m = max(m, abs_bits_for_max<S>(q.e[k]));
    return m;
}

template <class S, class D, int R>
__device__ __forceinline__ void encode_quad(const Quad<S>& q, std::uint8_t (&b)[4], const Policy& policy,
                                            Scaling sc, std::uint64_t seed, std::uint64_t index0) {
#pragma unroll
    for (int k = 0; k < 4; ++k) b[k] = encode_element<S, D, R>(q.e[k], policy, sc, seed, index0 + k);
}

// The scale of one block from its amax.
struct BlockRule {
    enum Kind : std::uint8_t { te, mx_floor, mx_round_up } kind;
    float fmax;           // te: the element format's largest finite value
    bool pow2;            // te
    float epsilon;        // te
    float value_for_inf;  // te: the input type's largest finite value
    int emax_elem;        // mx_floor
    float fmax_rcp;       // mx_round_up: fl32(1 / fmax)
};

// 2^(127 - b) as float32 (exact for every b <= 254, subnormal at b = 254); NaN for 0xFF.
__device__ __forceinline__ float e8m0_inverse(std::uint32_t b) {
    if (b == 0xFFu) return __uint_as_float(0x7FC00000u);
    if (b == 254u) return __uint_as_float(0x00400000u);
    return __uint_as_float((254u - b) << 23);
}

__device__ __forceinline__ std::uint32_t mx_floor_code(std::uint32_t a, int emax_elem) {
    if (a == 0u) return 0u;
    if (a >= 0x7F800000u) return 0xFFu;
    const int e = a >= 0x00800000u ? static_cast<int>(a >> 23) - 127 : (31 - __clz(a)) - 149;
    int shared_exp = e - emax_elem;
    shared_exp = shared_exp < -127 ? -127 : (shared_exp > 127 ? 127 : shared_exp);
    return static_cast<std::uint32_t>(shared_exp + 127);
}

__device__ __forceinline__ std::uint32_t mx_round_up_code(std::uint32_t a, float fmax_rcp) {
    const float v = __fmul_rn(__uint_as_float(a), fmax_rcp);
    const emu::Policy up{emu::Rounding::toward_positive, emu::Overflow::saturate_all, emu::NanEncoding::canonical};
    return emu::convert<Binary32, emu::E8M0>(__float_as_uint(v), up);
}

// Returns the element scaling and writes the block's scale output through `write`.
__device__ __forceinline__ Scaling block_scaling(std::uint32_t amax_bits, const BlockRule& rule,
                                                 float* scale_inv_out, std::uint8_t* code_out) {
    if (rule.kind == BlockRule::te) {
        const float s = te_scale(__uint_as_float(amax_bits), rule.fmax, rule.pow2, rule.epsilon, rule.value_for_inf);
        if (scale_inv_out) *scale_inv_out = __fdiv_rn(1.0f, s);
        return {s, s != 1.0f};
    }
    const std::uint32_t b = rule.kind == BlockRule::mx_floor ? mx_floor_code(amax_bits, rule.emax_elem)
                                                             : mx_round_up_code(amax_bits, rule.fmax_rcp);
    if (code_out) *code_out = static_cast<std::uint8_t>(b);
    const float s = e8m0_inverse(b);
    return {s, s != 1.0f};
}

// Row and column block of block g: 64-bit division is a long software sequence on the GPU, so
// indices that fit in 32 bits (every tensor of fewer than 2^32 blocks) use the 32-bit one.
__device__ __forceinline__ void block_coords(std::size_t g, std::size_t nb, std::size_t& r, std::size_t& cb) {
    if (((g | nb) >> 32) == 0) {
        const auto g32 = static_cast<std::uint32_t>(g), nb32 = static_cast<std::uint32_t>(nb);
        r = g32 / nb32;
        cb = g32 - static_cast<std::uint32_t>(r) * nb32;
    } else {
        r = g / nb;
        cb = g % nb;
    }
}

// 1 x G blocks along rows; G / 4 lanes per block, 32 / (G / 4) blocks per warp step.
template <class S, class D, int R, int G>
__global__ void __launch_bounds__(kThreads)
row_block_kernel(const void* __restrict__ in, std::uint8_t* __restrict__ out, std::size_t rows,
                 std::size_t cols, Policy policy, BlockRule rule, float* scale_inv,
                 std::uint8_t* scale_codes, std::uint64_t seed, std::uint64_t first_index) {
    using T = typename S::storage_t;
    constexpr int kLanes = G / 4;
    constexpr int kPerWarp = 32 / kLanes;
    const std::size_t nb = (cols + G - 1) / G;
    const std::size_t total = rows * nb;
    const bool vec = cols % 4 == 0 && aligned16(in) && aligned16(out);
    const int lane = threadIdx.x & 31;
    const int sub = lane % kLanes;
    const std::size_t warp = (static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
    const std::size_t warps = (static_cast<std::size_t>(gridDim.x) * blockDim.x) >> 5;
    for (std::size_t base = warp * kPerWarp; base < total; base += warps * kPerWarp) {
        const std::size_t g = base + lane / kLanes;
        const bool valid = g < total;
        std::size_t r = 0, cb = 0;
        if (valid) block_coords(g, nb, r, cb);
        const std::size_t c0 = cb * G + static_cast<std::size_t>(sub) * 4;
        const T* row = static_cast<const T*>(in) + r * cols;
        Quad<S> q = valid ? load_quad<S>(row, c0, cols, vec) : Quad<S>{};
        if (!valid) q.e[0] = q.e[1] = q.e[2] = q.e[3] = T{0};
        std::uint32_t m = quad_amax<S>(q);
#pragma unroll
        for (int o = kLanes / 2; o > 0; o >>= 1) m = max(m, __shfl_xor_sync(0xFFFFFFFFu, m, o));
        if (!valid) continue;
        const bool writer = sub == 0;
        const Scaling sc = block_scaling(m, rule, writer && scale_inv ? scale_inv + g : nullptr,
                                         writer && scale_codes ? scale_codes + g : nullptr);
        std::uint8_t b[4];
        encode_quad<S, D, R>(q, b, policy, sc, seed, first_index + r * cols + c0);
        store_quad(out + r * cols, c0, cols, vec, b);
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

// 128 x 128 tiles, one CTA per tile: read for the amax, then read again (from L2) to convert.
template <class S, class D, int R>
__global__ void __launch_bounds__(kThreads)
tile_kernel(const void* __restrict__ in, std::uint8_t* __restrict__ out, std::size_t rows,
            std::size_t cols, Policy policy, BlockRule rule, float* scale_inv, std::uint64_t seed,
            std::uint64_t first_index) {
    using T = typename S::storage_t;
    const std::size_t tr = (rows + 127) / 128, tc = (cols + 127) / 128;
    const bool vec = cols % 4 == 0 && aligned16(in) && aligned16(out);
    const std::size_t c_off = static_cast<std::size_t>(threadIdx.x & 31) * 4;
    const std::size_t r_off = threadIdx.x >> 5;  // 8 rows per step, 16 steps
    for (std::size_t t = blockIdx.x; t < tr * tc; t += gridDim.x) {
        const std::size_t r0 = (t / tc) * 128, c0 = (t % tc) * 128 + c_off;
        std::uint32_t m = 0;
        for (int j = 0; j < 16; ++j) {
            const std::size_t r = r0 + r_off + 8 * j;
            if (r < rows) m = max(m, quad_amax<S>(load_quad<S>(static_cast<const T*>(in) + r * cols, c0, cols, vec)));
        }
        m = cta_max(m);
        const Scaling sc = block_scaling(m, rule, threadIdx.x == 0 ? scale_inv + t : nullptr, nullptr);
        for (int j = 0; j < 16; ++j) {
            const std::size_t r = r0 + r_off + 8 * j;
            if (r >= rows || c0 >= cols) continue;
            const Quad<S> q = load_quad<S>(static_cast<const T*>(in) + r * cols, c0, cols, vec);
            std::uint8_t b[4];
            encode_quad<S, D, R>(q, b, policy, sc, seed, first_index + r * cols + c0);
            store_quad(out + r * cols, c0, cols, vec, b);
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

BlockRule te_rule(Format to, Wide from, const ScaleOptions& o) {
    return {BlockRule::te, format_max(to), o.pow2, o.epsilon, input_max(from), 0, 0.0f};
}

enum class Shape { row128, row32, tile128 };

void launch_blocks(Shape shape, Format to, Wide from, const void* in, std::uint8_t* out,
                   std::size_t rows, std::size_t cols, const Policy& policy, const BlockRule& rule,
                   float* scale_inv, std::uint8_t* codes, std::uint64_t seed, std::uint64_t first,
                   cudaStream_t s) {
    const std::size_t n = rows * cols;
    if (n == 0) return;
    const unsigned grid = shape == Shape::tile128 ? grid_for(((rows + 127) / 128) * ((cols + 127) / 128) * kThreads)
                                                  : grid_for(n / 4 + rows);
    with_input(from, [&](auto si) {
        with_fp8(to, [&](auto di) {
            using S = decltype(si);
            using D = decltype(di);
            if constexpr (D::has_zero) {  // E8M0 elements are rejected before this point
                const bool ne = policy.rounding == emu::Rounding::nearest_even;
                switch (shape) {
                    case Shape::row128:
                        if (ne) row_block_kernel<S, D, kNearestEven, 128><<<grid, kThreads, 0, s>>>(in, out, rows, cols, policy, rule, scale_inv, codes, seed, first);
                        else row_block_kernel<S, D, kRuntime, 128><<<grid, kThreads, 0, s>>>(in, out, rows, cols, policy, rule, scale_inv, codes, seed, first);
                        break;
                    case Shape::row32:
                        if (ne) row_block_kernel<S, D, kNearestEven, 32><<<grid, kThreads, 0, s>>>(in, out, rows, cols, policy, rule, scale_inv, codes, seed, first);
                        else row_block_kernel<S, D, kRuntime, 32><<<grid, kThreads, 0, s>>>(in, out, rows, cols, policy, rule, scale_inv, codes, seed, first);
                        break;
                    case Shape::tile128:
                        if (ne) tile_kernel<S, D, kNearestEven><<<grid, kThreads, 0, s>>>(in, out, rows, cols, policy, rule, scale_inv, seed, first);
                        else tile_kernel<S, D, kRuntime><<<grid, kThreads, 0, s>>>(in, out, rows, cols, policy, rule, scale_inv, seed, first);
                        break;
                }
            }
            return 0;
        });
    });
    check_launch("block scaling kernel");
}

}  // namespace

void quantize_block_1x128(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows,
                          std::size_t cols, const Policy& policy, float* d_scale_inv,
                          const ScaleOptions& options, std::uint64_t seed, std::uint64_t first_index,
                          Stream stream) {
    require_input(from, "quantize_block_1x128");
    require_fp8(to, "quantize_block_1x128");
    launch_blocks(Shape::row128, to, from, in, out, rows, cols, policy, te_rule(to, from, options),
                  d_scale_inv, nullptr, seed, first_index, as_stream(stream));
}

void quantize_block_128x128(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows,
                            std::size_t cols, const Policy& policy, float* d_scale_inv,
                            const ScaleOptions& options, std::uint64_t seed, std::uint64_t first_index,
                            Stream stream) {
    require_input(from, "quantize_block_128x128");
    require_fp8(to, "quantize_block_128x128");
    launch_blocks(Shape::tile128, to, from, in, out, rows, cols, policy, te_rule(to, from, options),
                  d_scale_inv, nullptr, seed, first_index, as_stream(stream));
}

void quantize_mx(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t rows,
                 std::size_t cols, const Policy& policy, MxRule rule, std::uint8_t* d_scales,
                 std::uint64_t seed, std::uint64_t first_index, Stream stream) {
    require_input(from, "quantize_mx");
    require_fp8(to, "quantize_mx");
    BlockRule r{};
    r.kind = rule == MxRule::ocp_floor ? BlockRule::mx_floor : BlockRule::mx_round_up;
    const float fmax = format_max(to);
    r.fmax = fmax;
    r.fmax_rcp = 1.0f / fmax;
    r.emax_elem = with_fp8(to, [](auto f) { return decltype(f)::emax; });
    launch_blocks(Shape::row32, to, from, in, out, rows, cols, policy, r, nullptr, d_scales, seed,
                  first_index, as_stream(stream));
}

}  // namespace fp8kit::cuda
