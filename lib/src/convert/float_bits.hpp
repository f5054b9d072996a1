// The bit pattern of a float32 and back, for code that reads exponents from bits (lib/src only).
#pragma once

#include <cstdint>
#include <cstring>

namespace fp8kit::detail {

inline std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}

inline float float_of(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

}  // namespace fp8kit::detail
