// The bit pattern of a float32 (or any value) and back, for code that reads exponents from bits
// (lib/src only): the one helper of its kind in lib.
#pragma once

#include <cstdint>
#include <cstring>

#include "fp8kit/emu/formats.hpp"

namespace fp8kit::detail {

// C++20's std::bit_cast for this C++17 code: the object representation of `from` read as a To.
template <class To, class From>
To bit_cast(const From& from) {
    static_assert(sizeof(To) == sizeof(From), "bit_cast between types of different sizes");
    To to;
    std::memcpy(&to, &from, sizeof to);
    return to;
}

inline std::uint32_t bits_of(float f) { return bit_cast<std::uint32_t>(f); }
inline float float_of(std::uint32_t u) { return bit_cast<float>(u); }

// The float32 value of a code of format f (emu::decode's bits).
inline float decode_f32(emu::Format f, std::uint8_t code) {
    return float_of(static_cast<std::uint32_t>(emu::decode(f, emu::Wide::f32, code)));
}

// A binary64 value cast to format f under `policy` and decoded back to binary64 (emu::encode and
// emu::decode on the value's bits): the quantise-dequantise step of the calibrators' error sums.
inline double round_trip_f64(emu::Format f, double v, emu::Policy policy) {
    std::uint64_t vb;
    std::memcpy(&vb, &v, sizeof vb);
    const std::uint64_t db = emu::decode(f, emu::Wide::f64, emu::encode(f, emu::Wide::f64, vb, policy));
    double q;
    std::memcpy(&q, &db, sizeof q);
    return q;
}

// torch's float32 -> bfloat16 cast (round to nearest even, overflow to Inf), widened back to
// float32: emu::convert's rule, written once for the producers' and calibrators' bfloat16 steps.
// NaN comes back as it is (callers check scales for NaN themselves).
inline float round_to_bf16(float f) {
    if (f != f) return f;
    constexpr emu::Policy rne{emu::Rounding::nearest_even, emu::Overflow::no_saturate, emu::NanEncoding::canonical};
    const auto h = emu::convert<emu::Binary32, emu::BFloat16>(bits_of(f), rne);
    return float_of(static_cast<std::uint32_t>(h) << 16);
}

}  // namespace fp8kit::detail
