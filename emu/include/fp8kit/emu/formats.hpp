// Run-time names for the compile-time formats, and one dispatch point from a run-time choice
// (CLI flag, kernel argument) to the template. Usable from host and device code.
#pragma once

#include <cstdint>

#include "fp8kit/emu/convert.hpp"

namespace fp8kit::emu {

// The formats of at most 8 bits fp8kit quantizes to. Each code is stored in one byte, in the low
// bits (FP4 and FP6 too); packing two FP4 codes per byte is a storage layout (see pack.hpp).
enum class Format : std::uint8_t {
    e4m3,
    e5m2,
    e4m3fnuz,
    e5m2fnuz,
    e8m0,
    e2m1,
    e2m3,
    e3m2,  // OCP MX FP4 / FP6 elements
    e3m4,
    e4m3b11fnuz,
    e4m3ieee,  // the remaining ml_dtypes 8-bit types
};
inline constexpr Format kAllFormats[] = {Format::e4m3, Format::e5m2,        Format::e4m3fnuz, Format::e5m2fnuz,
                                         Format::e8m0, Format::e2m1,        Format::e2m3,     Format::e3m2,
                                         Format::e3m4, Format::e4m3b11fnuz, Format::e4m3ieee};
inline constexpr int kNumFormats = static_cast<int>(sizeof(kAllFormats) / sizeof(kAllFormats[0]));

// The wide formats data arrives in (and decodes to).
enum class Wide : std::uint8_t { f64, f32, f16, bf16 };
inline constexpr Wide kAllWide[] = {Wide::f64, Wide::f32, Wide::f16, Wide::bf16};

template <class Fn>
FP8KIT_HD decltype(auto) with_format(Format f, Fn&& fn) {
    switch (f) {
        case Format::e5m2: return fn(E5M2{});
        case Format::e4m3fnuz: return fn(E4M3FNUZ{});
        case Format::e5m2fnuz: return fn(E5M2FNUZ{});
        case Format::e8m0: return fn(E8M0{});
        case Format::e2m1: return fn(E2M1{});
        case Format::e2m3: return fn(E2M3{});
        case Format::e3m2: return fn(E3M2{});
        case Format::e3m4: return fn(E3M4{});
        case Format::e4m3b11fnuz: return fn(E4M3B11FNUZ{});
        case Format::e4m3ieee: return fn(E4M3IEEE{});
        case Format::e4m3: break;
    }
    return fn(E4M3{});
}

template <class Fn>
FP8KIT_HD decltype(auto) with_wide(Wide w, Fn&& fn) {
    switch (w) {
        case Wide::f64: return fn(Binary64{});
        case Wide::f16: return fn(Binary16{});
        case Wide::bf16: return fn(BFloat16{});
        case Wide::f32: break;
    }
    return fn(Binary32{});
}

// Number of codes of a format: 2^total_bits (16 for FP4, 64 for FP6, 256 for the 8-bit ones).
FP8KIT_HD int code_count(Format f) {
    return with_format(f, [](auto fmt) { return 1 << decltype(fmt)::total_bits; });
}

// Encode the bits of a wide value (f64: all 64 bits; f32: low 32; f16/bf16: low 16).
FP8KIT_HD std::uint8_t encode(Format to, Wide from, std::uint64_t bits, Policy policy, std::uint32_t random = 0) {
    return with_format(to, [&](auto dst) {
        using D = decltype(dst);
        return with_wide(from, [&](auto src) {
            using S = decltype(src);
            return static_cast<std::uint8_t>(convert<S, D>(static_cast<typename S::storage_t>(bits), policy, random));
        });
    });
}

// Whether a value overflows `to` under `policy.rounding` (and `random`, for stochastic rounding):
// rounded as if the exponent range had no top, its magnitude lies past the largest finite value.
// A format with Inf or NaN shows it as the Inf/NaN code a non-saturating conversion gives (a NaN
// input counts too). A format with neither (OCP MX FP4/FP6) saturates silently, so the rounding is
// redone in a twin format with one more exponent bit and the same bias: its codes are `to`'s codes
// (same integers) up to `to`'s max, and continue the grid above it.
FP8KIT_HD bool overflows(Format to, Wide from, std::uint64_t bits, Policy policy, std::uint32_t random = 0) {
    const Policy nosat{policy.rounding, Overflow::no_saturate, policy.nan};
    return with_format(to, [&](auto dst) {
        using D = decltype(dst);
        return with_wide(from, [&](auto src) {
            using S = decltype(src);
            const auto in = static_cast<typename S::storage_t>(bits);
            if constexpr (D::has_nan) {
                const auto u = detail::unpack<D>(convert<S, D>(in, nosat, random));
                return u.kind == detail::Unpacked::nan || u.kind == detail::Unpacked::infinity;
            } else {
                using Twin = FloatFormat<D::exp_bits + 1, D::man_bits, Encoding::ieee, D::bias>;
                const std::uint64_t c = convert<S, Twin>(in, nosat, random);
                return (c & ~Twin::sign_mask) > D::max_finite_code;
            }
        });
    });
}

// Decode an 8-bit code to the bits of a wide format (exact except E8M0 -> f16, which rounds
// to nearest-even with Inf on overflow, as an IEEE cast would).
FP8KIT_HD std::uint64_t decode(Format from, Wide to, std::uint8_t code) {
    return with_format(from, [&](auto src) {
        using S = decltype(src);
        return with_wide(to, [&](auto dst) {
            using D = decltype(dst);
            return static_cast<std::uint64_t>(convert<S, D>(code, kDecodePolicy));
        });
    });
}

}  // namespace fp8kit::emu
