// What TransformerEngine's FusedAdam kernel really computes on a GPU, for lib's TeFusedAdam model
// (lib/src/simulate/te_fused_adam.cpp). The update below is adam_update's AdamW branch
// (ADAM_MODE_1) of transformer_engine/common/multi_tensor/adam.cu, in its source order, with its
// float (MATH_T) arithmetic. TE compiles adam.cu with `-O3 --use_fast_math`
// (transformer_engine/common/CMakeLists.txt, nvte_sources_with_fast_math): approximate division and
// square root, denormals flushed to zero, multiplies and adds contracted into FMAs. te_adam_probe.sh
// builds this file twice, with TE's flags and with nvcc's defaults (contraction only), so the two
// effects are measured apart.
//
// Usage: te_adam_probe OUT.bin [N, default 8192]. Writes, for each hyperparameter set and each of 5 steps, the
// gradient and the (p, m, v) after the step, from deterministic inputs (a 64-bit LCG), all float32:
//   u32 magic 'TEAP', u32 sets, u32 steps, u32 n; then per set: 5 f32 (lr, beta1, beta2, eps, decay),
//   n x (p0, m0, v0), then per step: n x g, n x (p, m, v).
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "probe_host.hpp"

__global__ void adamw_step(const float* g, float* p, float* m, float* v, int n, float beta1, float beta2,
                           float beta1_correction, float beta2_correction, float epsilon, float lr, float decay) {
    const int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    float r_g = g[i], r_p = p[i], r_m = m[i], r_v = v[i];
    r_m = beta1 * r_m + (1 - beta1) * r_g;
    r_v = beta2 * r_v + (1 - beta2) * r_g * r_g;
    float next_m_unbiased = r_m / beta1_correction;
    float next_v_unbiased = r_v / beta2_correction;
    float denom = sqrtf(next_v_unbiased) + epsilon;
    float update = (next_m_unbiased / denom) + (decay * r_p);
    r_p = r_p - (lr * update);
    p[i] = r_p;
    m[i] = r_m;
    v[i] = r_v;
}

namespace {
using probe::check;
using probe::uniform;
using probe::wide;
}  // namespace

int main(int argc, char** argv) {
    probe::name = "te_adam_probe";
    if (argc != 2 && argc != 3) {
        std::fprintf(stderr, "usage: te_adam_probe OUT.bin [N]\n");
        return 2;
    }
    const std::uint32_t n = argc == 3 ? static_cast<std::uint32_t>(std::atoi(argv[2])) : 8192u, steps = 5;
    struct Set {
        float lr, beta1, beta2, eps, decay;
        bool tiny;  // gradients and states near and below 2^-126, where flushing to zero decides
    };
    const Set sets[] = {{1e-3f, 0.9f, 0.999f, 1e-8f, 0.01f, false},
                        {4e-2f, 0.9f, 0.95f, 1e-6f, 0.1f, false},
                        {3e-4f, 0.8f, 0.99f, 1e-5f, 0.0f, false},
                        {1e-3f, 0.9f, 0.999f, 1e-30f, 0.01f, true}};
    const std::uint32_t nsets = sizeof(sets) / sizeof(sets[0]);
    std::FILE* out = std::fopen(argv[1], "wb");
    if (!out) {
        std::perror(argv[1]);
        return 1;
    }
    const std::uint32_t head[4] = {0x50414554u, nsets, steps, n};
    std::fwrite(head, 4, 4, out);
    float *dg, *dp, *dm, *dv;
    check(cudaMalloc(&dg, n * 4), "cudaMalloc");
    check(cudaMalloc(&dp, n * 4), "cudaMalloc");
    check(cudaMalloc(&dm, n * 4), "cudaMalloc");
    check(cudaMalloc(&dv, n * 4), "cudaMalloc");
    std::vector<float> g(n), p(n), m(n), v(n);
    for (const Set& s : sets) {
        std::fwrite(&s, 4, 5, out);  // the five floats, not the flag
        for (std::uint32_t i = 0; i < n; ++i) {
            p[i] = wide(-12, 1);
            m[i] = i % 4 == 0 ? 0.0f : s.tiny ? wide(-140, -110) : wide(-30, -2);
            v[i] = i % 4 == 0 ? 0.0f : std::fabs(s.tiny ? wide(-149, -100) : wide(-60, -4));
        }
        std::fwrite(p.data(), 4, n, out);
        std::fwrite(m.data(), 4, n, out);
        std::fwrite(v.data(), 4, n, out);
        check(cudaMemcpy(dp, p.data(), n * 4, cudaMemcpyHostToDevice), "copy p");
        check(cudaMemcpy(dm, m.data(), n * 4, cudaMemcpyHostToDevice), "copy m");
        check(cudaMemcpy(dv, v.data(), n * 4, cudaMemcpyHostToDevice), "copy v");
        for (std::uint32_t step = 1; step <= steps; ++step) {
            for (std::uint32_t i = 0; i < n; ++i) g[i] = i % 97 == 0 ? 0.0f : s.tiny ? wide(-80, -50) : wide(-40, 2);
            check(cudaMemcpy(dg, g.data(), n * 4, cudaMemcpyHostToDevice), "copy g");
            // multi_tensor_adam_cuda: bias_correction = 1 - std::pow(beta1, step), in double, to float.
            const float bc1 = static_cast<float>(1 - std::pow(static_cast<double>(s.beta1), static_cast<double>(step)));
            const float bc2 = static_cast<float>(1 - std::pow(static_cast<double>(s.beta2), static_cast<double>(step)));
            adamw_step<<<(n + 255) / 256, 256>>>(dg, dp, dm, dv, static_cast<int>(n), s.beta1, s.beta2, bc1, bc2, s.eps,
                                                 s.lr, s.decay);
            check(cudaGetLastError(), "launch");
            check(cudaMemcpy(p.data(), dp, n * 4, cudaMemcpyDeviceToHost), "copy back p");
            check(cudaMemcpy(m.data(), dm, n * 4, cudaMemcpyDeviceToHost), "copy back m");
            check(cudaMemcpy(v.data(), dv, n * 4, cudaMemcpyDeviceToHost), "copy back v");
            std::fwrite(g.data(), 4, n, out);
            std::fwrite(p.data(), 4, n, out);
            std::fwrite(m.data(), 4, n, out);
            std::fwrite(v.data(), 4, n, out);
        }
    }
    return std::fclose(out) == 0 ? 0 : 1;
}
