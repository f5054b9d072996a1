// Host helpers of the optimizer probes (te_adam_probe.cu, msamp_adam_probe.cu): one fixed
// pseudo-random sequence (a 64-bit LCG, so every build draws the same inputs), values over many
// binades, and CUDA error checks that end the program naming the probe.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

namespace probe {

inline std::uint64_t state = 0x9E3779B97F4A7C15ull;
inline const char* name = "probe";  // set by main: the program's name in error messages

inline double uniform() {  // [0, 1)
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<double>(state >> 11) * 0x1.0p-53;
}

// Sign times 2^[lo, hi) with a uniform mantissa: values over many binades, as gradients are.
inline float wide(double lo, double hi) {
    const double x = std::ldexp(1.0 + uniform(), static_cast<int>(std::floor(lo + (hi - lo) * uniform())));
    return static_cast<float>(uniform() < 0.5 ? -x : x);
}

inline void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) {
        std::fprintf(stderr, "%s: %s: %s\n", name, what, cudaGetErrorString(e));
        std::exit(1);
    }
}

}  // namespace probe
