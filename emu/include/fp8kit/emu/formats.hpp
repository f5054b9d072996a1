// Run-time names for the compile-time formats, and one dispatch point from a run-time choice
// (CLI flag, kernel argument) to the template. Usable from host and device code.
#pragma once

#include <cstdint>

#include "fp8kit/emu/convert.hpp"

namespace fp8kit::emu {

// The 8-bit formats fp8kit quantizes to.
enum class Format : std::uint8_t { e4m3, e5m2, e4m3fnuz, e5m2fnuz, e8m0 };
inline constexpr Format kAllFormats[] = {Format::e4m3, Format::e5m2, Format::e4m3fnuz,
                                         Format::e5m2fnuz, Format::e8m0};

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

// Encode the bits of a wide value (f64: all 64 bits; f32: low 32; f16/bf16: low 16).
FP8KIT_HD std::uint8_t encode(Format to, Wide from, std::uint64_t bits, Policy policy,
                              std::uint32_t random = 0) {
    return with_format(to, [&](auto dst) {
        using D = decltype(dst);
        return with_wide(from, [&](auto src) {
            using S = decltype(src);
            return static_cast<std::uint8_t>(convert<S, D>(
                static_cast<typename S::storage_t>(bits), policy, random));
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
