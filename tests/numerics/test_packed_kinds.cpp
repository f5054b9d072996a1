// numerics::packed_kinds (the CUDA statistics kernel's SWAR kinds of four packed codes) against
// numerics::code_kind (the code decoded by emu) for all 256 codes of every format it applies to,
// each code in each of the four byte positions, its neighbours every other code.
#include <catch2/catch.hpp>

#include <cstdint>

#include "fp8kit/emu/formats.hpp"
#include "fp8kit/numerics/element_stats.hpp"
#include "fp8kit/numerics/packed_kinds.hpp"

using namespace fp8kit;
using emu::Format;
using numerics::CodeKind;

namespace {

// The kind packed_kinds gives byte k, or a failure string when more than one bit is set.
int kind_of_byte(const numerics::PackedKinds& p, int k) {
    const std::uint32_t bit = 0x80u << (8 * k);
    const bool z = p.zero & bit, s = p.subnormal & bit, sp = p.special & bit;
    if (z + s + sp > 1) return -1;
    return z    ? static_cast<int>(CodeKind::zero)
           : s  ? static_cast<int>(CodeKind::subnormal)
           : sp ? static_cast<int>(CodeKind::special)
                : static_cast<int>(CodeKind::normal);
}

template <class F>
void check_format(Format f) {
    STATIC_REQUIRE(numerics::packed_kinds_apply<F>());
    int mismatches = 0;
    for (std::uint32_t c = 0; c < 256; ++c)
        for (int k = 0; k < 4; ++k) {
            // The other three bytes: other codes (c + 85 j, all 256 values over c), so a carry
            // or borrow between bytes would show.
            std::uint32_t w = 0;
            for (int j = 0; j < 4; ++j) w |= ((j == k ? c : (c + 85u * (j + 1)) & 0xFFu) << (8 * j));
            const numerics::PackedKinds p = numerics::packed_kinds<F>(w);
            for (int j = 0; j < 4; ++j) {
                const auto code = static_cast<std::uint8_t>(w >> (8 * j));
                if (kind_of_byte(p, j) != static_cast<int>(numerics::code_kind(f, code))) ++mismatches;
            }
        }
    CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("packed_kinds equals code_kind for all 256 codes in every byte", "[numerics][packed_kinds]") {
    check_format<emu::E4M3>(Format::e4m3);
    check_format<emu::E5M2>(Format::e5m2);
    check_format<emu::E4M3FNUZ>(Format::e4m3fnuz);
    check_format<emu::E5M2FNUZ>(Format::e5m2fnuz);
    check_format<emu::E3M4>(Format::e3m4);
    check_format<emu::E4M3B11FNUZ>(Format::e4m3b11fnuz);
    check_format<emu::E4M3IEEE>(Format::e4m3ieee);
    // The formats it does not take: no sign (E8M0), no NaN/Inf (the MX elements), wider codes.
    STATIC_REQUIRE(!numerics::packed_kinds_apply<emu::E8M0>());
    STATIC_REQUIRE(!numerics::packed_kinds_apply<emu::E2M3>());
    STATIC_REQUIRE(!numerics::packed_kinds_apply<emu::Binary16>());
}
