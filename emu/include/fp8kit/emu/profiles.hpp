// Named profiles: the exact policy under which a library's conversion is reproduced bit for bit.
// Every entry is checked exhaustively (all 2^32 float32, all float16 and bfloat16 inputs) against
// the library itself in tests/emu; see tests/golden/README.md for how the golden data was made.
#pragma once

#include <cstdint>

#include "fp8kit/emu/formats.hpp"

namespace fp8kit::emu {

enum class Profile : std::uint8_t {
    cuda_satfinite,  // cuda_fp8.h __NV_SATFINITE == sm_89+ cvt.rn.satfinite (E4M3, E5M2, E8M0);
                     // cuda_fp4.h / cuda_fp6.h cudaRoundNearest (E2M1, E2M3, E3M2: they always saturate)
    cuda_nosat,      // cuda_fp8.h __NV_NOSAT (E4M3, E5M2, E8M0)
    ml_dtypes,       // numpy astype to ml_dtypes 0.6.0 types (every format but E8M0)
    torch,           // Tensor.to(torch.float8_*) in torch 2.11 (the four FP8 formats)
};
inline constexpr Profile kAllProfiles[] = {Profile::cuda_satfinite, Profile::cuda_nosat, Profile::ml_dtypes,
                                           Profile::torch};

struct ProfileResult {
    bool ok;  // false: the library has no such conversion
    Policy policy;
};

// E8M0 in cuda_fp8.h takes a rounding argument (toward zero or toward +Inf only); pass it as
// `e8m0_rounding`. It is ignored for the other formats, which round to nearest-even in every
// library listed (cuda_fp4.h / cuda_fp6.h also offer cudaRoundZero: that is the policy
// {toward_zero, saturate_all, positive_max}, checked in tests/emu/test_cuda_host_oracle.cpp).
// Formats without NaN or Inf (E2M1, E2M3, E3M2) saturate in every library: cuda_fp4.h gives
// +max for NaN, ml_dtypes a zero of the opposite sign (measured; tests/golden/README.md). `from` matters only where a library treats sources differently:
// cuda_fp8.h's double conversion keeps a NaN's sign and, for E5M2, its two leading payload bits, while its float, half and
// bfloat16 conversions return 0x7F for every NaN. ml_dtypes and torch narrow binary64 to
// binary32 first (double rounding), which no policy of a single rounding reproduces; their
// profiles are defined and checked on float32, float16 and bfloat16 inputs.
FP8KIT_HD ProfileResult profile_policy(Profile p, Format f, Wide from = Wide::f32,
                                       Rounding e8m0_rounding = Rounding::toward_zero) {
    const bool e8m0 = f == Format::e8m0;
    const bool mx_element = f == Format::e2m1 || f == Format::e2m3 || f == Format::e3m2;
    const bool ocp_fp8 = f == Format::e4m3 || f == Format::e5m2;
    switch (p) {
        case Profile::cuda_satfinite:
        case Profile::cuda_nosat: {
            const Overflow o = p == Profile::cuda_satfinite ? Overflow::saturate_all : Overflow::no_saturate;
            if (e8m0) {
                const bool rounding_ok =
                    e8m0_rounding == Rounding::toward_zero || e8m0_rounding == Rounding::toward_positive;
                return {rounding_ok, {e8m0_rounding, o, NanEncoding::canonical}};
            }
            if (mx_element)
                return {p == Profile::cuda_satfinite,
                        {Rounding::nearest_even, Overflow::saturate_all, NanEncoding::positive_max}};
            const bool has = ocp_fp8;
            const NanEncoding nan = from == Wide::f64 ? NanEncoding::signed_quiet_payload : NanEncoding::canonical;
            return {has, {Rounding::nearest_even, o, nan}};
        }
        case Profile::ml_dtypes:
            if (mx_element) return {true, {Rounding::nearest_even, Overflow::saturate_all, NanEncoding::negated_zero}};
            return {!e8m0, {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet}};
        case Profile::torch:
            return {ocp_fp8 || f == Format::e4m3fnuz || f == Format::e5m2fnuz,
                    {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_all_ones}};
    }
    return {false, {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::canonical}};
}

}  // namespace fp8kit::emu
