// Consumer of the installed header-only fp8kit::emu: a few E4M3/E5M2 codes fixed by the OCP OFP8
// spec (v1.0, table 1: E4M3 max 448 = 0x7E, 1.0 = 0x38; E5M2 1.0 = 0x3C, max 57344 = 0x7B).
#include <cstdint>
#include <cstdio>
#include <cstring>

#include "fp8kit/emu/emu.hpp"

using namespace fp8kit::emu;

static std::uint64_t bits_of(float v) {
    std::uint32_t u;
    std::memcpy(&u, &v, 4);
    return u;
}

int main() {
    const Policy rne_sat{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
    struct Case {
        Format f;
        float x;
        unsigned code;
    } cases[] = {{Format::e4m3, 1.0f, 0x38}, {Format::e4m3, 448.0f, 0x7E},   {Format::e4m3, 1e6f, 0x7E},
                 {Format::e5m2, 1.0f, 0x3C}, {Format::e5m2, 57344.0f, 0x7B}, {Format::e4m3, -2.0f, 0xC0}};
    int bad = 0;
    for (const auto& c : cases) {
        const unsigned got = encode(c.f, Wide::f32, bits_of(c.x), rne_sat);
        if (got != c.code) {
            std::printf("encode(%g) = 0x%02X, expected 0x%02X\n", c.x, got, c.code);
            ++bad;
        }
    }
    std::printf("uses_emu: %s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
