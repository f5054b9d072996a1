// Host simulation of the float stochastic step (cuda/src/element.cuh: stochastic_grid_float,
// float_step_range) against the reference, emu::convert. It re-types the device formula with host
// float operations (std::fma under FE_TOWARDZERO for fma.rz, clamping for .sat, a 64-bit
// multiply-add for mad.wide.u32), so it checks the derivation, not the kernel: the kernel is
// checked against lib's encode_array on the GPU (tests/gpu/test_kernels.cpp, "f16 / bf16
// stochastic quantize ... equals the reference over many random words").
//
// 1. 200,000 float32 y with random mantissa, sign and random word for each of the 256 exponents,
//    and edge mantissas with edge random words: the step's value encoded by nearest-even must
//    equal the stochastic code of y, under a cvt-path policy (saturate-all, canonical NaN), into
//    E4M3, E4M3FNUZ, E5M2 and E5M2FNUZ. NaN inputs are skipped: the kernels never give the step
//    one (encode16: finite16 on kSrCvt, the ranges' `from` on kSrTable). Under the cvt-path
//    policy into E4M3 and E5M2 the code of |v| with y's sign bit OR-ed in (sign_bytes) must
//    equal that code too.
// 2. Every f16 and bf16 input at eight scales (powers of two and not), four random words each,
//    under the cvt-path policy and a table-path policy (saturate-finite, signed all-ones NaN) for
//    the inputs below float_step_range's `from`: the same comparison (outside: counted apart).
// 3. The step without the random word's low bits (f = 2^F): how many of 2^24 bf16 inputs (odd m)
//    2^-30 at scale 1 into E4M3 it gets wrong, which shows that the low bits are needed.
//
// Build and run (about a minute):
//   g++ -O2 -std=c++20 -frounding-math -Iemu/include cuda/tools/float_step_sim.cpp && ./a.out
#include <algorithm>
#include <cfenv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <type_traits>

#include "fp8kit/emu/emu.hpp"

using namespace fp8kit::emu;

namespace {

float f_of(std::uint32_t b) {
    float f;
    std::memcpy(&f, &b, 4);
    return f;
}
std::uint32_t b_of(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}

float fma_rz(float a, float b, float c) {
    std::fesetround(FE_TOWARDZERO);
    const volatile float r = std::fma(a, b, c);
    std::fesetround(FE_TONEAREST);
    return r;
}
float sat(float x) { return std::isnan(x) ? 0.0f : std::min(std::max(x, 0.0f), 1.0f); }

// stochastic_grid_float<D>(w, scale, random), on y = |w| * scale with w's sign; low_bits false
// drops the random word's low bits (part 3).
template <class D>
std::uint32_t float_step(std::uint32_t w, float scale, std::uint32_t random, bool low_bits = true) {
    constexpr int M = D::man_bits, kShift = 23 - M, F = D::emin - M - 9;
    const std::uint32_t kF = static_cast<std::uint32_t>(F + 127) << 23, kLow = (1u << (32 - kShift)) - 1u;
    const float a = f_of(w & 0x7FFFFFFFu) * scale;
    const float cu = sat(std::fma(a, -std::ldexp(1.0f, 24 - D::emin), 16777216.0f));
    const float f = f_of(kF | (low_bits ? random & kLow : 0u));
    const float inner = fma_rz(f, cu, a);
    const float t = fma_rz(cu, std::ldexp(1.0f, D::emin) - f_of(kF), inner);
    const std::uint32_t tb = b_of(t);
    const std::uint64_t p = std::uint64_t{tb} * (1u << (32 - kShift)) + random;
    const std::uint32_t v = static_cast<std::uint32_t>(p >> 32) << kShift;
    // step_bits' add form (cuda/src/element.cuh: f16 inputs, and bf16 on the cvt path) must give the same bits.
    if (((tb + (random >> (32 - kShift))) & ~((1u << kShift) - 1u)) != v) {
        std::fprintf(stderr, "step_bits: add form != multiply-add form at t = 0x%08x, random = 0x%08x\n", tb, random);
        std::abort();
    }
    return b_of(std::fma(cu, -std::ldexp(1.0f, D::emin), f_of(v))) | (w & 0x80000000u);
}

// float_step_range's `from` (kSrTable) for inputs with bias B and M mantissa bits.
std::uint32_t table_from(bool bf16, float scale) {
    const int B = bf16 ? 127 : 15, M = bf16 ? 7 : 10;
    const std::uint32_t nan = (static_cast<std::uint32_t>(2 * B + 1) << M) + 1;
    const int eb = 126 - (static_cast<int>(b_of(scale) >> 23) - 127) + B;
    return eb > 2 * B ? nan : eb <= 0 ? 0u : std::min(static_cast<std::uint32_t>(eb) << M, nan);
}

std::uint32_t widen(bool bf16, std::uint16_t x) {
    if (bf16) return std::uint32_t{x} << 16;
    return convert<Binary16, Binary32>(
        x, Policy{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet_payload}, 0);
}

struct Tally {
    long long n = 0, bad = 0;
};

// One comparison: the step's value v encoded by nearest-even against the stochastic code of y
// (y not a NaN). Under the cvt-path policy into E4M3 / E5M2 also the code of |v| with y's sign
// bit OR-ed in (sign_bytes in cuda/src/element.cuh).
template <class D>
bool same(std::uint32_t y, std::uint32_t v, std::uint32_t random, const Policy& sr) {
    const Policy ne{Rounding::nearest_even, sr.overflow, sr.nan};
    const std::uint8_t code = convert<Binary32, D>(y, sr, random);
    bool ok = code == convert<Binary32, D>(v, ne, 0);
    constexpr bool kOcp = std::is_same_v<D, E4M3> || std::is_same_v<D, E5M2>;
    if (kOcp && sr.overflow == Overflow::saturate_all && sr.nan == NanEncoding::canonical)
        ok &= code == (convert<Binary32, D>(v & 0x7FFFFFFFu, ne, 0) | ((y >> 31) << 7));
    return ok;
}

template <class D>
long long check_format(const char* name) {
    std::mt19937 g(5);
    const Policy cvt{Rounding::stochastic, Overflow::saturate_all, NanEncoding::canonical};
    const Policy table{Rounding::stochastic, Overflow::saturate_finite, NanEncoding::signed_all_ones};
    Tally all;
    for (std::uint32_t e = 0; e < 256; ++e)
        for (int j = 0; j < 200000; ++j) {
            const std::uint32_t y = (e << 23) | (g() & 0x807FFFFFu), r = g();
            if (std::isnan(f_of(y))) continue;
            ++all.n;
            all.bad += !same<D>(y, float_step<D>(y, 1.0f, r), r, cvt);
        }
    for (std::uint32_t e = 90; e < 140; ++e)
        for (std::uint32_t m : {0u, 1u, 0x7FFFFFu, 0x400000u, 0x3FFFFFu, 0x7FF000u, 0xFFFu})
            for (std::uint32_t r : {0u, 1u, 0xFFFFFFFFu, 0x80000000u, 0xFFFu, 0x1000u, 0xFFFFF000u, 0x7FFu, 0x800u})
                for (std::uint32_t s : {0u, 0x80000000u}) {
                    const std::uint32_t y = s | (e << 23) | m;
                    ++all.n;
                    all.bad += !same<D>(y, float_step<D>(y, 1.0f, r), r, cvt);
                }
    std::printf("%-9s float32, every exponent: %lld checked, %lld mismatches\n", name, all.n, all.bad);
    long long bad = all.bad;
    const float scales[] = {1.0f, 0.5f, 0.37f, 3.1f, 1e-3f, 7.77e-5f, 1e5f, std::ldexp(1.0f, 112)};
    for (int bf16 = 0; bf16 < 2; ++bf16)
        for (int tab = 0; tab < 2; ++tab) {
            const Policy& sr = tab ? table : cvt;
            Tally in;
            long long outside = 0;
            for (float scale : scales) {
                const std::uint32_t from = tab ? table_from(bf16, scale) : 0x8000u;
                for (std::uint32_t x = 0; x < 65536; ++x) {
                    if ((x & 0x7FFF) >= from) {
                        ++outside;
                        continue;
                    }
                    const std::uint32_t w = widen(bf16, static_cast<std::uint16_t>(x));
                    if (std::isnan(f_of(w))) continue;
                    const std::uint32_t y = b_of(f_of(w) * scale);
                    for (int j = 0; j < 4; ++j) {
                        const std::uint32_t r = g();
                        ++in.n;
                        in.bad += !same<D>(y, float_step<D>(w, scale, r), r, sr);
                    }
                }
            }
            std::printf("%-9s %-4s %-5s, 8 scales: %lld checked, %lld mismatches (%lld inputs outside `from`)\n", name,
                        bf16 ? "bf16" : "f16", tab ? "table" : "cvt", in.n, in.bad, outside);
            bad += in.bad;
        }
    return bad;
}

long long without_low_bits() {
    std::mt19937 g(11);
    const Policy sr{Rounding::stochastic, Overflow::saturate_all, NanEncoding::canonical};
    long long bad = 0;
    const long long n = 1ll << 24;
    for (long long i = 0; i < n; ++i) {
        const std::uint32_t m = 129 + 2 * static_cast<std::uint32_t>((i / 16) % 64);
        const std::uint32_t w = b_of(std::ldexp(static_cast<float>(m), -30)) | ((i / 1024) % 2 ? 0x80000000u : 0u);
        const std::uint32_t r = g();
        bad += !same<E4M3>(w, float_step<E4M3>(w, 1.0f, r, false), r, sr);
    }
    std::printf("bf16 (odd m) 2^-30 at scale 1 without the random word's low bits: %lld of %lld wrong\n", bad, n);
    return bad;
}

}  // namespace

int main() {
    const long long bad = check_format<E4M3>("e4m3") + check_format<E4M3FNUZ>("e4m3fnuz") + check_format<E5M2>("e5m2") +
                          check_format<E5M2FNUZ>("e5m2fnuz");
    const long long dropped = without_low_bits();
    const bool pass = bad == 0 && dropped > 0;
    std::printf("%s\n", pass ? "PASS: exact, and the random word's low bits are needed" : "FAIL");
    return pass ? 0 : 1;
}
