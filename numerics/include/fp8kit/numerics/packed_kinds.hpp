// The kinds of four codes at once (numerics::code_kind's zero / subnormal / special), for the
// CUDA statistics kernel's fast path: the codes of four elements come packed in one 32-bit word
// (code k in bits 8k..8k+7, as cuda/src/element.cuh's encode_four returns them) and a few SWAR
// bit operations on the word replace four lookups in a shared-memory table. Only for the 8-bit
// sign-magnitude formats with subnormals (fn, ieee and fnuz encodings: E4M3, E5M2, the fnuz pair,
// E3M4, E4M3B11FNUZ, E4M3IEEE); every constant comes from the format traits
// (emu/include/fp8kit/emu/format.hpp). tests/numerics/test_packed_kinds.cpp checks it against
// code_kind for all 256 codes in every byte position.
#pragma once

#include <cstdint>

#include "fp8kit/emu/format.hpp"

namespace fp8kit::numerics {

// Bit 7 of byte k set when code k is of that kind (normal codes: in none of the three).
struct PackedKinds {
    std::uint32_t zero, subnormal, special;
};

template <class F>
FP8KIT_HD constexpr bool packed_kinds_apply() {
    using E = emu::Encoding;
    return F::total_bits == 8 && F::has_sign && F::has_subnormals &&
           (F::encoding == E::fn || F::encoding == E::ieee || F::encoding == E::fnuz);
}

// Per byte of the magnitudes m (each 0..0x7F): bit 7 set when m >= t, for t in 1..0x80. Adding
// 0x80 - t gives at most 0xFE per byte, so no carry crosses into the next byte.
FP8KIT_HD std::uint32_t bytes_at_least(std::uint32_t m, std::uint32_t t) {
    return (m + (0x80u - t) * 0x01010101u) & 0x80808080u;
}

template <class F>
FP8KIT_HD PackedKinds packed_kinds(std::uint32_t w) {
    static_assert(packed_kinds_apply<F>(), "packed_kinds: 8-bit sign-magnitude formats with subnormals only");
    constexpr std::uint32_t kHigh = 0x80808080u;  // the sign bits
    const std::uint32_t m = w & ~kHigh;
    const std::uint32_t zero_mag = ~bytes_at_least(m, 1u) & kHigh;
    // Nonzero magnitudes below the smallest normal code are the subnormals.
    const std::uint32_t sub =
        bytes_at_least(m, 1u) & ~bytes_at_least(m, static_cast<std::uint32_t>(F::min_normal_code));
    if constexpr (F::encoding == emu::Encoding::fnuz) {
        // The pattern of -0 is the one NaN (nan_unsigned_zero); +0 is the zero.
        return {zero_mag & ~w, sub, zero_mag & w};
    } else {
        // fn: only the all-ones magnitude is NaN; ieee: every magnitude from Inf up is Inf or NaN.
        constexpr std::uint32_t first_special = static_cast<std::uint32_t>(F::has_inf ? F::inf_code : F::nan_all_ones);
        static_assert(first_special >= 1u && first_special <= 0x7Fu, "the special magnitudes sit below the sign bit");
        return {zero_mag, sub, bytes_at_least(m, first_special)};
    }
}

}  // namespace fp8kit::numerics
