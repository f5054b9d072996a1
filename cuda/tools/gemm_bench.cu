// Times the CUDA GEMM model (fp8kit::cuda::gemm_model) on an M x N x K E4M3 GEMM with tensorwise
// scales, median of several runs timed with CUDA events around the whole call (code tables
// uploaded, kernel, synchronisation), and checks a corner of D bit for bit against lib's CPU
// model. cuBLAS's own time for the same GEMM comes from cuda/tools/bench_gemm_torch.py
// (torch._scaled_mm) in the same command (docs/performance.md).
// Usage: fp8kit_cuda_gemm_bench [M N K] [reps] [model ...]   (default 8192 8192 8192 5 sm90 sm90-fast)
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/cuda/gemm.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/gemm.hpp"

namespace cu = fp8kit::cuda;
namespace gm = fp8kit::gemm;

static void ok(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
        std::exit(1);
    }
}

int main(int argc, char** argv) {
    std::size_t M = 8192, N = 8192, K = 8192;
    int reps = 5;
    std::vector<std::string> models;
    int arg = 1;
    if (argc >= 4) {
        M = std::strtoull(argv[1], nullptr, 10);
        N = std::strtoull(argv[2], nullptr, 10);
        K = std::strtoull(argv[3], nullptr, 10);
        arg = 4;
    }
    if (argc > arg) reps = std::atoi(argv[arg++]);
    for (; arg < argc; ++arg) models.push_back(argv[arg]);
    if (models.empty()) models = {"sm90", "sm90-fast"};
    if (M == 0 || N == 0 || reps < 1) {
        std::fprintf(stderr, "usage: fp8kit_cuda_gemm_bench [M N K] [reps] [model ...]\n");
        return 2;
    }
    std::printf("device: %s\n", cu::device_name().c_str());

    // E4M3 codes with |value| in [2^-3, 2^3] (an activation-like spread), random signs.
    std::vector<std::uint8_t> pool;
    for (int c = 0; c < 256; ++c) {
        const auto bits = static_cast<std::uint32_t>(
            fp8kit::emu::decode(fp8kit::Format::e4m3, fp8kit::Wide::f32, static_cast<std::uint8_t>(c)));
        float v;
        std::memcpy(&v, &bits, 4);
        if (std::isfinite(v) && std::fabs(v) >= 0.125f && std::fabs(v) <= 8.0f)
            pool.push_back(static_cast<std::uint8_t>(c));
    }
    std::mt19937 g(8192);
    std::vector<std::uint8_t> a(M * K), b(N * K);
    for (auto& x : a) x = pool[g() % pool.size()];
    for (auto& x : b) x = pool[g() % pool.size()];
    const float sa = 0.75f, sb = 1.25f;

    std::uint8_t *da, *db;
    float* dsc;
    std::uint32_t* dd;
    ok(cudaMalloc(&da, a.size()), "cudaMalloc");
    ok(cudaMalloc(&db, b.size()), "cudaMalloc");
    ok(cudaMalloc(&dsc, 8), "cudaMalloc");
    ok(cudaMalloc(&dd, M * N * 4), "cudaMalloc");
    ok(cudaMemcpy(da, a.data(), a.size(), cudaMemcpyHostToDevice), "copy");
    ok(cudaMemcpy(db, b.data(), b.size(), cudaMemcpyHostToDevice), "copy");
    const float sc[2] = {sa, sb};
    ok(cudaMemcpy(dsc, sc, 8, cudaMemcpyHostToDevice), "copy");
    const cu::GemmOperand ga{da, M, fp8kit::Format::e4m3, gm::ScaleKind::tensor, dsc};
    const cu::GemmOperand gb{db, N, fp8kit::Format::e4m3, gm::ScaleKind::tensor, dsc + 1};

    int status = 0;
    for (const std::string& name : models) {
        const gm::AccumModel model = gm::parse_model(name);
        const auto params = gm::params_of(model);
        cu::gemm_model(ga, gb, K, params, gm::OutType::f32, dd);  // warm-up
        cudaEvent_t t0, t1;
        ok(cudaEventCreate(&t0), "event");
        ok(cudaEventCreate(&t1), "event");
        std::vector<float> ms;
        for (int r = 0; r < reps; ++r) {
            ok(cudaEventRecord(t0), "record");
            cu::gemm_model(ga, gb, K, params, gm::OutType::f32, dd);
            ok(cudaEventRecord(t1), "record");
            ok(cudaEventSynchronize(t1), "sync");
            float t = 0;
            ok(cudaEventElapsedTime(&t, t0, t1), "elapsed");
            ms.push_back(t);
        }
        std::sort(ms.begin(), ms.end());
        const double med = ms[ms.size() / 2];
        std::printf(
            "fp8kit gemm_model %s %zux%zux%zu e4m3 tensorwise f32: median %.1f ms of %d (min %.1f, max %.1f), "
            "%.1f G products/s\n",
            name.c_str(), M, N, K, med, reps, ms.front(), ms.back(),
            static_cast<double>(M) * N * K / (med * 1e-3) / 1e9);

        // Spot check: rows 0..1 x columns 0..127 of D against lib's CPU model.
        const std::size_t rm = std::min<std::size_t>(M, 2), rn = std::min<std::size_t>(N, 128);
        gm::GemmRequest rq;
        rq.a = {a.data(), rm, fp8kit::Format::e4m3, gm::ScaleKind::tensor, &sa, 1};
        rq.b = {b.data(), rn, fp8kit::Format::e4m3, gm::ScaleKind::tensor, &sb, 1};
        rq.k = K;
        const std::vector<std::uint32_t> cpu = gm::gemm(rq, model);
        std::vector<std::uint32_t> row(rn);
        std::size_t bad = 0;
        for (std::size_t i = 0; i < rm; ++i) {
            ok(cudaMemcpy(row.data(), dd + i * N, rn * 4, cudaMemcpyDeviceToHost), "copy");
            for (std::size_t j = 0; j < rn; ++j) bad += row[j] != cpu[i * rn + j];
        }
        std::printf("  spot check against lib's CPU model: %zu of %zu elements differ\n", bad, rm * rn);
        if (bad) status = 1;
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dsc);
    cudaFree(dd);
    return status;
}
