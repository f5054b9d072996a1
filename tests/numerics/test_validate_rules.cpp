// numerics::special_threshold (numerics/validate_rules.hpp, the rule lib's validate() and the GPU
// scan share) against the bits of each target format's largest finite value worked by hand from
// the specs (OCP OFP8 v1.0 table 1, OCP MX v1.0 tables 4 and 5, IEEE 754 binary16/32/64 and
// bfloat16): nothing here asks emu for an expected value.
#include <catch2/catch.hpp>

#include <cstdint>

#include "fp8kit/numerics/validate_rules.hpp"

using fp8kit::numerics::special_threshold;
namespace emu = fp8kit::emu;

TEST_CASE("special_threshold is the target's largest finite in the rounded type", "[numerics][validate]") {
    // E4M3 max 448 = 1.11b * 2^8: binary32 exponent 8 + 127 = 0x87, fraction 0.75.
    CHECK(special_threshold<emu::Binary32, emu::E4M3>() == 0x43E00000u);
    // binary64: exponent 8 + 1023 = 0x407, fraction 0.75.
    CHECK(special_threshold<emu::Binary64, emu::E4M3>() == 0x407C000000000000ull);
    // E5M2 max 57344 = 1.11b * 2^15: binary16 exponent 30, fraction 0x300; bfloat16 exponent 0x8E.
    CHECK(special_threshold<emu::Binary16, emu::E5M2>() == 0x7B00u);
    CHECK(special_threshold<emu::BFloat16, emu::E5M2>() == 0x4760u);
    // E4M3FNUZ max 240 = 1.111b * 2^7: bfloat16 exponent 0x86, fraction 0x70.
    CHECK(special_threshold<emu::BFloat16, emu::E4M3FNUZ>() == 0x4370u);
    // E2M1 max 6 = 1.1b * 2^2.
    CHECK(special_threshold<emu::Binary32, emu::E2M1>() == 0x40C00000u);
    // E8M0 max 2^127: exact in binary32 and bfloat16; past binary16's range, so rounded toward zero
    // it saturates to binary16's largest finite 65504 (0x7BFF).
    CHECK(special_threshold<emu::Binary32, emu::E8M0>() == 0x7F000000u);
    CHECK(special_threshold<emu::BFloat16, emu::E8M0>() == 0x7F00u);
    CHECK(special_threshold<emu::Binary16, emu::E8M0>() == 0x7BFFu);
}
