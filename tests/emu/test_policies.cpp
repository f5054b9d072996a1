// Every rounding mode against a brute-force search over the format's values (long double
// comparisons, no bit tricks), on all float16 inputs and on random doubles.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/format_info.hpp"

using namespace fp8kit;
using emu::Overflow;
using emu::Rounding;

namespace {

struct Grid {
    std::vector<long double> values;  // finite values, ascending, one zero
    std::vector<std::uint8_t> codes;
    long double max;
    long double beyond;  // the next value past max in the same format with unbounded exponent
};

Grid grid(Format f) {
    Grid g;
    std::vector<std::pair<long double, std::uint8_t>> v;
    for (int c = 0; c < emu::code_count(f); ++c) {
        const auto k = classify(f, static_cast<std::uint8_t>(c));
        if (k == CodeClass::nan || k == CodeClass::infinity || (k == CodeClass::zero && c != 0)) continue;
        v.emplace_back(decode_value(f, static_cast<std::uint8_t>(c)), static_cast<std::uint8_t>(c));
    }
    std::sort(v.begin(), v.end());
    for (auto& [x, c] : v) {
        g.values.push_back(x);
        g.codes.push_back(c);
    }
    g.max = g.values.back();
    const FormatInfo i = format_info(f);
    g.beyond = g.max + std::ldexp(1.0L, i.emax - i.man_bits);
    return g;
}

bool even_code(std::uint8_t c) { return (c & 1) == 0; }

// Expected value (as long double; +-inf marks overflow) of rounding x, brute force.
long double expected(const Grid& g, long double x, Rounding r) {
    // The rule under test: overflow is decided on the magnitude rounded with an unbounded
    // exponent, whatever the direction. At or past `beyond` every mode overflows.
    if (std::fabs(x) >= g.beyond) return std::copysign(INFINITY, x);
    const auto it = std::lower_bound(g.values.begin(), g.values.end(), x);
    if (it != g.values.end() && *it == x) return x;
    const long double hi = it == g.values.end() ? g.beyond : *it;
    const long double lo = it == g.values.begin() ? -g.beyond : *(it - 1);
    const std::size_t hi_i = static_cast<std::size_t>(it - g.values.begin());
    auto pick = [&](long double v) { return std::fabs(v) > g.max ? std::copysign(INFINITY, v) : v; };
    switch (r) {
        case Rounding::toward_positive: return pick(hi);
        case Rounding::toward_negative: return pick(lo);
        case Rounding::toward_zero: return pick(x > 0 ? lo : hi);
        case Rounding::nearest_away:
        case Rounding::nearest_even: {
            const long double dl = x - lo, dh = hi - x;
            if (dl < dh) return pick(lo);
            if (dh < dl) return pick(hi);
            if (r == Rounding::nearest_away) return pick(x > 0 ? hi : lo);
            // Tie: the even code; past the grid, the continuation of the top binade is even iff max is odd.
            const bool hi_even = hi_i < g.codes.size() ? even_code(g.codes[hi_i]) : !even_code(g.codes.back());
            return pick(hi_even ? hi : lo);
        }
        default: return NAN;
    }
}

// `overflowed`: emu::overflows for the same input and policy, which must agree with the brute force.
void check_mode(Format f, Rounding r, long double x, std::uint8_t code, bool overflowed) {
    static const std::vector<Grid> grids = [] {
        std::vector<Grid> gs;
        for (Format g : emu::kAllFormats) gs.push_back(grid(g));  // kAllFormats is in enum order
        return gs;
    }();
    const Grid& g = grids.at(static_cast<std::size_t>(f));
    const long double want = expected(g, x, r);
    const auto k = classify(f, code);
    CAPTURE(fp8kit::name(f), fp8kit::name(r), static_cast<double>(x), int(code));
    CHECK(overflowed == std::isinf(want));
    if (std::isinf(want) && !format_info(f).has_nan) {
        // Nothing past max (OCP MX FP4/FP6): overflow saturates under every policy.
        CHECK(static_cast<long double>(decode_value(f, code)) == std::copysign(g.max, want));
    } else if (std::isinf(want)) {
        CHECK((k == CodeClass::nan || k == CodeClass::infinity));
    } else {
        REQUIRE((k != CodeClass::nan && k != CodeClass::infinity));
        CHECK(static_cast<long double>(decode_value(f, code)) == want);
    }
}

const Rounding kDeterministic[] = {Rounding::nearest_even, Rounding::nearest_away, Rounding::toward_zero,
                                   Rounding::toward_positive, Rounding::toward_negative};

}  // namespace

TEST_CASE("every deterministic rounding mode picks the brute-force neighbour (all float16 inputs)", "[emu][policy]") {
    for (Format f : emu::kAllFormats) {
        if (f == Format::e8m0) continue;  // no zero and no sign: the random-double case covers it
        for (Rounding r : kDeterministic) {
            const emu::Policy p{r, Overflow::no_saturate, emu::NanEncoding::canonical};
            for (std::uint32_t b = 0; b < 65536; ++b) {
                const double x = [&] {  // the float16 value, exactly
                    const std::uint64_t d =
                        emu::convert<emu::Binary16, emu::Binary64>(static_cast<std::uint16_t>(b), emu::kDecodePolicy);
                    double v;
                    std::memcpy(&v, &d, 8);
                    return v;
                }();
                if (!std::isfinite(x) || x == 0) continue;
                check_mode(f, r, x, emu::encode(f, emu::Wide::f16, b, p), emu::overflows(f, emu::Wide::f16, b, p));
            }
        }
    }
}

TEST_CASE("every deterministic rounding mode picks the brute-force neighbour (random doubles)", "[emu][policy]") {
    std::uint64_t s = 12345;
    auto next = [&] {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        return s;
    };
    for (Format f : emu::kAllFormats) {
        const FormatInfo info = format_info(f);
        for (int i = 0; i < 20000; ++i) {
            // Magnitudes spread over the format's whole range and a few binades beyond.
            const int e =
                info.emin - info.man_bits - 3 + static_cast<int>(next() % (info.emax - info.emin + info.man_bits + 8));
            double x = std::ldexp(1.0 + static_cast<double>(next() >> 11) * 0x1p-53, e);
            if (info.has_sign && (next() & 1)) x = -x;
            if (f == Format::e8m0 && x < info.min_normal) continue;  // no zero: underflow is clamped, checked elsewhere
            std::uint64_t b;
            std::memcpy(&b, &x, 8);
            for (Rounding r : kDeterministic) {
                const emu::Policy p{r, Overflow::no_saturate, emu::NanEncoding::canonical};
                check_mode(f, r, x, emu::encode(f, emu::Wide::f64, b, p), emu::overflows(f, emu::Wide::f64, b, p));
            }
        }
    }
}

TEST_CASE("stochastic rounding adds 32 random bits just below the last kept bit", "[emu][policy]") {
    const emu::Policy sr{Rounding::stochastic, Overflow::saturate_all, emu::NanEncoding::canonical};
    auto enc = [&](float x, std::uint32_t rnd) {
        std::uint32_t b;
        std::memcpy(&b, &x, 4);
        return emu::convert<emu::Binary32, emu::E4M3>(b, sr, rnd);
    };
    // 1.0 + 1/32 lies a quarter of the way from 1.0 (0x38) to 1.125 (0x39): the dropped fraction
    // is 0x40000000 in 32 bits, so it rounds up exactly when random >= 0xC0000000.
    const float x = 1.0f + 1.0f / 32;
    CHECK(enc(x, 0) == 0x38);
    CHECK(enc(x, 0xBFFFFFFFu) == 0x38);
    CHECK(enc(x, 0xC0000000u) == 0x39);
    CHECK(enc(x, 0xFFFFFFFFu) == 0x39);
    // Exact values never move; negative values round in magnitude the same way.
    CHECK(enc(1.0f, 0xFFFFFFFFu) == 0x38);
    CHECK(enc(-x, 0xC0000000u) == 0xB9);
    // Bits below the 32 are truncated: a fraction under 2^-32 of an ulp never rounds up.
    const float tiny_frac = 1.0f + 0x1p-23f;  // 2^-20 of an E4M3 ulp at 1.0 -> 0x00001000 in 32 bits
    CHECK(enc(tiny_frac, 0xFFFFEFFFu) == 0x38);
    CHECK(enc(tiny_frac, 0xFFFFF000u) == 0x39);
    // The same (seed, index) gives the same bits anywhere.
    CHECK(emu::stochastic_bits(42, 7) == emu::stochastic_bits(42, 7));
    CHECK(emu::stochastic_bits(42, 7) != emu::stochastic_bits(42, 8));
}

TEST_CASE("stochastic rounding is unbiased over the generator's bits", "[emu][policy]") {
    const emu::Policy sr{Rounding::stochastic, Overflow::saturate_all, emu::NanEncoding::canonical};
    // x = 1 + 3/64: 3/8 of the way from 1.0 to 1.125.
    const float x = 1.0f + 3.0f / 64;
    std::uint32_t b;
    std::memcpy(&b, &x, 4);
    int up = 0;
    const int n = 1 << 20;
    for (int i = 0; i < n; ++i) up += emu::convert<emu::Binary32, emu::E4M3>(b, sr, emu::stochastic_bits(1, i)) == 0x39;
    // Binomial(n, 3/8): standard deviation ~ 496; allow 6 sigma.
    CHECK(std::abs(up - n * 3 / 8) < 3000);
}
