// Named edge cases from shared/research/conversions.md: each one a place where libraries or
// careless implementations disagree.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "fp8kit/emu/emu.hpp"

using namespace fp8kit::emu;

namespace {
std::uint64_t bits64(double d) {
    std::uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
}
std::uint32_t bits32(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}
std::uint8_t from_double(Format f, double d, Policy p) { return encode(f, Wide::f64, bits64(d), p); }
std::uint8_t from_float(Format f, float x, Policy p) { return encode(f, Wide::f32, bits32(x), p); }
Policy prof(Profile p, Format f, Rounding r = Rounding::toward_zero) {
    return profile_policy(p, f, Wide::f32, r).policy;
}
const Policy kSat{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
const Policy kNoSat{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_all_ones};
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();
}  // namespace

TEST_CASE("E4M3: 464 is a tie that rounds to 448; the next float overflows", "[emu][edge]") {
    CHECK(from_float(Format::e4m3, 464.0f, kNoSat) == 0x7E);
    CHECK(from_float(Format::e4m3, std::nextafter(464.0f, 1e9f), kNoSat) == 0x7F);
    CHECK(from_float(Format::e4m3, std::nextafter(464.0f, 1e9f), kSat) == 0x7E);
    CHECK(from_float(Format::e4m3, -std::nextafter(464.0f, 1e9f), kNoSat) == 0xFF);
}

TEST_CASE("E5M2: 61439 stays finite, 61440 overflows", "[emu][edge]") {
    CHECK(from_float(Format::e5m2, 61439.0f, kNoSat) == 0x7B);
    CHECK(from_float(Format::e5m2, 61440.0f, kNoSat) == 0x7C);
    CHECK(from_float(Format::e5m2, 61440.0f, kSat) == 0x7B);
    CHECK(from_float(Format::e5m2, -61440.0f, kNoSat) == 0xFC);
}

TEST_CASE("E4M3 underflow: 2^-10 ties to zero, just above goes to 0x01", "[emu][edge]") {
    CHECK(from_float(Format::e4m3, 0x1p-10f, kNoSat) == 0x00);
    CHECK(from_float(Format::e4m3, std::nextafter(0x1p-10f, 1.0f), kNoSat) == 0x01);
    CHECK(from_float(Format::e4m3, 3 * 0x1p-10f, kNoSat) == 0x02);
    CHECK(from_float(Format::e4m3, -0x1p-11f, kNoSat) == 0x80);
    CHECK(from_float(Format::e4m3fnuz, -0x1p-12f, kNoSat) == 0x00);  // FNUZ has no -0
    CHECK(from_float(Format::e4m3fnuz, -0.0f, kNoSat) == 0x00);
}

TEST_CASE("binary64 sources round once, directly from the double's bits", "[emu][edge]") {
    // ml_dtypes and torch go through float32 here and get 0xFE / 0x38 (double rounding).
    CHECK(from_double(Format::e4m3, -431.99999999999994, kNoSat) == 0xFD);
    CHECK(from_double(Format::e4m3, 1.0625 + 0x1p-30, kNoSat) == 0x39);
    // Rounding through float16 first would give 1.0 here.
    CHECK(from_float(Format::e4m3, 1.0625f + 0x1p-12f, kNoSat) == 0x39);
}

TEST_CASE("NaN codes per profile", "[emu][edge]") {
    for (Format f : {Format::e4m3, Format::e5m2}) {
        CHECK(from_float(f, kNaN, prof(Profile::cuda_satfinite, f)) == 0x7F);
        CHECK(from_float(f, -kNaN, prof(Profile::cuda_nosat, f)) == 0x7F);
        CHECK(from_float(f, -kNaN, prof(Profile::torch, f)) == 0xFF);
    }
    CHECK(from_float(Format::e4m3, -kNaN, prof(Profile::ml_dtypes, Format::e4m3)) == 0xFF);
    CHECK(from_float(Format::e5m2, kNaN, prof(Profile::ml_dtypes, Format::e5m2)) == 0x7E);
    CHECK(from_float(Format::e5m2, -kNaN, prof(Profile::ml_dtypes, Format::e5m2)) == 0xFE);
    CHECK(from_float(Format::e4m3fnuz, -kNaN, prof(Profile::torch, Format::e4m3fnuz)) == 0x80);
}

TEST_CASE("Inf per overflow policy", "[emu][edge]") {
    CHECK(from_float(Format::e4m3, kInf, prof(Profile::cuda_satfinite, Format::e4m3)) == 0x7E);
    CHECK(from_float(Format::e4m3, -kInf, prof(Profile::cuda_nosat, Format::e4m3)) == 0xFF);
    CHECK(from_float(Format::e5m2, -kInf, prof(Profile::cuda_satfinite, Format::e5m2)) == 0xFB);
    CHECK(from_float(Format::e5m2, kInf, prof(Profile::ml_dtypes, Format::e5m2)) == 0x7C);
    const Policy sat_finite{Rounding::nearest_even, Overflow::saturate_finite, NanEncoding::canonical};
    CHECK(from_float(Format::e5m2, kInf, sat_finite) == 0x7C);   // Inf stays Inf
    CHECK(from_float(Format::e5m2, 1e6f, sat_finite) == 0x7B);   // finite overflow saturates
    CHECK(from_float(Format::e4m3, -kInf, sat_finite) == 0xFF);  // no Inf in E4M3: NaN
}

TEST_CASE("E4M3FNUZ: 248 is a tie that rounds up into overflow", "[emu][edge]") {
    CHECK(from_float(Format::e4m3fnuz, 248.0f, kNoSat) == 0x80);
    CHECK(from_float(Format::e4m3fnuz, 248.0f, kSat) == 0x7F);
    CHECK(from_float(Format::e4m3fnuz, 247.0f, kNoSat) == 0x7F);
}

TEST_CASE("E8M0 as cuda_fp8.h: 3.0, zero, tiny, Inf, NaN, sign ignored", "[emu][edge]") {
    const Policy rz = prof(Profile::cuda_nosat, Format::e8m0, Rounding::toward_zero);
    const Policy rp = prof(Profile::cuda_nosat, Format::e8m0, Rounding::toward_positive);
    const Policy rp_sat = prof(Profile::cuda_satfinite, Format::e8m0, Rounding::toward_positive);
    CHECK(from_float(Format::e8m0, 3.0f, rz) == 0x80);
    CHECK(from_float(Format::e8m0, 3.0f, rp) == 0x81);
    CHECK(from_float(Format::e8m0, -3.0f, rp) == 0x81);
    CHECK(from_float(Format::e8m0, 0.0f, rp) == 0x00);
    CHECK(from_float(Format::e8m0, 0x1p-130f, rz) == 0x00);
    CHECK(from_float(Format::e8m0, 1.5f * 0x1p-127f, rp) == 0x01);
    CHECK(from_float(Format::e8m0, kInf, rp) == 0xFF);
    CHECK(from_float(Format::e8m0, kInf, rp_sat) == 0xFE);
    CHECK(from_float(Format::e8m0, 3e38f, rp) == 0xFF);  // rounds up to 2^128: overflow
    CHECK(from_float(Format::e8m0, 3e38f, rz) == 0xFE);
    CHECK(from_float(Format::e8m0, kNaN, rp_sat) == 0xFF);
    CHECK_FALSE(profile_policy(Profile::cuda_nosat, Format::e8m0, Wide::f32, Rounding::nearest_even).ok);
    CHECK_FALSE(profile_policy(Profile::torch, Format::e8m0).ok);
}

TEST_CASE("Known defects elsewhere stay fixed here", "[emu][edge]") {
    // The Intel FP8 toolkit returns 1.5*2^-9 unchanged; E4M3 has no such subnormal (ties to 2^-8).
    CHECK(from_float(Format::e4m3, 1.5f * 0x1p-9f, kNoSat) == 0x02);
    // QPyTorch's float_quantize allows 480 in E4M3; here it is NaN (no-saturate) or 448.
    CHECK(from_float(Format::e4m3, 480.0f, kNoSat) == 0x7F);
    CHECK(from_float(Format::e4m3, 480.0f, kSat) == 0x7E);
    // Ties away (microxcaling "nearest"): 464 -> 480 -> overflow.
    const Policy away{Rounding::nearest_away, Overflow::no_saturate, NanEncoding::canonical};
    CHECK(from_float(Format::e4m3, 464.0f, away) == 0x7F);
}
