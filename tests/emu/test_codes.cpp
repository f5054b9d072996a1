// All codes of every format (2^bits: 16, 64 or 256): value, class, limits, round trip and order.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/format_info.hpp"

using namespace fp8kit;
using emu::Format;

namespace {

// Value of a code from its fields by the textbook formula, independently of emu::convert.
double value_from_fields(int e_bits, int m_bits, int bias, bool has_sign, bool subnormals, unsigned code) {
    const unsigned man = code & ((1u << m_bits) - 1);
    const unsigned exp = (code >> m_bits) & ((1u << e_bits) - 1);
    const bool neg = has_sign && ((code >> (e_bits + m_bits)) & 1);
    double v;
    if (subnormals && exp == 0)
        v = std::ldexp(static_cast<double>(man), 1 - bias - m_bits);
    else
        v = std::ldexp(1.0 + std::ldexp(static_cast<double>(man), -m_bits), static_cast<int>(exp) - bias);
    return neg ? -v : v;
}

struct Expect {
    Format f;
    int e, m, bias;
    bool sign, subnormals;
    double max, min_normal, min_sub;
};
const Expect kExpect[] = {
    {Format::e4m3, 4, 3, 7, true, true, 448.0, 0x1p-6, 0x1p-9},
    {Format::e5m2, 5, 2, 15, true, true, 57344.0, 0x1p-14, 0x1p-16},
    {Format::e4m3fnuz, 4, 3, 8, true, true, 240.0, 0x1p-7, 0x1p-10},
    {Format::e5m2fnuz, 5, 2, 16, true, true, 57344.0, 0x1p-15, 0x1p-17},
    {Format::e8m0, 8, 0, 127, false, false, 0x1p127, 0x1p-127, 0x1p-127},
    // OCP MX v1.0 section 5.3.3 (FP6, FP4); ml_dtypes finfo for the other three.
    {Format::e2m1, 2, 1, 1, true, true, 6.0, 1.0, 0.5},
    {Format::e2m3, 2, 3, 1, true, true, 7.5, 1.0, 0.125},
    {Format::e3m2, 3, 2, 3, true, true, 28.0, 0.25, 0.0625},
    {Format::e3m4, 3, 4, 3, true, true, 15.5, 0.25, 0x1p-6},
    {Format::e4m3b11fnuz, 4, 3, 11, true, true, 30.0, 0x1p-10, 0x1p-13},
    {Format::e4m3ieee, 4, 3, 7, true, true, 240.0, 0x1p-6, 0x1p-9},
};

std::vector<std::uint8_t> range(unsigned lo, unsigned hi) {  // [lo, hi]
    std::vector<std::uint8_t> v;
    for (unsigned c = lo; c <= hi; ++c) v.push_back(static_cast<std::uint8_t>(c));
    return v;
}
std::vector<std::uint8_t> join(std::vector<std::uint8_t> a, const std::vector<std::uint8_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}

}  // namespace

TEST_CASE("limits derived from the traits equal the published tables", "[emu][codes]") {
    for (const auto& x : kExpect) {
        CAPTURE(name(x.f));
        const FormatInfo i = format_info(x.f);
        CHECK(i.max_finite == x.max);
        CHECK(i.min_normal == x.min_normal);
        CHECK(i.min_subnormal == x.min_sub);
        CHECK(i.bias == x.bias);
    }
    CHECK(format_info(Format::e4m3).nan_codes == std::vector<std::uint8_t>{0x7F, 0xFF});
    CHECK(format_info(Format::e5m2).nan_codes == std::vector<std::uint8_t>{0x7D, 0x7E, 0x7F, 0xFD, 0xFE, 0xFF});
    CHECK(format_info(Format::e5m2).inf_codes == std::vector<std::uint8_t>{0x7C, 0xFC});
    CHECK(format_info(Format::e4m3fnuz).nan_codes == std::vector<std::uint8_t>{0x80});
    CHECK(format_info(Format::e5m2fnuz).nan_codes == std::vector<std::uint8_t>{0x80});
    CHECK(format_info(Format::e8m0).nan_codes == std::vector<std::uint8_t>{0xFF});
    for (Format f : {Format::e2m1, Format::e2m3, Format::e3m2}) {  // every pattern is a number
        CHECK(format_info(f).nan_codes.empty());
        CHECK(format_info(f).inf_codes.empty());
    }
    CHECK(format_info(Format::e2m1).code_count == 16);
    CHECK(format_info(Format::e2m3).code_count == 64);
    CHECK(format_info(Format::e3m4).nan_codes == join(range(0x71, 0x7F), range(0xF1, 0xFF)));
    CHECK(format_info(Format::e3m4).inf_codes == std::vector<std::uint8_t>{0x70, 0xF0});
    CHECK(format_info(Format::e4m3ieee).nan_codes == join(range(0x79, 0x7F), range(0xF9, 0xFF)));
    CHECK(format_info(Format::e4m3ieee).inf_codes == std::vector<std::uint8_t>{0x78, 0xF8});
    CHECK(format_info(Format::e4m3b11fnuz).nan_codes == std::vector<std::uint8_t>{0x80});
}

TEST_CASE("every code decodes to the value its fields give", "[emu][codes]") {
    for (const auto& x : kExpect) {
        const FormatInfo info = format_info(x.f);
        for (unsigned c = 0; c < static_cast<unsigned>(info.code_count); ++c) {
            CAPTURE(name(x.f), c);
            const CodeClass k = classify(x.f, static_cast<std::uint8_t>(c));
            const double v = decode_value(x.f, static_cast<std::uint8_t>(c));
            if (k == CodeClass::nan) {
                CHECK(std::isnan(v));
                continue;
            }
            if (k == CodeClass::infinity) {
                CHECK(std::isinf(v));
                continue;
            }
            CHECK(v == value_from_fields(x.e, x.m, x.bias, x.sign, x.subnormals, c));
            if (k == CodeClass::zero) CHECK(std::signbit(v) == (c == info.sign_mask));
        }
    }
}

TEST_CASE("encode(decode(c)) == c for every non-NaN code, from every wide type", "[emu][codes]") {
    const emu::Policy p{emu::Rounding::nearest_even, emu::Overflow::no_saturate, emu::NanEncoding::signed_all_ones};
    for (Format f : emu::kAllFormats) {
        for (emu::Wide w : emu::kAllWide) {
            if (f == Format::e8m0 && w == emu::Wide::f16) continue;  // E8M0's range exceeds binary16
            for (int c = 0; c < emu::code_count(f); ++c) {
                const auto code = static_cast<std::uint8_t>(c);
                if (classify(f, code) == CodeClass::nan) continue;
                CAPTURE(fp8kit::name(f), fp8kit::name(w), c);
                CHECK(emu::encode(f, w, emu::decode(f, w, code), p) == code);
            }
        }
    }
}

TEST_CASE("codes are ordered: larger positive code, larger value", "[emu][codes]") {
    for (Format f : emu::kAllFormats) {
        const FormatInfo i = format_info(f);
        double prev = -1;
        for (unsigned c = 0; c <= i.max_finite_code; ++c) {
            const double v = decode_value(f, static_cast<std::uint8_t>(c));
            CAPTURE(fp8kit::name(f), c);
            CHECK(v > prev);
            prev = v;
            if (i.has_sign && c != 0) CHECK(decode_value(f, static_cast<std::uint8_t>(c | i.sign_mask)) == -v);
        }
    }
}
