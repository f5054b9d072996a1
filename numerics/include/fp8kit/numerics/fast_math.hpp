// Float32 arithmetic as nvcc's --use_fast_math compiles it for sm_90, written once for lib's
// simulations of kernels built that way (TransformerEngine's multi_tensor/adam.cu) and for the GPU
// check that compares it with the hardware (scripts/gpu/mufu_capture.cu).
//
// --use_fast_math means -ftz=true -prec-div=false -prec-sqrt=false -fmad=true (nvcc's manual,
// "--use_fast_math"). In PTX a float `a / b` becomes div.approx.ftz.f32 and sqrtf becomes
// sqrt.approx.ftz.f32; additions, multiplications and FMAs carry .ftz (PTX ISA, "Floating Point
// Instructions": subnormal inputs and results are flushed to sign-preserving zero). On sm_90
// div.approx.ftz.f32 is MUFU.RCP of the divisor and a flushing multiply, and sqrt.approx.ftz.f32 is
// MUFU.SQRT (the SASS of scripts/gpu/te_adam_probe.sh's fast-math build).
//
// MUFU.RCP and MUFU.SQRT are approximations that no public document defines bit for bit. They
// depend only on the significand (and, for the square root, the exponent's parity), so each is
// held as a table over one binade [1, 2) (RCP) or two [1, 4) (SQRT): the hardware's result minus
// the correctly rounded one, in units in the last place of the result, captured on an H200 by
// scripts/gpu/mufu_capture.cu, which also checks every one of the 2^32 inputs against these
// functions. lib embeds the tables (lib/data/mufu_sm90_{rcp,sqrt}.i8.gz, simulate::mufu_sm90_tables);
// device code would pass copies in device memory, as the check does.
#pragma once

#include <cmath>
#include <cstdint>

#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::numerics::fast_math {

inline constexpr std::uint32_t kRcpEntries = 1u << 23;   // significands of [1, 2)
inline constexpr std::uint32_t kSqrtEntries = 1u << 24;  // exponent parity, significand: [1, 4)
inline constexpr std::uint32_t kNaN = 0x7FFFFFFFu;       // MUFU's NaN (canonical on sm_90)

// The two tables: delta[i] = hardware bits - correctly rounded bits, on the base binade(s).
struct MufuTables {
    const std::int8_t* rcp;   // kRcpEntries, index: the 23 significand bits of x in [1, 2)
    const std::int8_t* sqrt;  // kSqrtEntries, index: parity << 23 | significand, x in [1, 4)
};

// ---- flushing arithmetic (add.ftz, mul.ftz, fma.rn.ftz) ------------------------------------

// A subnormal becomes zero of the same sign.
FP8KIT_HD float ftz(float x) {
    const std::uint32_t u = bits_of(x);
    return (u & 0x7F800000u) == 0 ? float_of(u & 0x80000000u) : x;
}

// The hardware decides a flush on the exact result rounded to 24 bits with an unbounded exponent
// (tininess after rounding), not on IEEE's gradual-underflow result: (1 - 2^-24) * 2^-126, which
// IEEE rounds up to 2^-126, is flushed; (1 - 2^-46) * 2^-126 is kept as 2^-126 (seen on the H200,
// scripts/gpu/mufu_capture.cu). The two differ only where IEEE gives exactly +-2^-126; there
// `scaled`, the same operation with its exact result scaled by 2^64 (normal, so rounded to 24 bits
// as the hardware rounds), decides.
FP8KIT_HD bool is_min_normal(float r) { return (bits_of(r) & 0x7FFFFFFFu) == 0x00800000u; }
FP8KIT_HD float flush_tiny(float r, float scaled) {
    if (!is_min_normal(r)) return ftz(r);
    return (bits_of(scaled) & 0x7FFFFFFFu) < 0x20800000u ? float_of(bits_of(r) & 0x80000000u) : r;  // 2^-62
}

// Inputs flushed, the result rounded, a tiny result flushed.
FP8KIT_HD float mul(float a, float b) {
    a = ftz(a), b = ftz(b);
    const float r = mul_rn(a, b);
    // Only reached with a product near 2^-126 of two normal factors, so |a| is at most about 1 and
    // a * 2^64 is exact.
    return is_min_normal(r) ? flush_tiny(r, mul_rn(mul_rn(a, 0x1p64f), b)) : ftz(r);
}
FP8KIT_HD float add(float a, float b) { return ftz(add_rn(ftz(a), ftz(b))); }  // +-2^-126: exact
FP8KIT_HD float sub(float a, float b) { return add(a, -b); }
FP8KIT_HD float fma(float a, float b, float c) {
    a = ftz(a), b = ftz(b), c = ftz(c);
    const float r = fma_rn(a, b, c);
    if (!is_min_normal(r)) return ftz(r);
    // |a * b + c| near 2^-126 means |c| < 2^-76 and the smaller factor below 2^-38 (the bits of a
    // 48-bit product and c must meet at 2^-149), so both scalings by 2^64 are exact.
    const bool scale_a = (bits_of(a) & 0x7FFFFFFFu) < (bits_of(b) & 0x7FFFFFFFu);
    const float sa = scale_a ? mul_rn(a, 0x1p64f) : a, sb = scale_a ? b : mul_rn(b, 0x1p64f);
    return flush_tiny(r, fma_rn(sa, sb, mul_rn(c, 0x1p64f)));
}

// ---- MUFU.RCP and MUFU.SQRT ----------------------------------------------------------------

// The correctly rounded reciprocal and square root (IEEE on host and device).
FP8KIT_HD float rcp_rn(float x) { return div_rn(1.0f, x); }
FP8KIT_HD float sqrt_rn(float x) {
#if defined(__CUDA_ARCH__)
    return __fsqrt_rn(x);
#else
    return std::sqrt(x);
#endif
}

// The bits of a base-binade result `base` (normal) moved by `shift` binades; below the normal
// range it is flushed to zero.
FP8KIT_HD std::uint32_t shift_exponent(std::uint32_t base, int shift) {
    const int e = static_cast<int>(base >> 23) + shift;
    return e <= 0 ? 0u : (static_cast<std::uint32_t>(e) << 23) | (base & 0x7FFFFFu);
}

// rcp.approx.ftz.f32.
FP8KIT_HD float rcp(float x, const MufuTables& t) {
    const std::uint32_t u = bits_of(x), sign = u & 0x80000000u, e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
    if (e == 0xFFu) return float_of(m ? kNaN : sign);  // 1/Inf = 0
    if (e == 0) return float_of(sign | 0x7F800000u);   // 0 and flushed subnormals: Inf
    const std::uint32_t base = bits_of(rcp_rn(float_of(0x3F800000u | m))) + static_cast<std::uint32_t>(t.rcp[m]);
    return float_of(sign | shift_exponent(base, 127 - static_cast<int>(e)));
}

// sqrt.approx.ftz.f32.
FP8KIT_HD float sqrt(float x, const MufuTables& t) {
    const std::uint32_t u = bits_of(x), sign = u & 0x80000000u, e = (u >> 23) & 0xFFu, m = u & 0x7FFFFFu;
    if (e == 0) return float_of(sign);  // +-0 and flushed subnormals
    if (e == 0xFFu && m) return float_of(kNaN);
    if (sign) return float_of(kNaN);
    if (e == 0xFFu) return x;
    const int unbiased = static_cast<int>(e) - 127, parity = unbiased & 1;
    const std::uint32_t index = (static_cast<std::uint32_t>(parity) << 23) | m;
    const float in_base = float_of((static_cast<std::uint32_t>(127 + parity) << 23) | m);  // [1, 4)
    const std::uint32_t base = bits_of(sqrt_rn(in_base)) + static_cast<std::uint32_t>(t.sqrt[index]);
    return float_of(shift_exponent(base, (unbiased - parity) / 2));
}

// div.approx.ftz.f32: a times MUFU.RCP(b), flushed.
FP8KIT_HD float div(float a, float b, const MufuTables& t) { return mul(a, rcp(b, t)); }

}  // namespace fp8kit::numerics::fast_math
