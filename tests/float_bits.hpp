// Float32 bit patterns and back, for every test suite (memcpy, independent of the code under
// test), and the two non-finite constants the tests use.
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>

namespace fp8kit_test {

inline std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
inline float from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline const float kInf = std::numeric_limits<float>::infinity();
inline const float kNaN = std::numeric_limits<float>::quiet_NaN();

}  // namespace fp8kit_test
