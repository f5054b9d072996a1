// A fixed-point number wide enough for any sum the exact model forms: 14 64-bit limbs in two's
// complement, least significant bit 2^-448 (docs/gemm.md, "exact": scale products of two float32
// reach down to 2^-298 and, times a K-sum of FP8 products, up to about 2^320).
#pragma once

#include <array>
#include <cstdint>

namespace fp8kit::gemm::detail {

class WideFixed {
public:
    static constexpr int kLimbs = 14;
    static constexpr int kLsb = -448;

    // Adds sign * (mag[0] + mag[1] 2^64 + mag[2] 2^128) * 2^exp; exp >= kLsb.
    void add(const std::array<std::uint64_t, 3>& mag, bool negative, int exp);
    // Adds p * m * 2^exp (p: signed 128-bit integer sum, m: unsigned, at most 2^48).
    void add_product(__int128 p, std::uint64_t m, bool negative, int exp);
    bool is_zero() const;
    // The value as a binary64 holding its leading 41 bits and a sticky bit: rounding that double
    // once to a format of at most 39 significant bits equals rounding the exact value once.
    double to_double_sticky() const;

private:
    std::array<std::uint64_t, kLimbs> limb_{};
};

}  // namespace fp8kit::gemm::detail
