// Kernel timings on 2^28 float32 elements (CUDA events around each run, median of many runs),
// next to the device-to-device copy that sets the ceiling. Prints CSV lines
//   name,ms,bytes_moved
// which cuda/tools/bench_torch.py joins with torch's figures into the table of
// cuda/bench_on_gpu.sh. Usage: fp8kit_cuda_bench [log2_elements=28] [runs=50]
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "fp8kit/cuda/blocks.hpp"
#include "fp8kit/cuda/hadamard.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/cuda/statistics_async.hpp"

namespace cu = fp8kit::cuda;
using fp8kit::emu::Format;
using fp8kit::emu::NanEncoding;
using fp8kit::emu::Overflow;
using fp8kit::emu::Policy;
using fp8kit::emu::Rounding;
using fp8kit::emu::Wide;

#define CHECK(x)                                                          \
    do {                                                                  \
        cudaError_t e_ = (x);                                             \
        if (e_ != cudaSuccess) {                                          \
            std::fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_)); \
            std::exit(3);                                                 \
        }                                                                 \
    } while (0)

// Gaussian-looking activations with rare outliers, from a hash (no cuRAND dependency).
__global__ void fill(float* x, std::size_t n) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x) {
        std::uint32_t h = static_cast<std::uint32_t>(i) * 0x9E3779B9u ^ static_cast<std::uint32_t>(i >> 32);
        h ^= h >> 16;
        h *= 0x85EBCA6Bu;
        h ^= h >> 13;
        h *= 0xC2B2AE35u;
        h ^= h >> 16;
        const float u = (h >> 8) * (1.0f / 16777216.0f) - 0.5f;
        x[i] = u * 4.0f * ((h & 0xFFF) == 0 ? 100.0f : 1.0f);
    }
}

// x rounded to f16 (bf16 = false) or bf16, nearest-even, by cuda_fp16.h / cuda_bf16.h.
__global__ void narrow(const float* x, std::uint16_t* h, std::size_t n, bool bf16) {
    for (std::size_t i = blockIdx.x * std::size_t(blockDim.x) + threadIdx.x; i < n;
         i += std::size_t(gridDim.x) * blockDim.x)
        h[i] = bf16 ? __bfloat16_as_ushort(__float2bfloat16_rn(x[i])) : __half_as_ushort(__float2half_rn(x[i]));
}

static double median_ms(const std::function<void()>& fn, int runs) {
    cudaEvent_t a, b;
    CHECK(cudaEventCreate(&a));
    CHECK(cudaEventCreate(&b));
    for (int i = 0; i < 3; ++i) fn();  // warm-up
    CHECK(cudaDeviceSynchronize());
    std::vector<float> t;
    for (int i = 0; i < runs; ++i) {
        CHECK(cudaEventRecord(a));
        fn();
        CHECK(cudaEventRecord(b));
        CHECK(cudaEventSynchronize(b));
        float ms = 0;
        CHECK(cudaEventElapsedTime(&ms, a, b));
        t.push_back(ms);
    }
    std::sort(t.begin(), t.end());
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return t[t.size() / 2];
}

int main(int argc, char** argv) {
    const int log2n = argc > 1 ? std::atoi(argv[1]) : 28;
    const int runs = argc > 2 ? std::atoi(argv[2]) : 50;
    if (log2n < 10 || log2n > 31 || runs < 1) {
        std::fprintf(stderr, "usage: fp8kit_cuda_bench [log2_elements 10..31] [runs >= 1]\n");
        return 2;
    }
    std::string why;
    if (cu::device_count(&why) == 0) {
        std::fprintf(stderr, "no CUDA device: %s\n", why.c_str());
        return 77;
    }
    const std::size_t n = std::size_t{1} << log2n;
    const std::size_t rows = n / 4096, cols = 4096;
    float *x, *y, *scalars;
    std::uint8_t *q, *s8;
    CHECK(cudaMalloc(&x, n * 4));
    CHECK(cudaMalloc(&y, n * 4));
    CHECK(cudaMalloc(&q, n));
    CHECK(cudaMalloc(&s8, n / 32));
    CHECK(cudaMalloc(&scalars, 64));
    float* block_scales;
    CHECK(cudaMalloc(&block_scales, n / 128 * 4));
    fill<<<4096, 256>>>(x, n);
    CHECK(cudaGetLastError());
    const float one = 0.5f;
    CHECK(cudaMemcpy(scalars, &one, 4, cudaMemcpyHostToDevice));

    const Policy sat{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
    const double N = static_cast<double>(n);
    std::printf("# device %s, n = 2^%d, median of %d runs\nname,ms,bytes\n", cu::device_name().c_str(), log2n, runs);
    // FP8KIT_BENCH_ONLY=a,b: only the rows whose names contain one of these (for A/B runs); an
    // entry =name takes the row of exactly that name (one row per profiler run: ncu_rows.sh).
    const char* only = std::getenv("FP8KIT_BENCH_ONLY");
    auto wanted = [only](const std::string& name) {
        if (only == nullptr || *only == '\0') return true;
        std::string list = std::string(only) + ",";
        for (std::size_t at = 0, comma; (comma = list.find(',', at)) != std::string::npos; at = comma + 1) {
            const std::string entry = list.substr(at, comma - at);
            if (entry.empty()) continue;
            if (entry[0] == '=' ? name == entry.substr(1) : name.find(entry) != std::string::npos) return true;
        }
        return false;
    };
    auto row = [&](const char* name, double bytes, const std::function<void()>& fn) {
        if (!wanted(name)) return;
        const double ms = median_ms(fn, runs);
        std::printf("%s,%.5f,%.0f\n", name, ms, bytes);
        std::fflush(stdout);
    };
    const Policy nosat{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet};
    const Policy rz{Rounding::toward_zero, Overflow::saturate_finite, NanEncoding::signed_all_ones};
    const Policy away{Rounding::nearest_away, Overflow::saturate_all, NanEncoding::canonical};
    const Policy sr{Rounding::stochastic, Overflow::saturate_all, NanEncoding::canonical};
    std::uint16_t* h = reinterpret_cast<std::uint16_t*>(y);  // f16 / bf16 copies of x (first 2n bytes of y)
    row("copy_d2d", 8 * N, [&] { CHECK(cudaMemcpyAsync(y, x, n * 4, cudaMemcpyDeviceToDevice)); });
    // Element-wise casts: every path (cvt for profile cuda-satfinite, table, emu::convert for
    // stochastic rounding) and every input type.
    row("cast_f32_e4m3_satfinite", 5 * N, [&] { cu::quantize(Format::e4m3, Wide::f32, x, q, n, sat); });
    row("cast_f32_e4m3_cvt_satfinite", 5 * N, [&] { cu::quantize_e4m3_cvt_satfinite(x, q, n); });
    row("cast_f32_e4m3_rne_nosat", 5 * N, [&] { cu::quantize(Format::e4m3, Wide::f32, x, q, n, nosat); });
    row("cast_f32_e5m2_rne_nosat", 5 * N, [&] { cu::quantize(Format::e5m2, Wide::f32, x, q, n, nosat); });
    row("cast_f32_e4m3_toward_zero", 5 * N, [&] { cu::quantize(Format::e4m3, Wide::f32, x, q, n, rz); });
    row("cast_f32_e4m3_nearest_away", 5 * N, [&] { cu::quantize(Format::e4m3, Wide::f32, x, q, n, away, 0.5f); });
    row("cast_f32_e4m3fnuz_rne", 5 * N, [&] { cu::quantize(Format::e4m3fnuz, Wide::f32, x, q, n, nosat); });
    row("cast_f32_e4m3_stochastic", 5 * N, [&] { cu::quantize(Format::e4m3, Wide::f32, x, q, n, sr, 1.0f, 42); });
    row("cast_f32_e5m2_stochastic", 5 * N, [&] { cu::quantize(Format::e5m2, Wide::f32, x, q, n, sr, 1.0f, 42); });
    // 16-bit inputs: the same values rounded to f16 and bf16.
    narrow<<<4096, 256>>>(x, h, n, false);
    row("cast_f16_e4m3_satfinite", 3 * N, [&] { cu::quantize(Format::e4m3, Wide::f16, h, q, n, sat); });
    row("cast_f16_e4m3_rne_nosat", 3 * N, [&] { cu::quantize(Format::e4m3, Wide::f16, h, q, n, nosat); });
    row("cast_f16_e4m3_stochastic", 3 * N, [&] { cu::quantize(Format::e4m3, Wide::f16, h, q, n, sr, 1.0f, 42); });
    // The same at scale 0.5 and at 0.37 (not a power of two: products have bits below 2^-29):
    // 1.6% and 2.1% of these elements fall below E4M3's normal range (0.8% at scale 1), which
    // the float step (cuda/src/element.cuh stochastic_grid_float) takes without a branch.
    row("cast_f16_e4m3_stochastic_scaled", 3 * N,
        [&] { cu::quantize(Format::e4m3, Wide::f16, h, q, n, sr, 0.5f, 42); });
    row("cast_f16_e4m3_stochastic_scale_0.37", 3 * N,
        [&] { cu::quantize(Format::e4m3, Wide::f16, h, q, n, sr, 0.37f, 42); });
    narrow<<<4096, 256>>>(x, h, n, true);
    row("cast_bf16_e4m3_satfinite", 3 * N, [&] { cu::quantize(Format::e4m3, Wide::bf16, h, q, n, sat); });
    row("cast_bf16_e5m2_stochastic", 3 * N, [&] { cu::quantize(Format::e5m2, Wide::bf16, h, q, n, sr, 1.0f, 42); });
    row("cast_bf16_e4m3_stochastic", 3 * N, [&] { cu::quantize(Format::e4m3, Wide::bf16, h, q, n, sr, 1.0f, 42); });
    row("cast_bf16_e4m3_stochastic_scale_0.37", 3 * N,
        [&] { cu::quantize(Format::e4m3, Wide::bf16, h, q, n, sr, 0.37f, 42); });
    cu::quantize(Format::e4m3, Wide::f32, x, q, n, sat);
    row("dequantize_e4m3_f32", 5 * N, [&] { cu::dequantize(Format::e4m3, Wide::f32, q, y, n, 0.25f); });
    row("amax_f32", 4 * N, [&] { cu::amax(Wide::f32, x, n, scalars + 5); });
    row("delayed_scaling_cast_amax", 5 * N,
        [&] { cu::quantize_delayed_scaling(Format::e4m3, Wide::f32, x, q, n, sat, scalars, scalars + 1); });
    row("delayed_scaling_stochastic", 5 * N,
        [&] { cu::quantize_delayed_scaling(Format::e4m3, Wide::f32, x, q, n, sr, scalars, scalars + 1, 42); });
    row("current_scaling", 9 * N, [&] {
        cu::quantize_current_scaling(Format::e4m3, Wide::f32, x, q, n, sat, scalars + 2, scalars + 3, scalars + 4);
    });
    // The statistics kernel: statistics_async (what the monitor launches: a zeroed record, the
    // scale of TE's rule at the device amax, no allocation and no wait) and the synchronous
    // statistics() (allocation, the kernel, a copy of the record to pageable host memory and a
    // stream synchronisation: the host's round trip is inside its time). Both at scale 0.5.
    const auto te_rule =
        fp8kit::numerics::make_scale_params(fp8kit::numerics::ScaleRule::te, Format::e4m3, 0.0, false, FLT_MAX, 0);
    // amax 896: TE's rule gives 448 / 896 = 0.5, the scale of the synchronous rows.
    const float stats_amax = 896.0f;
    CHECK(cudaMemcpy(scalars + 6, &stats_amax, 4, cudaMemcpyHostToDevice));
    cu::StatsRecord* record;
    void* workspace;
    CHECK(cudaMalloc(&record, sizeof(cu::StatsRecord)));
    CHECK(cudaMalloc(&workspace, cu::statistics_workspace_bytes()));
    auto stats_async = [&](const Policy& p, std::uint64_t seed) {
        CHECK(cudaMemsetAsync(record, 0, sizeof(cu::StatsRecord)));
        cu::statistics_async(Format::e4m3, Wide::f32, x, n, p, te_rule, scalars + 6, record, workspace, 1, seed);
    };
    row("statistics_async", 4 * N, [&] { stats_async(sat, 0); });
    row("statistics_async_stochastic", 4 * N, [&] { stats_async(sr, 42); });
    row("statistics", 4 * N, [&] { cu::statistics(Format::e4m3, Wide::f32, x, n, sat, 0.5f); });
    row("statistics_stochastic", 4 * N, [&] { cu::statistics(Format::e4m3, Wide::f32, x, n, sr, 0.5f, 0.0f, 42); });
    row("mx_e4m3_round_up", 5 * N + N / 32,
        [&] { cu::quantize_mx(Format::e4m3, Wide::f32, x, q, rows, cols, sat, cu::MxRule::round_up, s8); });
    row("mx_e4m3_floor", 5 * N + N / 32,
        [&] { cu::quantize_mx(Format::e4m3, Wide::f32, x, q, rows, cols, sat, cu::MxRule::ocp_floor, s8); });
    row("mx_e4m3_round_up_stochastic", 5 * N + N / 32,
        [&] { cu::quantize_mx(Format::e4m3, Wide::f32, x, q, rows, cols, sr, cu::MxRule::round_up, s8, 42); });
    row("block_1x128", 5 * N + N / 32,
        [&] { cu::quantize_block_1x128(Format::e4m3, Wide::f32, x, q, rows, cols, sat, block_scales); });
    row("block_128x128", 5 * N + N / 4096,
        [&] { cu::quantize_block_128x128(Format::e4m3, Wide::f32, x, q, rows, cols, sat, block_scales); });
    // The block quantiser (blocks.hpp) on the NVFP4 and MX recipes, from f32 and bf16: codes
    // (E2M1 packed two per byte; E2M3 / E3M2 / E4M3 one per byte) and the scale bytes, the
    // rows that cuda/tools/bench_torch.py sets beside torchao's nvfp4_quantize and to_mx. NVFP4
    // reads its input twice (the global amax first, then the blocks), so its bytes count both
    // passes, as current_scaling's do: its % of copy is its % of that two-pass floor.
    std::uint8_t* s16;
    CHECK(cudaMalloc(&s16, n / 16));
    narrow<<<4096, 256>>>(x, h, n, true);  // bf16 copies again (dequantize_e4m3_f32 wrote y)
    // The amax pass of the NVFP4 rules from bf16 (read only).
    row("amax_bf16", 2 * N, [&] { cu::amax(Wide::bf16, h, n, scalars + 5); });
    using fp8kit::numerics::ScaleRule;
    auto blocks = [&](const char* name, Format f, ScaleRule rule, int br, int bc, const Policy& p, Wide w, bool packed,
                      bool rht = false) {
        const double in = (w == Wide::f32 ? 4.0 : 2.0) * N;
        const double out = (packed ? N / 2 : N) + N / (br * bc);
        const bool two_pass = rule == ScaleRule::nvfp4_te || rule == ScaleRule::nvfp4_torchao;
        const cu::BlockSpec spec{f, rule, br, bc, p, 0.0, false, FLT_MAX, rht};
        const void* src = w == Wide::f32 ? static_cast<const void*>(x) : static_cast<const void*>(h);
        row(name, (two_pass ? 2 * in : in) + out,
            [&] { cu::quantize_blocks(spec, w, src, rows, cols, q, packed, s16, nullptr, nullptr, scalars + 8, 42); });
    };
    // The column-wise copy of the via_copy rows: a buffer of its own, since y holds h, the bf16 input.
    void* rht_copy = nullptr;
    CHECK(cudaMalloc(&rht_copy, n * 4));
    for (Wide w : {Wide::f32, Wide::bf16}) {
        const std::string t = w == Wide::f32 ? "_f32" : "_bf16";
        auto nm = [&](const char* stem) { return std::string(stem) + t; };
        blocks(nm("nvfp4_te_1x16_packed").c_str(), Format::e2m1, ScaleRule::nvfp4_te, 1, 16, sat, w, true);
        blocks(nm("nvfp4_te_16x16_packed").c_str(), Format::e2m1, ScaleRule::nvfp4_te, 16, 16, sat, w, true);
        blocks(nm("nvfp4_te_1x16_stochastic_packed").c_str(), Format::e2m1, ScaleRule::nvfp4_te, 1, 16, sr, w, true);
        blocks(nm("nvfp4_torchao_1x16_packed").c_str(), Format::e2m1, ScaleRule::nvfp4_torchao, 1, 16, sat, w, true);
        blocks(nm("mxfp4_round_up_packed").c_str(), Format::e2m1, ScaleRule::mx_roundup, 1, 32, sat, w, true);
        blocks(nm("mxfp4_floor_packed").c_str(), Format::e2m1, ScaleRule::mx_ocp_floor, 1, 32, sat, w, true);
        blocks(nm("mxfp4_round_up_stochastic_packed").c_str(), Format::e2m1, ScaleRule::mx_roundup, 1, 32, sr, w, true);
        blocks(nm("mxfp6_e2m3_round_up").c_str(), Format::e2m3, ScaleRule::mx_roundup, 1, 32, sat, w, false);
        blocks(nm("mxfp6_e3m2_floor").c_str(), Format::e3m2, ScaleRule::mx_ocp_floor, 1, 32, sat, w, false);
        blocks(nm("mxfp8_blocks_round_up").c_str(), Format::e4m3, ScaleRule::mx_roundup, 1, 32, sat, w, false);
        blocks(nm("mxfp8_blocks_floor").c_str(), Format::e4m3, ScaleRule::mx_ocp_floor, 1, 32, sat, w, false);
        // TE's column-wise copy with its random Hadamard transform (columnwise_rht: the nvfp4
        // preset's input role, nearest-even, and its gradient role, stochastic): the transform in
        // the cast (block_rows.cu rht_col_blocks_kernel; two passes over the input, the copy's amax
        // then its blocks, and the copy's codes and scale bytes), and at the same byte count the
        // path it replaced, te_rht16_columnwise into a copy and the plain quantiser on the copy.
        blocks(nm("nvfp4_te_1x16_rht_col_packed").c_str(), Format::e2m1, ScaleRule::nvfp4_te, 1, 16, sat, w, true,
               true);
        blocks(nm("nvfp4_te_1x16_rht_col_stochastic_packed").c_str(), Format::e2m1, ScaleRule::nvfp4_te, 1, 16, sr, w,
               true, true);
        const void* src = w == Wide::f32 ? static_cast<const void*>(x) : static_cast<const void*>(h);
        const cu::BlockSpec plain{Format::e2m1, ScaleRule::nvfp4_te, 1, 16, sat};
        row(nm("nvfp4_te_1x16_rht_col_via_copy_packed").c_str(), 2 * (w == Wide::f32 ? 4.0 : 2.0) * N + N / 2 + N / 16,
            [&] {
                cu::te_rht16_columnwise(w, src, rows, cols, rht_copy, true);
                cu::quantize_blocks(plain, w, rht_copy, cols, rows, q, true, s16, nullptr, nullptr, scalars + 8, 42);
            });
    }
    CHECK(cudaDeviceSynchronize());
    return 0;
}
