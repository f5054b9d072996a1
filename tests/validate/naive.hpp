// An independent, deliberately simple FP8 converter for E4M3 (fn) and E5M2 (ieee) used to make
// "kernel outputs", right and wrong: values of all codes from the bit fields with ldexp, then a
// search for the two neighbours of |x|. Shares no code with emu.
#pragma once

#include <immintrin.h>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "float_bits.hpp"

namespace naive {

using fp8kit_test::bits;

enum class Fmt { e4m3, e5m2 };
enum class Round { even, away, trunc };

struct Kernel {
    Fmt fmt = Fmt::e4m3;
    Round round = Round::even;
    bool saturate = true;           // finite overflow and +-Inf -> +-max; else Inf (e5m2) / NaN (e4m3)
    bool nan_signed = false;        // NaN input -> all-ones with the input's sign; else +all-ones
    bool nan_quiet = false;         // e5m2 only: 0x7E | sign instead of all-ones
    bool flush_subnormals = false;  // subnormal results become zero of the same sign
};

inline int man_bits(Fmt f) { return f == Fmt::e4m3 ? 3 : 2; }
inline int bias(Fmt f) { return f == Fmt::e4m3 ? 7 : 15; }

// Value of a non-negative code 0x00..0x7F; NaN / Inf as such.
inline double value(Fmt f, int code) {
    const int m = man_bits(f), e = (code >> m) & (f == Fmt::e4m3 ? 0xF : 0x1F), man = code & ((1 << m) - 1);
    double mag;
    if (f == Fmt::e4m3 && e == 0xF && man == 0x7)
        mag = NAN;
    else if (f == Fmt::e5m2 && e == 0x1F)
        mag = man == 0 ? INFINITY : NAN;
    else if (e == 0)
        mag = std::ldexp(man, 1 - bias(f) - m);
    else
        mag = std::ldexp(1.0 + std::ldexp(man, -m), e - bias(f));
    return (code & 0x80) ? -mag : mag;
}

inline int max_code(Fmt f) { return f == Fmt::e4m3 ? 0x7E : 0x7B; }

inline std::uint8_t convert(const Kernel& k, double x) {
    const Fmt f = k.fmt;
    const int sign = std::signbit(x) ? 0x80 : 0;
    if (std::isnan(x)) {
        if (f == Fmt::e5m2 && k.nan_quiet) return static_cast<std::uint8_t>(0x7E | (k.nan_signed ? sign : 0));
        return static_cast<std::uint8_t>(0x7F | (k.nan_signed ? sign : 0));
    }
    auto overflow = [&]() -> std::uint8_t {
        if (k.saturate) return static_cast<std::uint8_t>(max_code(f) | sign);
        return static_cast<std::uint8_t>((f == Fmt::e5m2 ? 0x7C : 0x7F) | sign);
    };
    const double a = std::fabs(x);
    if (std::isinf(x)) return overflow();
    const int top = max_code(f);
    // Codes 0..top ascend with their values: a table and a binary search.
    static const std::vector<double> t4 = [] {
        std::vector<double> t;
        for (int c = 0; c <= 0x7E; ++c) t.push_back(value(Fmt::e4m3, c));
        return t;
    }();
    static const std::vector<double> t5 = [] {
        std::vector<double> t;
        for (int c = 0; c <= 0x7B; ++c) t.push_back(value(Fmt::e5m2, c));
        return t;
    }();
    const std::vector<double>& t = f == Fmt::e4m3 ? t4 : t5;
    const double maxv = t[static_cast<std::size_t>(top)];
    const double beyond = maxv + std::ldexp(1.0, (f == Fmt::e4m3 ? 8 : 15) - man_bits(f));
    const int lo = static_cast<int>(std::upper_bound(t.begin(), t.end(), a) - t.begin()) - 1;  // largest <= a
    const double lv = t[static_cast<std::size_t>(lo)];
    int code;
    if (lv == a) {
        code = lo;
    } else {
        const int hi = lo + 1;  // top + 1 stands for "beyond"
        const double hv = lo == top ? beyond : t[static_cast<std::size_t>(hi)];
        if (a >= beyond) return overflow();
        bool up;
        switch (k.round) {
            case Round::trunc: up = false; break;
            case Round::away: up = a - lv >= hv - a; break;
            default: up = (a - lv > hv - a) || (a - lv == hv - a && (hi % 2) == 0); break;
        }
        code = up ? hi : lo;
        if (code > top) return overflow();
    }
    if (k.flush_subnormals && code < (1 << man_bits(f))) code = 0;
    return static_cast<std::uint8_t>(code | sign);
}

// Is |x| exactly halfway between two neighbouring finite codes (or max and the next value past it)?
inline bool is_tie(Fmt f, double x) {
    const Kernel down{f, Round::trunc, true};
    const double a = std::fabs(x);
    if (!std::isfinite(a)) return false;
    const int lo = convert(down, a);
    const double lv = value(f, lo);
    const double hv =
        lo == max_code(f) ? lv + std::ldexp(1.0, (f == Fmt::e4m3 ? 8 : 15) - man_bits(f)) : value(f, lo + 1);
    return a != lv && a - lv == hv - a;
}

inline float f32(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}

// float32 -> bfloat16 -> float32, round to nearest even (finite inputs), by the usual bit trick.
inline float via_bf16(float x) {
    if (std::isnan(x)) return x;
    std::uint32_t b = bits(x);
    b += 0x7FFFu + ((b >> 16) & 1u);
    return f32(b & 0xFFFF0000u);
}
// float32 -> float16 -> float32 by the CPU's own F16C conversion (IEEE, round to nearest even;
// _Float16 would be the compiler's, but clang 14, which builds the sanitizer suite, has none on
// x86-64). Every x86-64 machine this project tests on has F16C (test_simd_encode checks AVX2).
__attribute__((target("f16c"))) inline float via_f16(float x) {
    return _cvtsh_ss(_cvtss_sh(x, _MM_FROUND_TO_NEAREST_INT));
}
// The float16 with bits h, by the same conversion.
__attribute__((target("f16c"))) inline float from_f16(std::uint16_t h) { return _cvtsh_ss(h); }

}  // namespace naive
