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

FP8KIT_HD int highest_bit(std::uint32_t v) {  // v != 0
#if defined(__CUDA_ARCH__)
    return 31 - __clz(static_cast<int>(v));
#else
    return 31 - __builtin_clz(v);
#endif
}

// The working integer of a conversion. A GPU has no 64-bit integer ALU (each 64-bit add, shift
// or compare is two or more 32-bit instructions), so conversions between formats of at most 32
// bits work in uint32_t: then every significand is below 2^31 (at least 2 exponent bits) and a
// rounded `kept` is at most 2^(man_bits + 1) <= 2^31, so nothing the routine computes needs more.
// Anything involving binary64 keeps uint64_t.
template <class From, class To>
using work_t = std::conditional_t<(From::total_bits <= 32 && To::total_bits <= 32), std::uint32_t, std::uint64_t>;

// A value in a form every format can be read into and written from:
// (-1)^negative * significand * 2^exponent, or one of the special classes.
struct UnpackedKind {
    enum Kind : std::uint8_t { zero, finite, infinity, nan };
};

template <class W>
struct UnpackedW {
    using Kind = UnpackedKind::Kind;
    static constexpr Kind zero = UnpackedKind::zero, finite = UnpackedKind::finite, infinity = UnpackedKind::infinity,
                          nan = UnpackedKind::nan;
    Kind kind;
    bool negative;
    W significand;  // finite: non-zero, below 2^(man_bits + 1); NaN: the mantissa field (payload)
    int exponent;   // NaN: the width of that mantissa field
};
using Unpacked = UnpackedW<std::uint64_t>;

// W: the working integer (work_t); uint32_t only for formats of at most 32 bits.
template <class F, class W = std::uint64_t>
FP8KIT_HD UnpackedW<W> unpack(std::uint64_t code_in) {
    static_assert(sizeof(W) == 8 || F::total_bits <= 32, "a 32-bit working integer needs a format of at most 32 bits");
    using U = UnpackedW<W>;
    const W code = static_cast<W>(code_in & F::code_mask);
    const bool negative = F::has_sign && (code & static_cast<W>(F::sign_mask)) != 0;
    const W magnitude = code & ~static_cast<W>(F::sign_mask);
    const auto biased = static_cast<std::uint32_t>(magnitude >> F::man_bits);
    const W man = magnitude & static_cast<W>(F::man_mask);

    if constexpr (F::encoding == Encoding::fnuz) {
        if (code == static_cast<W>(F::nan_unsigned_zero)) return {U::nan, false, 0, 0};
    } else if constexpr (F::encoding == Encoding::fn) {
        if (magnitude == static_cast<W>(F::nan_all_ones)) return {U::nan, negative, man, F::man_bits};
    } else if constexpr (F::encoding == Encoding::finite) {
        // No special patterns: the all-ones exponent is an ordinary binade.
    } else {  // ieee and exponent-only: the all-ones exponent is special
        if (biased == F::exp_all_ones) {
            if (F::has_inf && man == 0) return {U::infinity, negative, 0, 0};
            return {U::nan, negative, man, F::man_bits};
        }
    }
    if constexpr (F::has_subnormals) {
        if (biased == 0) {
            if (man == 0) return {U::zero, negative, 0, 0};
            return {U::finite, negative, man, F::quantum_min};
        }
    }
    const W implicit = W{1} << F::man_bits;
    return {U::finite, negative, implicit | man, static_cast<int>(biased) - F::bias - F::man_bits};
}

template <class F>
FP8KIT_HD std::uint64_t zero_code(bool negative) {
    if constexpr (!F::has_zero)
        return F::min_normal_code;  // E8M0: nothing below 2^-127
    else
        return (F::has_negative_zero && negative) ? F::sign_mask : 0;
}

template <class F>
FP8KIT_HD std::uint64_t max_finite(bool negative) {
    return F::max_finite_code | (negative ? F::sign_mask : 0);
}

// The NaN that overflow produces in a format without Inf: the all-ones pattern with the sign.
// A format with neither Inf nor NaN (OCP MX FP4/FP6) has nothing past its largest value, so it
// saturates under every Overflow policy (OCP MX v1.0 section 5.3: conversion clamps to max normal).
template <class F>
FP8KIT_HD std::uint64_t overflow_nan(bool negative) {
    if constexpr (!F::has_nan)
        return max_finite<F>(negative);
    else if constexpr (F::encoding == Encoding::fnuz)
        return F::nan_unsigned_zero;
    else
        return F::nan_all_ones | (negative ? F::sign_mask : 0);
}

template <class F, class W>
FP8KIT_HD std::uint64_t nan_code(bool negative, NanEncoding nan, const UnpackedW<W>& in) {
    if constexpr (!F::has_nan) {
        // No NaN to give: negated_zero is ml_dtypes' choice, every other value the +max finite
        // of cuda_fp4.h / cuda_fp6.h ("NaN input values result in positive MAXNORM").
        if (nan == NanEncoding::negated_zero) return zero_code<F>(!negative);
        return F::max_finite_code;
    } else if constexpr (F::encoding == Encoding::fnuz) {
        return F::nan_unsigned_zero;
    } else if constexpr (!F::has_sign) {
        return F::nan_all_ones;
    } else {
        const std::uint64_t sign = negative ? F::sign_mask : 0;
        switch (nan) {
            case NanEncoding::canonical:
            case NanEncoding::positive_max:  // the two values for formats without NaN
            case NanEncoding::negated_zero: return F::nan_all_ones;
            case NanEncoding::signed_all_ones: return F::nan_all_ones | sign;
            case NanEncoding::signed_quiet: return F::nan_quiet | sign;
            case NanEncoding::signed_quiet_payload: {
                // The payload's leading bits that fit, with the quiet bit forced on.
                const int drop = in.exponent - F::man_bits;
                const std::uint64_t payload = drop >= 0 ? static_cast<std::uint64_t>(in.significand >> drop)
                                                        : static_cast<std::uint64_t>(in.significand) << -drop;
                return F::nan_quiet | (payload & F::man_mask) | sign;
            }
        }
        return F::nan_all_ones;
    }
}

template <class F>
FP8KIT_HD std::uint64_t on_overflow(bool negative, Overflow overflow) {
    if (overflow != Overflow::no_saturate) return max_finite<F>(negative);
    if constexpr (F::has_inf)
        return F::inf_code | (negative ? F::sign_mask : 0);
    else
        return overflow_nan<F>(negative);
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
FP8KIT_HD typename To::storage_t convert(typename From::storage_t bits, Policy policy, std::uint32_t random = 0) {
    using out_t = typename To::storage_t;
    using W = detail::work_t<From, To>;  // uint32_t unless binary64 is involved
    constexpr int kWidth = 8 * static_cast<int>(sizeof(W));
    using Unpacked = detail::UnpackedW<W>;
    const Unpacked in = detail::unpack<From, W>(bits);

    // 1. Sign. Unsigned formats (E8M0) take the magnitude, as cuda_fp8.h does.
    const bool negative = To::has_sign && in.negative;

    // 2. Non-finite inputs and zero.
    switch (in.kind) {
        case Unpacked::nan: return static_cast<out_t>(detail::nan_code<To>(negative, policy.nan, in));
        case Unpacked::infinity:
            if (policy.overflow == Overflow::saturate_all) return static_cast<out_t>(detail::max_finite<To>(negative));
            if constexpr (To::has_inf)
                return static_cast<out_t>(To::inf_code | (negative ? To::sign_mask : 0));
            else
                return static_cast<out_t>(detail::overflow_nan<To>(negative));
        case Unpacked::zero: return static_cast<out_t>(detail::zero_code<To>(negative));
        case Unpacked::finite: break;
    }

    // 3. Place the binary point. The value is sig * 2^exp with sig in [2^top, 2^(top+1)), so its
    //    binade is e = exp + top. The destination keeps man_bits bits below the leading one, or
    //    fewer once e drops below emin (subnormals), so its last kept bit has weight 2^q.
    //    Every shift below is by less than kWidth (a shift by the width is undefined).
    const W sig = in.significand;
    const int e = in.exponent + detail::highest_bit(sig);
    const int q = (e > To::emin ? e : To::emin) - To::man_bits;
    const int shift = q - in.exponent;  // how many low bits of sig fall below the last kept bit

    W kept;
    W dropped;              // the bits below the kept ones, as a fraction of 2^shift
    std::uint32_t below32;  // the 32 bits just below the last kept bit (stochastic rounding)
    int cmp_half;           // dropped compared with half an ulp: -1 below, 0 tie, +1 above
    if (shift <= 0) {
        // Exact: kept < 2^(To::man_bits + 1) (the leading one lands at most at bit man_bits), so
        // -shift <= To::man_bits < kWidth. In 64 bits, 53 + 52 bits never arises (format asserts).
        kept = sig << -shift;
        dropped = 0;
        below32 = 0;
        cmp_half = -1;
    } else if (shift < kWidth) {
        kept = sig >> shift;
        dropped = sig & ((W{1} << shift) - 1);
        const W half = W{1} << (shift - 1);
        cmp_half = dropped > half ? 1 : (dropped == half ? 0 : -1);
        // shift <= 32: dropped < 2^shift, so dropped << (32 - shift) fits in 32 bits, and the
        // shift amount is at most 31 because shift >= 1 here.
        below32 = shift <= 32 ? static_cast<std::uint32_t>(dropped << (32 - shift))
                              : static_cast<std::uint32_t>(dropped >> (shift - 32));
    } else {  // sig < 2^(kWidth - 1) <= half an ulp, so everything is dropped and it is below half
        kept = 0;
        dropped = sig;
        cmp_half = -1;
        // shift >= kWidth >= 32; the 32 bits below the last kept bit are sig >> (shift - 32).
        below32 = shift - 32 < kWidth ? static_cast<std::uint32_t>(sig >> (shift - 32)) : 0;
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
            // A carry out of the 32-bit sum, tested in 32 bits: the sum wrapped below below32.
            up = static_cast<std::uint32_t>(below32 + random) < below32;
            break;
    }
    kept += up ? 1 : 0;

    // 5. A carry out of the mantissa moves to the next binade; the value stays exact.
    int qe = q;
    if (kept == (W{1} << (To::man_bits + 1))) {
        kept >>= 1;
        ++qe;
    }

    // 6. Underflow to zero (or to the smallest code when the format has no zero).
    if (kept == 0) return static_cast<out_t>(detail::zero_code<To>(negative));

    // 7. Overflow: the rounded magnitude lies past the largest finite value.
    const bool normal = kept >> To::man_bits;  // leading one present
    const int result_e = normal ? qe + To::man_bits : To::emin;
    const W man = kept & static_cast<W>(To::man_mask);
    if (result_e > To::emax || (result_e == To::emax && man > static_cast<W>(To::max_man_at_max_exp)))
        return static_cast<out_t>(detail::on_overflow<To>(negative, policy.overflow));

    // 8. Assemble sign, biased exponent and mantissa.
    const W biased = normal ? static_cast<W>(result_e + To::bias) : 0;
    const W code = (biased << To::man_bits) | man | (negative ? static_cast<W>(To::sign_mask) : 0);
    return static_cast<out_t>(code);
}

}  // namespace fp8kit::emu
