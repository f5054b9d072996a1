// The one conversion routine: any FloatFormat to any FloatFormat, integer arithmetic only, a
// single rounding straight from the source bits. Host code, CUDA kernels and the CLI all call
// this; there is no second copy. Encode (wide -> FP8) and decode (FP8 -> wide) are the same
// function with the formats swapped.
#pragma once

#include <cstdint>

#include "fp8kit/emu/format.hpp"
#include "fp8kit/emu/policy.hpp"

namespace fp8kit::emu {

namespace detail {

FP8KIT_HD int highest_bit(std::uint64_t v) {  // v != 0
#if defined(__CUDA_ARCH__)
    return 63 - __clzll(static_cast<long long>(v));
#else
    return 63 - __builtin_clzll(v);
#endif
}

// A value in a form every format can be read into and written from:
// (-1)^negative * significand * 2^exponent, or one of the special classes.
struct Unpacked {
    enum Kind : std::uint8_t { zero, finite, infinity, nan } kind;
    bool negative;
    std::uint64_t significand;  // finite: non-zero, below 2^53; NaN: the mantissa field (payload)
    int exponent;               // NaN: the width of that mantissa field
};

template <class F>
FP8KIT_HD Unpacked unpack(std::uint64_t code) {
    code &= F::code_mask;
    const bool negative = F::has_sign && (code & F::sign_mask) != 0;
    const std::uint64_t magnitude = code & ~F::sign_mask;
    const auto biased = static_cast<std::uint32_t>(magnitude >> F::man_bits);
    const std::uint64_t man = magnitude & F::man_mask;

    if constexpr (F::encoding == Encoding::fnuz) {
        if (code == F::nan_unsigned_zero) return {Unpacked::nan, false, 0, 0};
    } else if constexpr (F::encoding == Encoding::fn) {
        if (magnitude == F::nan_all_ones) return {Unpacked::nan, negative, man, F::man_bits};
    } else {  // ieee and exponent-only: the all-ones exponent is special
        if (biased == F::exp_all_ones) {
            if (F::has_inf && man == 0) return {Unpacked::infinity, negative, 0, 0};
            return {Unpacked::nan, negative, man, F::man_bits};
        }
    }
    if constexpr (F::has_subnormals) {
        if (biased == 0) {
            if (man == 0) return {Unpacked::zero, negative, 0, 0};
            return {Unpacked::finite, negative, man, F::quantum_min};
        }
    }
    const std::uint64_t implicit = std::uint64_t{1} << F::man_bits;
    return {Unpacked::finite, negative, implicit | man,
            static_cast<int>(biased) - F::bias - F::man_bits};
}

template <class F>
FP8KIT_HD std::uint64_t max_finite(bool negative) {
    return F::max_finite_code | (negative ? F::sign_mask : 0);
}

// The NaN that overflow produces in a format without Inf: the all-ones pattern with the sign.
template <class F>
FP8KIT_HD std::uint64_t overflow_nan(bool negative) {
    if constexpr (F::encoding == Encoding::fnuz) return F::nan_unsigned_zero;
    else return F::nan_all_ones | (negative ? F::sign_mask : 0);
}

template <class F>
FP8KIT_HD std::uint64_t nan_code(bool negative, NanEncoding nan, const Unpacked& in) {
    if constexpr (F::encoding == Encoding::fnuz) {
        return F::nan_unsigned_zero;
    } else if constexpr (!F::has_sign) {
        return F::nan_all_ones;
    } else {
        const std::uint64_t sign = negative ? F::sign_mask : 0;
        switch (nan) {
            case NanEncoding::canonical: return F::nan_all_ones;
            case NanEncoding::signed_all_ones: return F::nan_all_ones | sign;
            case NanEncoding::signed_quiet: return F::nan_quiet | sign;
            case NanEncoding::signed_quiet_payload: {
                // The payload's leading bits that fit, with the quiet bit forced on.
                const int drop = in.exponent - F::man_bits;
                const std::uint64_t payload =
                    drop >= 0 ? (in.significand >> drop) : (in.significand << -drop);
                return F::nan_quiet | (payload & F::man_mask) | sign;
            }
        }
        return F::nan_all_ones;
    }
}

template <class F>
FP8KIT_HD std::uint64_t on_overflow(bool negative, Overflow overflow) {
    if (overflow != Overflow::no_saturate) return max_finite<F>(negative);
    if constexpr (F::has_inf) return F::inf_code | (negative ? F::sign_mask : 0);
    else return overflow_nan<F>(negative);
}

template <class F>
FP8KIT_HD std::uint64_t zero_code(bool negative) {
    if constexpr (!F::has_zero) return F::min_normal_code;  // E8M0: nothing below 2^-127
    else return (F::has_negative_zero && negative) ? F::sign_mask : 0;
}

}  // namespace detail

// Number of random bits stochastic rounding consumes, and where they go: the 32 bits of `random`
// are added to the 32 bits of the exact value immediately below the destination's last kept
// mantissa bit (bits further down are truncated first); a carry out of those 32 bits rounds the
// magnitude up. So a value a fraction f of the way to the next code rounds up with probability
// floor(f * 2^32) / 2^32.
inline constexpr int kStochasticBits = 32;

// Convert the bits of a `From` value to the bits of the nearest `To` value under `policy`.
// `random` is used only by Rounding::stochastic.
template <class From, class To>
FP8KIT_HD typename To::storage_t convert(typename From::storage_t bits, Policy policy,
                                         std::uint32_t random = 0) {
    using detail::Unpacked;
    using out_t = typename To::storage_t;
    const Unpacked in = detail::unpack<From>(bits);

    // 1. Sign. Unsigned formats (E8M0) take the magnitude, as cuda_fp8.h does.
    const bool negative = To::has_sign && in.negative;

    // 2. Non-finite inputs and zero.
    switch (in.kind) {
        case Unpacked::nan: return static_cast<out_t>(detail::nan_code<To>(negative, policy.nan, in));
        case Unpacked::infinity:
            if (policy.overflow == Overflow::saturate_all)
                return static_cast<out_t>(detail::max_finite<To>(negative));
            if constexpr (To::has_inf) return static_cast<out_t>(To::inf_code | (negative ? To::sign_mask : 0));
            else return static_cast<out_t>(detail::overflow_nan<To>(negative));
        case Unpacked::zero: return static_cast<out_t>(detail::zero_code<To>(negative));
        case Unpacked::finite: break;
    }

    // 3. Place the binary point. The value is sig * 2^exp with sig in [2^top, 2^(top+1)), so its
    //    binade is e = exp + top. The destination keeps man_bits bits below the leading one, or
    //    fewer once e drops below emin (subnormals), so its last kept bit has weight 2^q.
    const std::uint64_t sig = in.significand;
    const int e = in.exponent + detail::highest_bit(sig);
    const int q = (e > To::emin ? e : To::emin) - To::man_bits;
    const int shift = q - in.exponent;  // how many low bits of sig fall below the last kept bit

    std::uint64_t kept;
    std::uint64_t dropped;  // the bits below the kept ones, as a fraction of 2^shift
    std::uint32_t below32;  // the 32 bits just below the last kept bit (stochastic rounding)
    int cmp_half;           // dropped compared with half an ulp: -1 below, 0 tie, +1 above
    if (shift <= 0) {
        kept = sig << -shift;  // exact: at most 53 + 52 bits never arises (see static_assert in format)
        dropped = 0;
        below32 = 0;
        cmp_half = -1;
    } else if (shift < 64) {
        kept = sig >> shift;
        dropped = sig & ((std::uint64_t{1} << shift) - 1);
        const std::uint64_t half = std::uint64_t{1} << (shift - 1);
        cmp_half = dropped > half ? 1 : (dropped == half ? 0 : -1);
        below32 = shift <= 32 ? static_cast<std::uint32_t>(dropped << (32 - shift))
                              : static_cast<std::uint32_t>(dropped >> (shift - 32));
    } else {  // sig < 2^53, so everything is dropped and it is below half
        kept = 0;
        dropped = sig;
        cmp_half = -1;
        below32 = shift - 32 < 64 ? static_cast<std::uint32_t>(sig >> (shift - 32)) : 0;
    }

    // 4. Round the magnitude: decide whether to add one unit in the last kept place.
    bool up = false;
    const bool inexact = dropped != 0;
    switch (policy.rounding) {
        case Rounding::nearest_even: up = cmp_half > 0 || (cmp_half == 0 && (kept & 1)); break;
        case Rounding::nearest_away: up = cmp_half >= 0; break;
        case Rounding::toward_zero: up = false; break;
        case Rounding::toward_positive: up = inexact && !negative; break;
        case Rounding::toward_negative: up = inexact && negative; break;
        case Rounding::stochastic:
            up = static_cast<std::uint64_t>(below32) + random >= (std::uint64_t{1} << 32);
            break;
    }
    kept += up ? 1 : 0;

    // 5. A carry out of the mantissa moves to the next binade; the value stays exact.
    int qe = q;
    if (kept == (std::uint64_t{1} << (To::man_bits + 1))) {
        kept >>= 1;
        ++qe;
    }

    // 6. Underflow to zero (or to the smallest code when the format has no zero).
    if (kept == 0) return static_cast<out_t>(detail::zero_code<To>(negative));

    // 7. Overflow: the rounded magnitude lies past the largest finite value.
    const bool normal = kept >> To::man_bits;  // leading one present
    const int result_e = normal ? qe + To::man_bits : To::emin;
    const std::uint64_t man = kept & To::man_mask;
    if (result_e > To::emax || (result_e == To::emax && man > To::max_man_at_max_exp))
        return static_cast<out_t>(detail::on_overflow<To>(negative, policy.overflow));

    // 8. Assemble sign, biased exponent and mantissa.
    const std::uint64_t biased = normal ? static_cast<std::uint64_t>(result_e + To::bias) : 0;
    const std::uint64_t code = (biased << To::man_bits) | man | (negative ? To::sign_mask : 0);
    return static_cast<out_t>(code);
}

}  // namespace fp8kit::emu
