// Python's text for numbers and strings (io/python_text.hpp).
#include "fp8kit/io/python_text.hpp"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>

#include <fmt/format.h>

namespace fp8kit::io {

namespace {

// The shortest round-trip digits of a finite, non-negative v and its decimal exponent decpt
// (v = 0.d1d2...dn x 10^decpt), from std::to_chars' shortest scientific form d1.d2...dne±XX.
// Both it and Python's repr (David Gay's dtoa, mode 0) give the shortest digits that read back to
// v, the nearest to v among them.
int shortest_digits(double v, char* digits, int& n) {
    char buf[32];
    const auto res = std::to_chars(buf, buf + sizeof buf - 1, v, std::chars_format::scientific);
    *res.ptr = '\0';  // the exponent's end for atoi
    const char* e = buf;
    n = 0;
    for (; e < res.ptr && *e != 'e'; ++e)
        if (*e != '.') digits[n++] = *e;
    return std::atoi(e + 1) + 1;  // d1.d2... x 10^x = 0.d1d2... x 10^(x + 1)
}

}  // namespace

void append_python_float(std::string& out, double v, bool json) {
    if (std::isnan(v)) {
        out += json ? "NaN" : "nan";
        return;
    }
    if (std::isinf(v)) {
        out += v > 0 ? (json ? "Infinity" : "inf") : (json ? "-Infinity" : "-inf");
        return;
    }
    if (std::signbit(v)) out += '-';
    char d[32];
    int n = 0;
    const int decpt = shortest_digits(std::fabs(v), d, n);
    if (decpt <= -4 || decpt > 16) {  // 1. exponent form (format_float_short's use_exp for 'r')
        out += d[0];
        if (n > 1) {
            out += '.';
            out.append(d + 1, n - 1);
        }
        const int x = decpt - 1;
        out += x < 0 ? "e-" : "e+";
        if (std::abs(x) < 10) out += '0';
        out += fmt::format_int(std::abs(x)).c_str();
    } else if (decpt <= 0) {  // 2. 0.000ddd
        out += "0.";
        out.append(static_cast<std::size_t>(-decpt), '0');
        out.append(d, n);
    } else if (decpt < n) {  // 3. ddd.ddd
        out.append(d, decpt);
        out += '.';
        out.append(d + decpt, n - decpt);
    } else {  // 4. an integer: ddd000.0 (Py_DTSF_ADD_DOT_0)
        out.append(d, n);
        out.append(static_cast<std::size_t>(decpt - n), '0');
        out += ".0";
    }
}

namespace {

// The next code point of UTF-8 text at s[i], advancing i; -1 when the bytes are not UTF-8.
long next_code_point(std::string_view s, std::size_t& i) {
    const auto b = static_cast<unsigned char>(s[i++]);
    if (b < 0x80) return b;
    const int more = b >= 0xF0 && b < 0xF5 ? 3 : b >= 0xE0 ? 2 : b >= 0xC2 && b < 0xE0 ? 1 : -1;
    if (more < 0 || i + more > s.size()) return -1;
    long cp = b & (0x3F >> more);
    for (int k = 0; k < more; ++k) {
        const auto c = static_cast<unsigned char>(s[i++]);
        if ((c & 0xC0) != 0x80) return -1;
        cp = cp << 6 | (c & 0x3F);
    }
    static constexpr long kLeast[] = {0, 0x80, 0x800, 0x10000};
    if (cp < kLeast[more] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return -1;
    return cp;
}

}  // namespace

bool append_python_json_string(std::string& out, std::string_view s) {
    const std::size_t start = out.size();
    out += '"';
    for (std::size_t i = 0; i < s.size();) {
        const long cp = next_code_point(s, i);
        if (cp < 0) {
            out.resize(start);
            return false;
        }
        switch (cp) {
            case '"': out += "\\\""; continue;
            case '\\': out += "\\\\"; continue;
            case '\n': out += "\\n"; continue;
            case '\r': out += "\\r"; continue;
            case '\t': out += "\\t"; continue;
            case '\b': out += "\\b"; continue;
            case '\f': out += "\\f"; continue;
            default: break;
        }
        if (cp >= 0x20 && cp < 0x7F) {
            out += static_cast<char>(cp);
        } else if (cp < 0x10000) {
            fmt::format_to(std::back_inserter(out), "\\u{:04x}", cp);
        } else {
            const long u = cp - 0x10000;
            fmt::format_to(std::back_inserter(out), "\\u{:04x}\\u{:04x}", 0xD800 | (u >> 10), 0xDC00 | (u & 0x3FF));
        }
    }
    out += '"';
    return true;
}

}  // namespace fp8kit::io
