// The random bits of stochastic rounding, as a pure function of (seed, element index), so a CPU
// loop and a GPU kernel that visit elements in any order draw the same bits and produce the same
// codes. Philox4x32-10 (Salmon et al., SC'11), the generator behind cuRAND's and torch's Philox:
// key = seed (64 bits), counter = (index low, index high, 0, 0); the first output word is used.
#pragma once

#include <cstdint>

#include "fp8kit/emu/format.hpp"

namespace fp8kit::emu {

FP8KIT_HD std::uint32_t mulhilo32(std::uint32_t a, std::uint32_t b, std::uint32_t* hi) {
    const std::uint64_t p = static_cast<std::uint64_t>(a) * b;
    *hi = static_cast<std::uint32_t>(p >> 32);
    return static_cast<std::uint32_t>(p);
}

FP8KIT_HD std::uint32_t stochastic_bits(std::uint64_t seed, std::uint64_t index) {
    std::uint32_t c0 = static_cast<std::uint32_t>(index), c1 = static_cast<std::uint32_t>(index >> 32);
    std::uint32_t c2 = 0, c3 = 0;
    std::uint32_t k0 = static_cast<std::uint32_t>(seed), k1 = static_cast<std::uint32_t>(seed >> 32);
    for (int round = 0; round < 10; ++round) {
        std::uint32_t hi0, hi1;
        const std::uint32_t lo0 = mulhilo32(0xD2511F53u, c0, &hi0);
        const std::uint32_t lo1 = mulhilo32(0xCD9E8D57u, c2, &hi1);
        const std::uint32_t n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
        c0 = n0; c1 = lo1; c2 = n2; c3 = lo0;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return c0;
}

}  // namespace fp8kit::emu
