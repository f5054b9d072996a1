// Block dequantisation with a factor per block, and fake quantisation (quantise, then dequantise)
// of a block recipe in one call (blocks.hpp): the path of fp8kit.torch's fake_quantize and
// Fp8Linear on CUDA tensors, where the codes never leave the device.
#include <cuda_bf16.h>

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "fp8kit/cuda/fake_quantize.hpp"
#include "fp8kit/numerics/block_factor.hpp"
#include "block_common.cuh"
#include "elementwise.cuh"
#include "narrow.cuh"

namespace fp8kit::cuda {

using namespace detail;

namespace {

struct BlockGrid {
    std::uint32_t rows, cols, block_rows, block_cols, grid_cols;
};

// out[r][c] = to(fl32(value(code) * factor[block of (r, c)])): dequantize's rule (device.cu
// dequant_entry) with the block's factor. A NaN code gives its own decode in `to`; a NaN product
// (an Inf code times 0, a NaN factor) gives 0x7FC00000 first. Each element by product_out, where
// the rule is written once (block_common.cuh; it says why its cvt is emu's conversion).
template <class F, class W>
__global__ void __launch_bounds__(kThreads)
    dequantize_blocks_kernel(const std::uint8_t* __restrict__ in, void* __restrict__ out, BlockGrid g,
                             const float* __restrict__ factor) {
    using Out = typename W::storage_t;
    __shared__ std::uint32_t value[256];
    __shared__ Out nan_out[256];
    fill_code_tables<F, W>(value, nan_out);
    const Out nan_product = nan_product_out<W>();
    Out* o = static_cast<Out*>(out);
    const std::uint64_t n = std::uint64_t{g.rows} * g.cols;
    const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
    // Four elements per step, in one row and one block when cols and block_cols are multiples of 4
    // (one 4-byte load and one store of four outputs where aligned); else one element per step.
    const bool quads = g.cols % 4 == 0 && g.block_cols % 4 == 0;
    const bool vec = quads && aligned16(in) && aligned16(out);
    const bool small = n < (std::uint64_t{1} << 32);  // 32-bit division (most tensors)
    const std::uint64_t steps = quads ? n / 4 : n;
    const int per = quads ? 4 : 1;
    for (std::uint64_t s = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; s < steps; s += stride) {
        const std::uint64_t i0 = s * per;
        const std::uint32_t r =
            small ? static_cast<std::uint32_t>(i0) / g.cols : static_cast<std::uint32_t>(i0 / g.cols);
        const auto c = static_cast<std::uint32_t>(i0 - std::uint64_t{r} * g.cols);
        const float f = factor[std::uint64_t{r / g.block_rows} * g.grid_cols + c / g.block_cols];
        std::uint32_t codes = 0;
        if (vec) {
            codes = __ldg(reinterpret_cast<const std::uint32_t*>(in) + s);
        } else {
            for (int k = 0; k < per; ++k) codes |= std::uint32_t{in[i0 + k]} << (8 * k);
        }
        union {
            std::conditional_t<sizeof(Out) == 4, uint4, uint2> v;
            Out e[4];
        } y;
        for (int k = 0; k < per; ++k) {
            const auto code = static_cast<std::uint8_t>(codes >> (8 * k));
            y.e[k] = product_out<W>(value[code], f, nan_out[code], nan_product);
        }
        if (vec) {
            reinterpret_cast<decltype(y.v)*>(o)[s] = y.v;
        } else {
            for (int k = 0; k < per; ++k) o[i0 + k] = y.e[k];
        }
    }
}

// dequantize_blocks_kernel's rule over segments of 16 codes that lie in one row and one block
// (cols and block_cols multiples of 16, codes and output 16-byte aligned: the host checks): one
// 16-byte load of codes, one factor and one row division per segment, 16-byte stores.
template <class F, class W>
__global__ void __launch_bounds__(kThreads)
    dequantize_blocks16_kernel(const std::uint8_t* __restrict__ in, void* __restrict__ out, BlockGrid g,
                               const float* __restrict__ factor) {
    using Out = typename W::storage_t;
    __shared__ std::uint32_t value[256];
    __shared__ Out nan_out[256];
    fill_code_tables<F, W>(value, nan_out);
    const Out nan_product = nan_product_out<W>();
    const std::uint64_t segments = std::uint64_t{g.rows} * g.cols / 16;
    const bool small = segments * 16 < (std::uint64_t{1} << 32);  // 32-bit division (most tensors)
    const std::uint64_t stride = std::uint64_t{gridDim.x} * blockDim.x;
    for (std::uint64_t s = std::uint64_t{blockIdx.x} * blockDim.x + threadIdx.x; s < segments; s += stride) {
        const std::uint64_t i0 = s * 16;
        const std::uint32_t r =
            small ? static_cast<std::uint32_t>(i0) / g.cols : static_cast<std::uint32_t>(i0 / g.cols);
        const auto c = static_cast<std::uint32_t>(i0 - std::uint64_t{r} * g.cols);
        const float f = factor[std::uint64_t{r / g.block_rows} * g.grid_cols + c / g.block_cols];
        union {
            uint4 v;
            std::uint8_t b[16];
        } codes;
        codes.v = __ldg(reinterpret_cast<const uint4*>(in) + s);
        union {
            uint4 v[sizeof(Out)];  // 16 outputs of sizeof(Out) bytes: sizeof(Out) 16-byte stores
            Out e[16];
        } y;
#pragma unroll
        for (int k = 0; k < 16; ++k) {
            const std::uint8_t code = codes.b[k];
            y.e[k] = product_out<W>(value[code], f, nan_out[code], nan_product);
        }
        uint4* dst = reinterpret_cast<uint4*>(static_cast<Out*>(out) + i0);
#pragma unroll
        for (int k = 0; k < static_cast<int>(sizeof(Out)); ++k) dst[k] = y.v[k];
    }
}

// factor[b] = numerics::rule_block_factor (the block part of the block's dequantisation factor;
// scale_inv on entry), and *tensor_factor = numerics::rule_tensor_factor of the global amax.
__global__ void block_factors_kernel(numerics::ScaleRule rule, const std::uint8_t* __restrict__ scale_codes,
                                     float* factor, std::uint32_t blocks, const float* __restrict__ global_amax,
                                     float* tensor_factor) {
    const std::uint32_t b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b == 0) *tensor_factor = numerics::rule_tensor_factor(rule, *global_amax);
    if (b < blocks)
        factor[b] = numerics::rule_block_factor(rule, numerics::BlockScale{0.0f, factor[b], scale_codes[b]});
}

// times_tensor_factors_bf16 (fake_quantize.hpp): four elements a step (a 16-byte load and an 8-byte
// store where both are aligned), the factor's product formed once per thread.
__global__ void __launch_bounds__(kThreads)
    times_factors_bf16_kernel(const float* __restrict__ c, std::size_t n, const float* __restrict__ fa,
                              const float* __restrict__ fb, __nv_bfloat16* __restrict__ out) {
    const float f = __fmul_rn(*fa, *fb);
    const bool vec = aligned16(c) && (reinterpret_cast<std::uintptr_t>(out) & 7u) == 0;
    const std::size_t quads = vec ? n / 4 : 0;
    const std::size_t stride = std::size_t{gridDim.x} * blockDim.x;
    const std::size_t first = std::size_t{blockIdx.x} * blockDim.x + threadIdx.x;
    for (std::size_t q = first; q < quads; q += stride) {
        const float4 v = __ldg(reinterpret_cast<const float4*>(c) + q);
        union {
            uint2 u;
            __nv_bfloat16 h[4];
        } y;
        y.h[0] = __float2bfloat16_rn(__fmul_rn(v.x, f));
        y.h[1] = __float2bfloat16_rn(__fmul_rn(v.y, f));
        y.h[2] = __float2bfloat16_rn(__fmul_rn(v.z, f));
        y.h[3] = __float2bfloat16_rn(__fmul_rn(v.w, f));
        reinterpret_cast<uint2*>(out)[q] = y.u;
    }
    for (std::size_t i = quads * 4 + first; i < n; i += stride) out[i] = __float2bfloat16_rn(__fmul_rn(c[i], f));
}

BlockGrid grid_of(std::size_t rows, std::size_t cols, int block_rows, int block_cols) {
    if (rows >= (std::size_t{1} << 32) || cols >= (std::size_t{1} << 32))
        throw std::invalid_argument("dequantize_blocks: rows and cols must each be below 2^32");
    const auto br = static_cast<std::uint32_t>(block_rows > 0 ? block_rows : (rows > 0 ? rows : 1));
    const auto bc = static_cast<std::uint32_t>(block_cols > 0 ? block_cols : (cols > 0 ? cols : 1));
    return {static_cast<std::uint32_t>(rows), static_cast<std::uint32_t>(cols), br, bc,
            static_cast<std::uint32_t>((cols + bc - 1) / bc)};
}

}  // namespace

void dequantize_blocks(Format from, Wide to, const std::uint8_t* d_codes, std::size_t rows, std::size_t cols,
                       int block_rows, int block_cols, const float* d_factor, void* d_out, Stream stream) {
    require_input(to, "dequantize_blocks");
    const BlockGrid g = grid_of(rows, cols, block_rows, block_cols);
    const std::size_t n = rows * cols;
    if (n == 0) return;
    // Segments of 16 in one row and one block, 16-byte aligned: dequantize_blocks16_kernel.
    const bool segments = g.cols % 16 == 0 && g.block_cols % 16 == 0 &&
                          (reinterpret_cast<std::uintptr_t>(d_codes) & 15u) == 0 &&
                          (reinterpret_cast<std::uintptr_t>(d_out) & 15u) == 0;
    with_cast_format(from, [&](auto f) {
        with_input(to, [&](auto w) {
            using F = std::decay_t<decltype(f)>;
            using W = std::decay_t<decltype(w)>;
            if (segments)
                dequantize_blocks16_kernel<F, W>
                    <<<grid_per_item(n / 16), kThreads, 0, as_stream(stream)>>>(d_codes, d_out, g, d_factor);
            else
                dequantize_blocks_kernel<F, W>
                    <<<grid_per_item((n + 3) / 4), kThreads, 0, as_stream(stream)>>>(d_codes, d_out, g, d_factor);
        });
        return 0;
    });
    check_launch("dequantize_blocks_kernel");
}

void fake_quantize_blocks(const BlockSpec& spec, Wide from, const void* in, std::size_t rows, std::size_t cols, Wide to,
                          void* d_out, float* d_tensor_factor, std::uint64_t seed, Stream stream) {
    const cudaStream_t s = as_stream(stream);
    // The codes' shape: TE's column-wise copy (columnwise_rht) is cols x rows.
    const std::size_t qr = spec.columnwise_rht ? cols : rows, qc = spec.columnwise_rht ? rows : cols;
    const BlockGrid g = grid_of(qr, qc, spec.block_rows, spec.block_cols);
    auto* global_amax = static_cast<float*>(scratch_alloc(sizeof(float), s));
    // The block-scaled GEMM's operands (bf16, NVFP4 and MX blocks): one kernel, the same bits.
    if (to == Wide::bf16 &&
        fake_quantize_row_blocks(spec, from, in, rows, cols, d_out, d_tensor_factor, global_amax, seed, s)) {
        scratch_free(global_amax, s);
        return;
    }
    const std::size_t blocks = std::size_t{(g.rows + g.block_rows - 1) / g.block_rows} * g.grid_cols;
    auto* codes = static_cast<std::uint8_t*>(scratch_alloc(qr * qc, s));
    auto* scale_codes = static_cast<std::uint8_t*>(scratch_alloc(blocks, s));
    auto* factor = static_cast<float*>(scratch_alloc(blocks * sizeof(float), s));
    quantize_blocks(spec, from, in, rows, cols, codes, false, scale_codes, nullptr, factor, global_amax, seed, stream);
    if (d_tensor_factor) {  // also for an empty tensor (blocks 0): the tensor factor is written
        block_factors_kernel<<<grid_per_item(blocks > 0 ? blocks : 1), kThreads, 0, s>>>(
            spec.rule, scale_codes, factor, static_cast<std::uint32_t>(blocks), global_amax, d_tensor_factor);
        check_launch("block_factors_kernel");
    }
    dequantize_blocks(spec.format, to, codes, qr, qc, static_cast<int>(g.block_rows), static_cast<int>(g.block_cols),
                      factor, d_out, stream);
    for (void* p : {static_cast<void*>(codes), static_cast<void*>(scale_codes), static_cast<void*>(factor),
                    static_cast<void*>(global_amax)})
        scratch_free(p, s);
}

void times_tensor_factors_bf16(const float* d_c, std::size_t n, const float* d_factor_a, const float* d_factor_b,
                               void* d_out, Stream stream) {
    if (n == 0) return;
    if (!d_c || !d_factor_a || !d_factor_b || !d_out)
        throw std::invalid_argument("times_tensor_factors_bf16: c, the factors and out must be device pointers");
    times_factors_bf16_kernel<<<grid_per_item((n + 3) / 4), kThreads, 0, as_stream(stream)>>>(
        d_c, n, d_factor_a, d_factor_b, static_cast<__nv_bfloat16*>(d_out));
    check_launch("times_factors_bf16_kernel");
}

void fake_quantize_blocks_transposed(const BlockSpec& spec, Wide from, const void* in, std::size_t rows,
                                     std::size_t cols, Wide to, void* d_out, float* d_tensor_factor, std::uint64_t seed,
                                     Stream stream) {
    constexpr const char* kFn = "fake_quantize_blocks_transposed";
    require_input(from, kFn);
    const auto refuse = [&](const std::string& what) { throw std::invalid_argument(std::string(kFn) + ": " + what); };
    if (from == Wide::f16) refuse("from: f32 and bf16 inputs only");
    if (to != Wide::bf16) refuse("to: only bf16 output");
    if (spec.columnwise_rht)
        refuse("spec.columnwise_rht: not taken (quantise TE's column-wise copy with quantize_blocks)");
    if (spec.block_rows != 1 || !(spec.block_cols == 16 || spec.block_cols == 32))
        refuse("spec: blocks must be 1 x 16 or 1 x 32, got " + std::to_string(spec.block_rows) + " x " +
               std::to_string(spec.block_cols));
    if (!(spec.format == Format::e2m1 || (spec.format == Format::e4m3 && spec.block_cols == 32)))
        refuse("spec.format: only e2m1 (1 x 16, 1 x 32) and e4m3 (1 x 32) elements");
    if (rows >= (std::size_t{1} << 31) || cols >= (std::size_t{1} << 31)) refuse("rows and cols must be below 2^31");
    if ((!in || !d_out) && rows * cols > 0) refuse("in and d_out must be device pointers, not null");
    const cudaStream_t s = as_stream(stream);
    // The global amax of X, which is X^T's (NVFP4's rules read it; written by cuda::amax in there).
    auto* global_amax = static_cast<float*>(scratch_alloc(sizeof(float), s));
    const bool ran = fake_quantize_col_blocks(spec, from, in, rows, cols, d_out, d_tensor_factor != nullptr,
                                              d_tensor_factor, global_amax, seed, s);
    scratch_free(global_amax, s);
    if (!ran)
        refuse(
            "spec.policy: no kernel for this policy of this format (e2m1: stochastic in 1 x 16 blocks only; e4m3: "
            "nearest-even, saturate_all, canonical NaN only), or the tensor has 2^31 blocks or more");
}

}  // namespace fp8kit::cuda
