// Packed FP4 storage: two 4-bit codes in one byte. fp8kit itself keeps one code per byte (low
// bits); packing is only the layout some libraries store, so it is kept apart from conversion.
// Which element goes in which nibble is the library's choice:
//   cuda_fp4.hpp __nv_cvt_float2_to_fp4x2: .x in bits 0-3, .y in bits 4-7 (low_first);
//   its sm_100 path, cvt.rn.satfinite.e2m1x2.f32 d, y, x, likewise (the last operand is low).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

#include "fp8kit/emu/format.hpp"

namespace fp8kit::emu {

enum class NibbleOrder : std::uint8_t {
    low_first,   // element 2i in bits 0-3, element 2i+1 in bits 4-7
    high_first,  // element 2i in bits 4-7, element 2i+1 in bits 0-3
};

// One byte from two 4-bit codes (higher bits of the codes are ignored).
FP8KIT_HD std::uint8_t pack_fp4(std::uint8_t first, std::uint8_t second, NibbleOrder order) {
    const auto a = static_cast<std::uint8_t>(first & 0xF), b = static_cast<std::uint8_t>(second & 0xF);
    return order == NibbleOrder::low_first ? static_cast<std::uint8_t>(a | (b << 4))
                                           : static_cast<std::uint8_t>(b | (a << 4));
}

// The two codes of a packed byte, in element order.
FP8KIT_HD std::pair<std::uint8_t, std::uint8_t> unpack_fp4(std::uint8_t byte, NibbleOrder order) {
    const auto lo = static_cast<std::uint8_t>(byte & 0xF), hi = static_cast<std::uint8_t>(byte >> 4);
    return order == NibbleOrder::low_first ? std::pair{lo, hi} : std::pair{hi, lo};
}

// Pack n one-per-byte codes into (n + 1) / 2 bytes; an odd last code gets a zero partner.
inline void pack_fp4_array(const std::uint8_t* codes, std::uint8_t* packed, std::size_t n, NibbleOrder order) {
    for (std::size_t i = 0; i + 1 < n; i += 2) packed[i / 2] = pack_fp4(codes[i], codes[i + 1], order);
    if (n % 2) packed[n / 2] = pack_fp4(codes[n - 1], 0, order);
}

// Unpack n codes from (n + 1) / 2 bytes, one code per output byte.
inline void unpack_fp4_array(const std::uint8_t* packed, std::uint8_t* codes, std::size_t n, NibbleOrder order) {
    for (std::size_t i = 0; i < n; ++i) {
        const auto [first, second] = unpack_fp4(packed[i / 2], order);
        codes[i] = i % 2 ? second : first;
    }
}

}  // namespace fp8kit::emu
