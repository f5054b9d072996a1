// The binary64 sums of the GEMM error measure on the GPU (docs/gemm.md, "On the GPU"): per element
// of D, the scaled products' sum and the sum of their magnitudes, by numerics::gemm's
// binary64_add_product / binary64_add_run, the rule lib's binary64_sums runs on the CPU.
//
// Layout: as the CUDA model's (gemm_model.cu): a block computes 64 x 64 outputs with 16 x 16
// threads, thread (tx, ty) owning rows ty + 16 i and columns tx + 16 j. Each stage decodes 32 k of
// the block's 64 rows of A and of B into shared memory as binary64 values (k-major). A run (the k
// range one scale pair multiplies: 128 for block scales) is a multiple of the stage, so runs end
// at stage boundaries.
#include <vector>

#include "common.cuh"
#include "fp8kit/cuda/gemm.hpp"
#include "fp8kit/numerics/gemm_model.hpp"

namespace fp8kit::cuda {
namespace {

namespace ng = numerics::gemm;

constexpr int kTile = 64, kThreads = 16, kPer = 4, kStage = 32;

struct SumSide {
    const std::uint8_t* codes;
    const float* scales;
    const double* values;  // 256, device
    ng::ScaleKind kind;
    std::size_t rows;
};

struct SumArgs {
    SumSide a, b;
    std::size_t k, run;
    double* sum;
    double* magnitude;
};

__device__ __forceinline__ void load_values(double* sm, const SumSide& s, std::size_t row0, std::size_t k,
                                            std::size_t k0) {
    for (int idx = threadIdx.y * kThreads + threadIdx.x; idx < kTile * kStage; idx += kThreads * kThreads) {
        const int r = idx / kStage, q = idx - r * kStage;
        const std::size_t row = row0 + r, kk = k0 + q;
        sm[q * kTile + r] = row < s.rows && kk < k ? s.values[s.codes[row * k + kk]] : 0.0;
    }
}

__global__ void __launch_bounds__(kThreads* kThreads) sums_kernel(SumArgs args) {
    __shared__ double sa[kStage * kTile], sb[kStage * kTile];
    const std::size_t row0 = blockIdx.y * static_cast<std::size_t>(kTile),
                      col0 = blockIdx.x * static_cast<std::size_t>(kTile);
    const std::size_t K = args.k, kblocks = (K + 127) / 128;
    double sum[kPer][kPer] = {}, mag[kPer][kPer] = {}, rs[kPer][kPer] = {}, rm[kPer][kPer] = {};
    for (std::size_t k0 = 0; k0 < K; k0 += kStage) {
        __syncthreads();  // the previous stage is consumed
        load_values(sa, args.a, row0, K, k0);
        load_values(sb, args.b, col0, K, k0);
        __syncthreads();
        for (int q = 0; q < kStage; ++q) {
#pragma unroll
            for (int i = 0; i < kPer; ++i) {
                const double va = sa[q * kTile + threadIdx.y + kThreads * i];
#pragma unroll
                for (int j = 0; j < kPer; ++j)
                    ng::binary64_add_product(rs[i][j], rm[i][j], va, sb[q * kTile + threadIdx.x + kThreads * j]);
            }
        }
        const std::size_t next = k0 + kStage;
        if (next % args.run != 0 && next < K) continue;
        // The run [next - run, next) ends: its scale pair multiplies its two sums.
        const std::size_t kb = (next - 1) / 128;
#pragma unroll
        for (int i = 0; i < kPer; ++i) {
            const std::size_t row = row0 + threadIdx.y + kThreads * i;
            const float s_a =
                args.a.scales[ng::scale_index(args.a.kind, false, row < args.a.rows ? row : 0, kb, kblocks)];
#pragma unroll
            for (int j = 0; j < kPer; ++j) {
                const std::size_t col = col0 + threadIdx.x + kThreads * j;
                const float s_b =
                    args.b.scales[ng::scale_index(args.b.kind, true, col < args.b.rows ? col : 0, kb, kblocks)];
                ng::binary64_add_run(sum[i][j], mag[i][j], rs[i][j], rm[i][j], s_a, s_b);
                rs[i][j] = rm[i][j] = 0;
            }
        }
    }
#pragma unroll
    for (int i = 0; i < kPer; ++i)
#pragma unroll
        for (int j = 0; j < kPer; ++j) {
            const std::size_t row = row0 + threadIdx.y + kThreads * i, col = col0 + threadIdx.x + kThreads * j;
            if (row >= args.a.rows || col >= args.b.rows) continue;
            args.sum[row * args.b.rows + col] = sum[i][j];
            args.magnitude[row * args.b.rows + col] = mag[i][j];
        }
}

// A format's 256 codes as binary64 values (emu's decode; codes above its width read as zero).
std::vector<double> code_values(Format f, const char* which) {
    if (f == Format::e8m0)
        throw std::invalid_argument(std::string("fp8kit::cuda::gemm_binary64_sums: ") + which +
                                    ": format e8m0 is a scale format, not a GEMM operand");
    std::vector<double> v(256, 0.0);
    emu::with_format(f, [&](auto fmt) {
        using F = decltype(fmt);
        for (int c = 0; c < (1 << F::total_bits); ++c) {
            const auto bits = static_cast<std::uint32_t>(emu::decode(f, Wide::f32, static_cast<std::uint8_t>(c)));
            float x;
            std::memcpy(&x, &bits, 4);
            v[c] = x;
        }
    });
    return v;
}

}  // namespace

void gemm_binary64_sums(const GemmOperand& a, const GemmOperand& b, std::size_t k, double* sum, double* magnitude,
                        Stream stream) {
    if ((a.scale_kind == ng::ScaleKind::block) != (b.scale_kind == ng::ScaleKind::block))
        throw std::invalid_argument(
            "fp8kit::cuda::gemm_binary64_sums: block scales: A and B must both have block scales (1x128 and "
            "128x128)");
    if (a.rows == 0 || b.rows == 0) return;
    const std::vector<double> va = code_values(a.format, "A"), vb = code_values(b.format, "B");
    double* tables = nullptr;
    FP8KIT_CUDA_CHECK(cudaMalloc(&tables, 2 * 256 * sizeof(double)));
    struct Free {
        double* p;
        ~Free() { cudaFree(p); }
    } free_tables{tables};
    FP8KIT_CUDA_CHECK(cudaMemcpy(tables, va.data(), 256 * sizeof(double), cudaMemcpyHostToDevice));
    FP8KIT_CUDA_CHECK(cudaMemcpy(tables + 256, vb.data(), 256 * sizeof(double), cudaMemcpyHostToDevice));
    SumArgs args{{a.codes, a.scales, tables, a.scale_kind, a.rows},
                 {b.codes, b.scales, tables + 256, b.scale_kind, b.rows},
                 k,
                 ng::binary64_run(a.scale_kind, k),
                 sum,
                 magnitude};
    const dim3 grid(static_cast<unsigned>((b.rows + kTile - 1) / kTile),
                    static_cast<unsigned>((a.rows + kTile - 1) / kTile));
    if (k == 0) {  // no products: every sum is 0
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(sum, 0, a.rows * b.rows * sizeof(double), detail::as_stream(stream)));
        FP8KIT_CUDA_CHECK(cudaMemsetAsync(magnitude, 0, a.rows * b.rows * sizeof(double), detail::as_stream(stream)));
    } else {
        sums_kernel<<<grid, dim3(kThreads, kThreads), 0, detail::as_stream(stream)>>>(args);
        detail::check_launch("gemm_binary64_sums");
    }
    FP8KIT_CUDA_CHECK(cudaStreamSynchronize(detail::as_stream(stream)));
}

}  // namespace fp8kit::cuda
