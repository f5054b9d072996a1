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
    finite,    // no Inf and no NaN: every pattern is a number, signed zero (OCP MX FP6/FP4 elements)
};

// The usual bias 2^(e-1) - 1, one larger for fnuz (see below). A few formats move it further
// (ml_dtypes float8_e4m3b11fnuz: bias 11), so it is a template parameter with this default.
constexpr int default_bias(int exp_bits, Encoding enc) {
    return (1 << (exp_bits - 1)) - 1 + (enc == Encoding::fnuz ? 1 : 0);
}

template <int ExpBits, int ManBits, Encoding Enc, int Bias = default_bias(ExpBits, Enc)>
struct FloatFormat {
    static constexpr int exp_bits = ExpBits;
    static constexpr int man_bits = ManBits;
    static constexpr Encoding encoding = Enc;

    static constexpr bool has_sign = Enc != Encoding::exponent;
    static constexpr int total_bits = (has_sign ? 1 : 0) + ExpBits + ManBits;
    using storage_t =
        std::conditional_t<(total_bits <= 8), std::uint8_t,
                           std::conditional_t<(total_bits <= 16), std::uint16_t,
                                              std::conditional_t<(total_bits <= 32), std::uint32_t, std::uint64_t>>>;

    static constexpr bool has_inf = Enc == Encoding::ieee;
    static constexpr bool has_nan = Enc != Encoding::finite;
    static constexpr bool has_zero = Enc != Encoding::exponent;
    static constexpr bool has_negative_zero = Enc == Encoding::ieee || Enc == Encoding::fn || Enc == Encoding::finite;
    // Without a zero there is nothing below the smallest exponent, so no subnormals either.
    static constexpr bool has_subnormals = has_zero && ManBits > 0;

    static constexpr std::uint64_t man_mask = (std::uint64_t{1} << ManBits) - 1;
    static constexpr std::uint32_t exp_all_ones = (1u << ExpBits) - 1;
    static constexpr std::uint64_t sign_mask = has_sign ? (std::uint64_t{1} << (ExpBits + ManBits)) : 0;
    static constexpr std::uint64_t code_mask =
        (total_bits == 64) ? ~std::uint64_t{0} : (std::uint64_t{1} << total_bits) - 1;

    // FNUZ moves the bias up by one by default: the pattern that would be -0 became NaN, and the
    // freed exponent range is given to the bottom of the format.
    static constexpr int bias = Bias;

    // Largest biased exponent of a finite value, and the largest mantissa allowed with it
    // (finite formats spend no pattern on specials: the all-ones exponent is an ordinary binade).
    static constexpr std::uint32_t max_biased_exp =
        (Enc == Encoding::ieee || Enc == Encoding::exponent) ? exp_all_ones - 1 : exp_all_ones;
    static constexpr std::uint64_t max_man_at_max_exp = (Enc == Encoding::fn) ? man_mask - 1 : man_mask;

    // Unbiased exponents. With subnormals, biased exponent 0 shares emin with biased exponent 1.
    static constexpr int emax = static_cast<int>(max_biased_exp) - bias;
    static constexpr int emin = (has_subnormals ? 1 : 0) - bias;
    // Exponent of the last mantissa bit of the smallest non-zero magnitude.
    static constexpr int quantum_min = emin - ManBits;

    static constexpr std::uint64_t max_finite_code = (std::uint64_t{max_biased_exp} << ManBits) | max_man_at_max_exp;
    static constexpr std::uint64_t min_normal_code = has_subnormals ? (std::uint64_t{1} << ManBits) : 0;
    static constexpr std::uint64_t min_subnormal_code = has_subnormals ? 1 : min_normal_code;
    static constexpr std::uint64_t inf_code =
        has_inf ? (std::uint64_t{exp_all_ones} << ManBits) : 0;  // positive; only if has_inf

    // NaN patterns. fn and ieee formats carry a sign on NaN; fnuz and exponent formats have one NaN;
    // finite formats have none (these constants are then unused).
    static constexpr std::uint64_t nan_all_ones = (std::uint64_t{exp_all_ones} << ManBits) | man_mask;
    static constexpr std::uint64_t nan_quiet =
        (Enc == Encoding::ieee && ManBits > 0)
            ? ((std::uint64_t{exp_all_ones} << ManBits) | (std::uint64_t{1} << (ManBits - 1)))
            : nan_all_ones;
    static constexpr std::uint64_t nan_unsigned_zero = sign_mask;  // fnuz: the -0 pattern

    static_assert(ExpBits >= 2 && ExpBits <= 11, "exponent width outside what the routine handles");
    static_assert(ManBits >= 0 && ManBits <= 52, "mantissa width outside what the routine handles");
    static_assert(Enc != Encoding::fnuz || ManBits > 0, "fnuz needs a mantissa");
    static_assert(Bias > 0 && Bias < (1 << ExpBits), "bias outside the exponent range");
};

using E4M3 = FloatFormat<4, 3, Encoding::fn>;
using E5M2 = FloatFormat<5, 2, Encoding::ieee>;
using E4M3FNUZ = FloatFormat<4, 3, Encoding::fnuz>;
using E5M2FNUZ = FloatFormat<5, 2, Encoding::fnuz>;
using E8M0 = FloatFormat<8, 0, Encoding::exponent>;
// OCP MX v1.0 element formats (section 5.3): no Inf, no NaN.
using E2M1 = FloatFormat<2, 1, Encoding::finite>;
using E2M3 = FloatFormat<2, 3, Encoding::finite>;
using E3M2 = FloatFormat<3, 2, Encoding::finite>;
// The remaining ml_dtypes 8-bit types (ml_dtypes/include/float8.h): float8_e3m4 and float8_e4m3
// are IEEE-style (Inf and NaN); float8_e4m3b11fnuz is fnuz with bias 11.
using E3M4 = FloatFormat<3, 4, Encoding::ieee>;
using E4M3B11FNUZ = FloatFormat<4, 3, Encoding::fnuz, 11>;
using E4M3IEEE = FloatFormat<4, 3, Encoding::ieee>;
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
// OCP MX v1.0 table 4/5: E2M1 max 1.1b * 2^2 = 6, min normal 1, min subnormal 0.5; E2M3 max
// 1.111b * 2^2 = 7.5, min subnormal 2^-3; E3M2 max 1.11b * 2^4 = 28, min normal 2^-2, min
// subnormal 2^-4. The all-ones pattern is the largest number, not a NaN.
static_assert(E2M1::total_bits == 4 && E2M1::bias == 1 && E2M1::emax == 2 && E2M1::emin == 0 &&
              E2M1::quantum_min == -1);
static_assert(E2M1::max_finite_code == 0x7 && E2M1::sign_mask == 0x8 && !E2M1::has_nan && !E2M1::has_inf);
static_assert(E2M3::total_bits == 6 && E2M3::bias == 1 && E2M3::emax == 2 && E2M3::quantum_min == -3);
static_assert(E2M3::max_finite_code == 0x1F && E2M3::sign_mask == 0x20);
static_assert(E3M2::total_bits == 6 && E3M2::bias == 3 && E3M2::emax == 4 && E3M2::emin == -2 &&
              E3M2::quantum_min == -4);
static_assert(E3M2::max_finite_code == 0x1F && E3M2::min_normal_code == 0x04);
// ml_dtypes finfo: float8_e3m4 max 15.5 (1.1111b * 2^3), tiny 0.25, Inf 0x70, NaN 0x78;
// float8_e4m3 max 240 (1.111b * 2^7), tiny 2^-6, Inf 0x78, NaN 0x7C;
// float8_e4m3b11fnuz max 30 (1.111b * 2^4), tiny 2^-10, smallest subnormal 2^-13, NaN 0x80.
static_assert(E3M4::bias == 3 && E3M4::emax == 3 && E3M4::emin == -2 && E3M4::quantum_min == -6);
static_assert(E3M4::max_finite_code == 0x6F && E3M4::inf_code == 0x70 && E3M4::nan_quiet == 0x78);
static_assert(E4M3IEEE::bias == 7 && E4M3IEEE::emax == 7 && E4M3IEEE::quantum_min == -9);
static_assert(E4M3IEEE::max_finite_code == 0x77 && E4M3IEEE::inf_code == 0x78 && E4M3IEEE::nan_quiet == 0x7C);
static_assert(E4M3B11FNUZ::bias == 11 && E4M3B11FNUZ::emax == 4 && E4M3B11FNUZ::emin == -10);
static_assert(E4M3B11FNUZ::quantum_min == -13 && E4M3B11FNUZ::max_finite_code == 0x7F);
// The IEEE interchange formats come out of the same template.
static_assert(Binary32::bias == 127 && Binary32::max_finite_code == 0x7F7FFFFF && Binary32::nan_quiet == 0x7FC00000);
static_assert(Binary16::max_finite_code == 0x7BFF && BFloat16::max_finite_code == 0x7F7F);
static_assert(Binary64::quantum_min == -1074 && Binary64::inf_code == 0x7FF0000000000000ull);

}  // namespace fp8kit::emu
