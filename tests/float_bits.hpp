// Float32 bit helpers for the numerics tests (memcpy, independent of the code under test).
#pragma once

#include <cstdint>
#include <cstring>

namespace numerics_test {

inline std::uint32_t bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
inline float from_bits(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

}  // namespace numerics_test
