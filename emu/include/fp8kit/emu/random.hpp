// The random bits of stochastic rounding, as a pure function of (seed, element index), so a CPU
// loop and a GPU kernel that visit elements in any order draw the same bits and produce the same
// codes.
//
// The rule (fp8kit's own, decided once for CPU and GPU):
//   element i draws word (i mod 4) of Philox4x32-10(key = seed, counter = (i/4 low, i/4 high, 0, 0)).
// Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11) yields four
// 32-bit words per call, so a loop that handles four consecutive elements spends one call on them,
// a quarter of the integer work of one call per element. The sequence is the one cuRAND's
// curand_init(seed, /*subsequence*/ 0, /*offset*/ 0) + curand() produces for Philox4_32_10
// (curand_philox4x32_x.h: the counter advances once per four outputs, words x, y, z, w in order):
// element i gets the i-th 32-bit output of that stream.
#pragma once

#include <cstdint>

#include "fp8kit/emu/format.hpp"

namespace fp8kit::emu {

// Loops of a fixed trip count that must unroll on the device (the round keys are then indexed by
// constants and stay in registers); host compilers choose for themselves.
#if defined(__CUDACC__)
#define FP8KIT_UNROLL _Pragma("unroll")
#else
#define FP8KIT_UNROLL
#endif

// The 64-bit product of two 32-bit words as (low word, *hi = high word). On the device one
// mul.wide.u32 (IMAD.WIDE.U32 in SASS), which nvcc does not always choose for the C++ form.
FP8KIT_HD std::uint32_t mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t* hi) {
#if defined(__CUDA_ARCH__)
    std::uint32_t lo, h;
    asm("{\n\t.reg .u64 t;\n\tmul.wide.u32 t, %2, %3;\n\tmov.b64 {%0, %1}, t;\n\t}"
        : "=r"(lo), "=r"(h)
        : "r"(a), "r"(b));
    *hi = h;
    return lo;
#else
    const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
    *hi = static_cast<std::uint32_t>(p >> 32);
    return static_cast<std::uint32_t>(p);
#endif
}

struct PhiloxWords {
    std::uint32_t w[4];
};

// The ten round keys of Philox4x32-10 under key `seed`: (seed low, seed high), then + (0x9E3779B9,
// 0xBB67AE85) after each round (the Weyl sequence of Salmon et al.). A kernel computes them once
// per launch on the host and passes them as a parameter, so its calls spend no instruction on them.
struct PhiloxKeys {
    std::uint32_t k0[10], k1[10];
};

FP8KIT_HD PhiloxKeys philox_round_keys(std::uint64_t seed) {
    PhiloxKeys k{};
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    FP8KIT_UNROLL
    for (int round = 0; round < 10; ++round) {
        k.k0[round] = k0;
        k.k1[round] = k1;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return k;
}

// One Philox4x32-10 call with the round keys of philox_round_keys(seed): counter = (counter low,
// counter high, 0, 0).
FP8KIT_HD PhiloxWords philox4x32_10(const PhiloxKeys& keys, std::uint64_t counter) {
    std::uint32_t c0 = static_cast<std::uint32_t>(counter), c1 = static_cast<std::uint32_t>(counter >> 32);
    std::uint32_t c2 = 0, c3 = 0;
    FP8KIT_UNROLL
    for (int round = 0; round < 10; ++round) {
        std::uint32_t hi0, hi1;
        const std::uint32_t lo0 = mulhilo32(0xD2511F53u, c0, &hi0);
        const std::uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, &hi1);
        const std::uint32_t n0 = hi1 ^ c1 ^ keys.k0[round], n2 = hi0 ^ c3 ^ keys.k1[round];
        c0 = n0;
        c1 = lo1;
        c2 = n2;
        c3 = lo0;
    }
    return {{c0, c1, c2, c3}};
}

// One Philox4x32-10 call: key = seed (64 bits), counter = (counter low, counter high, 0, 0).
FP8KIT_HD PhiloxWords philox4x32_10(std::uint64_t seed, std::uint64_t counter) {
    return philox4x32_10(philox_round_keys(seed), counter);
}

// The bits element `index` adds below its last kept bit (see convert.hpp, stochastic rounding).
// Loops over aligned groups of four should call philox4x32_10(seed, index / 4) once and use all
// four words; this function is the definition they must equal.
FP8KIT_HD std::uint32_t stochastic_bits(std::uint64_t seed, std::uint64_t index) {
    return philox4x32_10(seed, index >> 2).w[index & 3];
}

}  // namespace fp8kit::emu
