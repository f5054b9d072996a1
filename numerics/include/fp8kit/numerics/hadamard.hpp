// The random Hadamard transform of TransformerEngine's NVFP4 recipe, one 16-element group, written
// once for lib (convert/hadamard.hpp, which states the steps and the source) and the CUDA kernel.
// Source: TransformerEngine transformer_engine/pytorch/custom_recipes/quantization_nvfp4.py
// (get_wgrad_sign_vector, NVFP4QuantizerRef._build_hadamard_matrix, _apply_rht).
#pragma once

#include <cstdint>
#include <cstring>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit::numerics {

// TE get_wgrad_sign_vector(): [1, 1, 1, -1, 1, -1, -1, -1, -1, -1, -1, 1, -1, 1, -1, -1]; bit i
// of the mask is set where s[i] = -1.
inline constexpr std::uint32_t kTeRhtNegativeSigns = 0xD7E8u;
FP8KIT_HD int te_rht_sign(int i) { return ((kTeRhtNegativeSigns >> i) & 1u) ? -1 : 1; }

// Entry (i, j) of the 16 x 16 Sylvester Hadamard matrix: (-1)^popcount(i & j).
FP8KIT_HD int hadamard16(int i, int j) {
    unsigned v = static_cast<unsigned>(i & j) & 0xFu;
    v ^= v >> 2;
    v ^= v >> 1;
    return (v & 1u) ? -1 : 1;
}

// out[j] = sum_i v[i] * s[i] * H16[i][j] / 4 (s = te_rht_sign, or +1 without random signs): each
// product is exact, the sum is taken in binary64 in the order i = 0..15 (exact for groups whose
// magnitudes span less than about 2^25), and a NaN sum is the canonical quiet NaN
// 0x7FF8000000000000, so that host and device give the same bits.
FP8KIT_HD void te_rht16_group(const double (&v)[16], bool random_signs, double (&out)[16]) {
    for (int j = 0; j < 16; ++j) {
        double s = 0.0;
        for (int i = 0; i < 16; ++i) s += v[i] * (0.25 * (random_signs ? te_rht_sign(i) : 1) * hadamard16(i, j));
        if (s != s) {
            const std::uint64_t q = 0x7FF8000000000000ull;
            std::memcpy(&s, &q, 8);
        }
        out[j] = s;
    }
}

}  // namespace fp8kit::numerics
