// The GPU block quantiser of blocks.hpp (NVFP4 TE / torchao, MXFP4, MXFP6 and every other block
// recipe lib's quantize_blocks takes), and the loud refusal of the sm_100 FP4 cvt on older GPUs.
// The NVFP4 and MX block shapes run block_rows.cu's kernel; the rest the general one below.
// Steps follow lib/src/stats/block_quantize.cpp one for one; the rules are numerics::rule_scale
// and emu::convert, called here, never re-typed.
#include <cuda_fp4.h>

#include <cfloat>

#include "block_common.cuh"
#include "fp8kit/emu/pack.hpp"
#include "narrow.cuh"

namespace fp8kit::cuda {

using namespace detail;

namespace {

template <class D>
__device__ __noinline__ std::uint8_t block_convert(std::uint32_t y, Policy p, std::uint32_t random) {
    return static_cast<std::uint8_t>(emu::convert<Binary32, D>(y, p, random));
}

struct Geometry {
    std::uint32_t rows, cols, tile_rows, tile_cols, grid_cols;
    std::size_t blocks;
};

struct Outputs {
    std::uint8_t* codes;
    bool packed;
    std::uint8_t* scale_codes;
    float* scale;
    float* scale_inv;
};

// The general kernel, for the block shapes quantize_row_blocks (block_rows.cu) does not take
// (1 x 128, 128 x 128, whole-tensor blocks, ...): one thread per block: 1. the block amax, 2. its
// scale, 3. its codes.
template <class S, class D>
__global__ void __launch_bounds__(kThreads)
    block_quantize_kernel(const typename S::storage_t* __restrict__ in, Geometry g, numerics::ScaleParams rule,
                          const float* __restrict__ d_global_amax, Policy policy, std::uint64_t seed, Outputs o) {
    if (numerics::rule_uses_global_amax(rule.rule)) numerics::set_global_amax(rule, *d_global_amax);
    const bool sr = policy.rounding == emu::Rounding::stochastic;
    const std::size_t stride = static_cast<std::size_t>(gridDim.x) * blockDim.x;
    for (std::size_t t = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < g.blocks; t += stride) {
        const std::size_t bi = t / g.grid_cols, bj = t % g.grid_cols;
        const std::size_t r0 = bi * g.tile_rows, c0 = bj * g.tile_cols;
        const std::size_t r1 = min(static_cast<std::size_t>(g.rows), r0 + g.tile_rows);
        const std::size_t c1 = min(static_cast<std::size_t>(g.cols), c0 + g.tile_cols);
        std::uint32_t m = 0;  // 1. |x| bits, NaN ignored (as fmaxf and lib's amax_of)
        bool has_nan = false;
        for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t c = c0; c < c1; ++c) {
                m = max(m, abs_bits_for_max<S>(in[r * g.cols + c]));
                has_nan |= is_nan_bits<S>(in[r * g.cols + c]);
            }
        // torchao's rules keep a NaN block amax (numerics::rule_block_amax, as lib's quantize_blocks)
        const float amax = numerics::rule_block_amax(rule.rule, __uint_as_float(m), has_nan);
        const numerics::BlockScale bs = numerics::rule_scale(rule, amax);  // 2.
        if (o.scale_codes) o.scale_codes[t] = bs.code;
        if (o.scale) o.scale[t] = bs.scale;
        if (o.scale_inv) o.scale_inv[t] = bs.scale_inv;
        for (std::size_t r = r0; r < r1; ++r)  // 3.
            for (std::size_t c = c0; c < c1; c += o.packed ? 2 : 1) {
                const std::size_t i = r * g.cols + c;
                const std::uint8_t q0 = block_convert<D>(host_mul_bits(widen_bits<S>(in[i]), bs.scale), policy,
                                                         sr ? emu::stochastic_bits(seed, i) : 0u);
                if (!o.packed) {
                    o.codes[i] = q0;
                    continue;
                }
                const std::uint8_t q1 = block_convert<D>(host_mul_bits(widen_bits<S>(in[i + 1]), bs.scale), policy,
                                                         sr ? emu::stochastic_bits(seed, i + 1) : 0u);
                o.codes[i / 2] = emu::pack_fp4(q0, q1, emu::NibbleOrder::low_first);
            }
    }
}

[[noreturn]] void bad(const std::string& what) {
    throw std::invalid_argument("fp8kit::cuda::quantize_blocks: " + what);
}

// spec.columnwise_rht: TE's nvfp4 roles (E2M1 from f32 / bf16) with the transform applied in the
// cast (block_rows.cu quantize_rht_col_blocks, the copy never made); the rest with the transform
// into a temporary (stream-ordered, with_rht_columnwise_copy in hadamard.cu), then the plain
// quantiser on the cols x rows copy, as lib's quantize_blocks does on the host.
void quantize_columnwise_rht(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                             std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                             float* d_scale_inv, float* d_global_amax, std::uint64_t seed, Stream stream) {
    const std::string why = rht_columnwise_shape_error(spec.block_rows, spec.block_cols, rows);
    if (!why.empty()) bad(why);
    if (quantize_rht_col_blocks(spec, from, in, rows, cols, d_codes, packed, d_scale_codes, d_scale, d_scale_inv,
                                d_global_amax, seed, as_stream(stream)))
        return;
    BlockSpec plain = spec;
    plain.columnwise_rht = false;
    with_rht_columnwise_copy(from, in, rows, cols, stream, [&](const void* copy) {
        quantize_blocks(plain, from, copy, cols, rows, d_codes, packed, d_scale_codes, d_scale, d_scale_inv,
                        d_global_amax, seed, stream);
    });
}

}  // namespace

void quantize_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols,
                     std::uint8_t* d_codes, bool packed, std::uint8_t* d_scale_codes, float* d_scale,
                     float* d_scale_inv, float* d_global_amax, std::uint64_t seed, Stream stream) {
    require_input(from, "quantize_blocks");
    if (spec.columnwise_rht)
        return quantize_columnwise_rht(spec, from, in, rows, cols, d_codes, packed, d_scale_codes, d_scale, d_scale_inv,
                                       d_global_amax, seed, stream);
    if (!has_cast_kernels(spec.format) || spec.format == Format::e8m0)
        bad("element format #" + std::to_string(static_cast<int>(spec.format)) +
            " is not an element format (e8m0 is a scale format)");
    if (spec.block_rows < 0 || spec.block_cols < 0 || (spec.block_rows == 0) != (spec.block_cols == 0))
        bad("block shape must be >= 1 x 1 (or 0 x 0 for the whole tensor), got " + std::to_string(spec.block_rows) +
            " x " + std::to_string(spec.block_cols));
    if (!d_global_amax || (!d_codes && rows * cols > 0))
        bad("d_codes and d_global_amax must be device pointers, not null");
    if (rows >= (std::size_t{1} << 32) || cols >= (std::size_t{1} << 32)) bad("rows and cols must be below 2^32");
    Geometry g{static_cast<std::uint32_t>(rows),
               static_cast<std::uint32_t>(cols),
               static_cast<std::uint32_t>(spec.block_rows == 0 ? (rows > 0 ? rows : 1) : spec.block_rows),
               static_cast<std::uint32_t>(spec.block_cols == 0 ? (cols > 0 ? cols : 1) : spec.block_cols),
               0,
               0};
    if (packed && spec.format != Format::e2m1) bad("packed: only e2m1 codes are packed two per byte");
    if (packed && (cols % 2 != 0 || g.tile_cols % 2 != 0))
        bad("packed: the row length and the block width must be even, got " + std::to_string(cols) + " and " +
            std::to_string(g.tile_cols));
    g.grid_cols = (g.cols + g.tile_cols - 1) / g.tile_cols;
    g.blocks = static_cast<std::size_t>((rows + g.tile_rows - 1) / g.tile_rows) * g.grid_cols;
    const cudaStream_t s = as_stream(stream);
    if (quantize_row_blocks(spec, from, in, rows, cols, d_codes, packed, d_scale_codes, d_scale, d_scale_inv,
                            d_global_amax, seed, s))
        return;
    amax(from, in, rows * cols, d_global_amax, stream);  // 1. (zero for an empty tensor)
    if (g.blocks == 0) return;
    const numerics::ScaleParams rule =
        numerics::make_scale_params(spec.rule, spec.format, spec.epsilon, spec.pow2, spec.value_for_inf, 0);
    const Outputs o{d_codes, packed, d_scale_codes, d_scale, d_scale_inv};
    with_input(from, [&](auto si) {
        with_cast_format(spec.format, [&](auto di) {
            using S = decltype(si);
            using D = decltype(di);
            if constexpr (D::has_zero)  // E8M0 was refused above
                block_quantize_kernel<S, D><<<grid_for(g.blocks), kThreads, 0, s>>>(
                    static_cast<const typename S::storage_t*>(in), g, rule, d_global_amax, spec.policy, seed, o);
            return 0;
        });
    });
    check_launch("block_quantize_kernel");
}

// ---- the sm_100 FP4 cvt, refused loudly where it does not exist ------------------------------

namespace {

__global__ void e2m1_cvt_kernel(const float* in, std::uint8_t* out, std::size_t n) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1000
    for (std::size_t i = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
         i += static_cast<std::size_t>(gridDim.x) * blockDim.x) {
        // cuda_fp4.h compiles this to cvt.rn.satfinite.e2m1x2.f32 on sm_100+.
        out[i] = static_cast<std::uint8_t>(__nv_cvt_float_to_fp4(in[i], __NV_E2M1, cudaRoundNearest) & 0xF);
    }
#else
    (void)in, (void)out, (void)n;  // never launched: the host refuses first
#endif
}

}  // namespace

void quantize_e2m1_cvt_satfinite(const float* in, std::uint8_t* out, std::size_t n, Stream stream) {
    int dev = 0, major = 0, minor = 0;
    FP8KIT_CUDA_CHECK(cudaGetDevice(&dev));
    FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev));
    FP8KIT_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev));
    if (major < 10)
        throw std::runtime_error(
            "fp8kit::cuda::quantize_e2m1_cvt_satfinite: cvt.rn.satfinite.e2m1x2.f32 needs sm_100 or newer; this device "
            "is sm_" +
            std::to_string(major * 10 + minor) + " (use quantize(Format::e2m1, ...), the emulation)");
    cudaFuncAttributes attr{};
    FP8KIT_CUDA_CHECK(cudaFuncGetAttributes(&attr, e2m1_cvt_kernel));
    if (attr.binaryVersion < 100)
        throw std::runtime_error(
            "fp8kit::cuda::quantize_e2m1_cvt_satfinite: this build has no sm_100 code (binary sm_" +
            std::to_string(attr.binaryVersion) + "); rebuild with CMAKE_CUDA_ARCHITECTURES including 100");
    if (n == 0) return;
    e2m1_cvt_kernel<<<grid_for(n), kThreads, 0, as_stream(stream)>>>(in, out, n);
    check_launch("e2m1_cvt_kernel");
}

}  // namespace fp8kit::cuda
