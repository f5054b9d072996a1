// Conversion policies. Every conversion names all three; there are no defaults, because two
// libraries that agree on rounding still disagree on overflow and NaN codes
// (shared/research/conversions.md), and a silent default is how kernels end up "almost" matching.
#pragma once

#include <cstdint>

namespace fp8kit::emu {

enum class Rounding : std::uint8_t {
    nearest_even,     // IEEE roundTiesToEven; what OCP OFP8 requires
    nearest_away,     // ties away from zero (microxcaling, QPyTorch)
    toward_zero,      // truncation
    toward_positive,  // toward +Inf
    toward_negative,  // toward -Inf
    stochastic,       // caller-supplied random bits, see convert.hpp step 4
};

enum class Overflow : std::uint8_t {
    saturate_all,     // finite overflow and +-Inf inputs become +-max finite (cuda_fp8.h __NV_SATFINITE)
    saturate_finite,  // finite overflow becomes +-max; +-Inf stays Inf (NaN where there is no Inf)
    no_saturate,      // overflow becomes Inf where the format has one, NaN otherwise
};

// Which code a NaN *input* becomes. Overflow-to-NaN in formats without Inf always keeps the sign
// (all-ones pattern with the input's sign), which is what every measured library does.
enum class NanEncoding : std::uint8_t {
    canonical,             // positive all-ones pattern whatever the input sign (cuda_fp8.h: 0x7F)
    signed_all_ones,       // all-ones pattern with the input's sign (torch: 0x7F / 0xFF)
    signed_quiet,          // smallest quiet NaN with the input's sign (ml_dtypes: E5M2 0x7E / 0xFE)
    signed_quiet_payload,  // the sign and the payload's leading bits, quiet bit forced on
                           // (cuda_fp8.h from double: E5M2 0x7E | top mantissa bits)
    // For formats with no NaN at all (OCP MX FP4/FP6), which must give a number instead:
    positive_max,  // +max finite whatever the sign (cuda_fp4.h, cuda_fp6.h)
    negated_zero,  // zero with the opposite of the input's sign: +NaN -> -0, -NaN -> +0
                   // (ml_dtypes 0.6.0, measured on every NaN pattern, tests/golden)
};
// Formats with a single NaN pattern (FNUZ: 0x80, E8M0: 0xFF) ignore NanEncoding. Formats with a
// NaN read positive_max and negated_zero as canonical; formats without one read every value
// other than negated_zero as positive_max.

struct Policy {
    Rounding rounding;
    Overflow overflow;
    NanEncoding nan;
};

// The exact policy of a decode (FP8 -> wider format). Exact for every FP8 format into binary32,
// binary64 and bfloat16; only E8M0 -> binary16 can round, and then it rounds like IEEE casts do.
inline constexpr Policy kDecodePolicy{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet};

// Policies the producers' quantisers apply, named once:
// A clamp to the format's range before the cast (ModelOpt, compressed-tensors, vLLM, TE's
// scaled casts): nearest-even, every overflow to the largest finite value, NaN canonical.
inline constexpr Policy kRneSaturate{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
// The same for formats without NaN (OCP MX FP4/FP6 elements): NaN becomes +max (cuda_fp4.h).
inline constexpr Policy kRneSaturateNoNan{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::positive_max};
// A plain IEEE-style cast with no clamp: overflow to Inf or NaN as the format has them.
inline constexpr Policy kRneNoSaturate{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::canonical};

}  // namespace fp8kit::emu
