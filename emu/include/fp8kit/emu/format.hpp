// Format traits: every limit of a binary floating-point format derived from three numbers
// (exponent bits, mantissa bits, encoding family). Nothing here is typed in per format; the
// static_asserts at the bottom check the derivations against the published tables
// (OCP OFP8 rev 1.0, OCP MX v1.0, IEEE 754).
#pragma once

#include <cstdint>
#include <type_traits>

#if defined(__CUDACC__)
#define FP8KIT_HD __host__ __device__ __forceinline__
#else
#define FP8KIT_HD inline
#endif

namespace fp8kit::emu {

// How a format spends its special bit patterns. This is the only thing that separates
// e4m3fn from e4m3fnuz besides the bias, so it is a parameter rather than a per-type override.
enum class Encoding : std::uint8_t {
    ieee,      // exponent all-ones: Inf (mantissa 0) and NaNs; signed zero (binary16/32/64, bf16, E5M2)
    fn,        // finite: only S.1..1.1..1 is NaN, no Inf, signed zero (OCP E4M3 "e4m3fn")
    fnuz,      // finite, unsigned zero: 0x80 is the only NaN, no Inf, no -0, bias one larger
    exponent,  // unsigned, exponent only, no zero: all-ones is NaN (OCP MX E8M0 scale)
};

template <int ExpBits, int ManBits, Encoding Enc>
struct FloatFormat {
    static constexpr int exp_bits = ExpBits;
    static constexpr int man_bits = ManBits;
    static constexpr Encoding encoding = Enc;

    static constexpr bool has_sign = Enc != Encoding::exponent;
    static constexpr int total_bits = (has_sign ? 1 : 0) + ExpBits + ManBits;
    using storage_t = std::conditional_t<
        (total_bits <= 8), std::uint8_t,
        std::conditional_t<(total_bits <= 16), std::uint16_t,
                           std::conditional_t<(total_bits <= 32), std::uint32_t, std::uint64_t>>>;

    static constexpr bool has_inf = Enc == Encoding::ieee;
    static constexpr bool has_zero = Enc != Encoding::exponent;
    static constexpr bool has_negative_zero = Enc == Encoding::ieee || Enc == Encoding::fn;
    // Without a zero there is nothing below the smallest exponent, so no subnormals either.
    static constexpr bool has_subnormals = has_zero && ManBits > 0;

    static constexpr std::uint64_t man_mask = (std::uint64_t{1} << ManBits) - 1;
    static constexpr std::uint32_t exp_all_ones = (1u << ExpBits) - 1;
    static constexpr std::uint64_t sign_mask =
        has_sign ? (std::uint64_t{1} << (ExpBits + ManBits)) : 0;
    static constexpr std::uint64_t code_mask = (total_bits == 64) ? ~std::uint64_t{0}
                                                                  : (std::uint64_t{1} << total_bits) - 1;

    // FNUZ moves the bias up by one: the pattern that would be -0 became NaN, and the freed
    // exponent range is given to the bottom of the format.
    static constexpr int bias = (1 << (ExpBits - 1)) - 1 + (Enc == Encoding::fnuz ? 1 : 0);

    // Largest biased exponent of a finite value, and the largest mantissa allowed with it.
    static constexpr std::uint32_t max_biased_exp =
        (Enc == Encoding::ieee || Enc == Encoding::exponent) ? exp_all_ones - 1 : exp_all_ones;
    static constexpr std::uint64_t max_man_at_max_exp =
        (Enc == Encoding::fn) ? man_mask - 1 : man_mask;

    // Unbiased exponents. With subnormals, biased exponent 0 shares emin with biased exponent 1.
    static constexpr int emax = static_cast<int>(max_biased_exp) - bias;
    static constexpr int emin = (has_subnormals ? 1 : 0) - bias;
    // Exponent of the last mantissa bit of the smallest non-zero magnitude.
    static constexpr int quantum_min = emin - ManBits;

    static constexpr std::uint64_t max_finite_code =
        (std::uint64_t{max_biased_exp} << ManBits) | max_man_at_max_exp;
    static constexpr std::uint64_t min_normal_code =
        has_subnormals ? (std::uint64_t{1} << ManBits) : 0;
    static constexpr std::uint64_t min_subnormal_code = has_subnormals ? 1 : min_normal_code;
    static constexpr std::uint64_t inf_code =
        has_inf ? (std::uint64_t{exp_all_ones} << ManBits) : 0;  // positive; only if has_inf

    // NaN patterns. fn and ieee formats carry a sign on NaN; fnuz and exponent formats have one NaN.
    static constexpr std::uint64_t nan_all_ones = (std::uint64_t{exp_all_ones} << ManBits) | man_mask;
    static constexpr std::uint64_t nan_quiet =
        (Enc == Encoding::ieee && ManBits > 0)
            ? ((std::uint64_t{exp_all_ones} << ManBits) | (std::uint64_t{1} << (ManBits - 1)))
            : nan_all_ones;
    static constexpr std::uint64_t nan_unsigned_zero = sign_mask;  // fnuz: the -0 pattern

    static_assert(ExpBits >= 2 && ExpBits <= 11, "exponent width outside what the routine handles");
    static_assert(ManBits >= 0 && ManBits <= 52, "mantissa width outside what the routine handles");
    static_assert(Enc != Encoding::fnuz || ManBits > 0, "fnuz needs a mantissa");
};

using E4M3 = FloatFormat<4, 3, Encoding::fn>;
using E5M2 = FloatFormat<5, 2, Encoding::ieee>;
using E4M3FNUZ = FloatFormat<4, 3, Encoding::fnuz>;
using E5M2FNUZ = FloatFormat<5, 2, Encoding::fnuz>;
using E8M0 = FloatFormat<8, 0, Encoding::exponent>;
using Binary16 = FloatFormat<5, 10, Encoding::ieee>;
using BFloat16 = FloatFormat<8, 7, Encoding::ieee>;
using Binary32 = FloatFormat<8, 23, Encoding::ieee>;
using Binary64 = FloatFormat<11, 52, Encoding::ieee>;

// Derived limits checked against the published tables (shared/research/formats.md).
// E4M3: 1.110b * 2^(15-7) = 448, min normal 2^(1-7), min subnormal 2^(-6-3).
static_assert(E4M3::bias == 7 && E4M3::emax == 8 && E4M3::emin == -6 && E4M3::quantum_min == -9);
static_assert(E4M3::max_finite_code == 0x7E && E4M3::nan_all_ones == 0x7F && E4M3::min_normal_code == 0x08);
// E5M2: 1.11b * 2^(30-15) = 57344, Inf 0x7C, quiet NaN 0x7E.
static_assert(E5M2::bias == 15 && E5M2::emax == 15 && E5M2::emin == -14 && E5M2::quantum_min == -16);
static_assert(E5M2::max_finite_code == 0x7B && E5M2::inf_code == 0x7C && E5M2::nan_quiet == 0x7E);
// FNUZ: bias + 1, NaN 0x80, max 0x7F = 1.111b * 2^(15-8) = 240 and 1.11b * 2^(31-16) = 57344.
static_assert(E4M3FNUZ::bias == 8 && E4M3FNUZ::emax == 7 && E4M3FNUZ::quantum_min == -10);
static_assert(E4M3FNUZ::max_finite_code == 0x7F && E4M3FNUZ::nan_unsigned_zero == 0x80);
static_assert(E5M2FNUZ::bias == 16 && E5M2FNUZ::emax == 15 && E5M2FNUZ::quantum_min == -17);
static_assert(E5M2FNUZ::max_finite_code == 0x7F);
// E8M0: codes 0x00..0xFE are 2^-127..2^127, 0xFF is NaN.
static_assert(E8M0::bias == 127 && E8M0::emin == -127 && E8M0::emax == 127 && E8M0::total_bits == 8);
static_assert(E8M0::max_finite_code == 0xFE && E8M0::nan_all_ones == 0xFF && E8M0::min_normal_code == 0);
// The IEEE interchange formats come out of the same template.
static_assert(Binary32::bias == 127 && Binary32::max_finite_code == 0x7F7FFFFF && Binary32::nan_quiet == 0x7FC00000);
static_assert(Binary16::max_finite_code == 0x7BFF && BFloat16::max_finite_code == 0x7F7F);
static_assert(Binary64::quantum_min == -1074 && Binary64::inf_code == 0x7FF0000000000000ull);

}  // namespace fp8kit::emu
