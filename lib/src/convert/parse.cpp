#include "fp8kit/convert/parse.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace fp8kit {

std::optional<double> parse_number(std::string_view text) {
    if (text.empty() || text.size() > 4096) return std::nullopt;
    const std::string s(text);  // strtod needs a terminator
    if (std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const double d = std::strtod(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    // ERANGE on overflow gives +-HUGE_VAL: a number too large for binary64 is a user error,
    // not Inf; underflow to a subnormal or zero is the correctly rounded result and is kept.
    if (errno == ERANGE && std::isinf(d)) return std::nullopt;
    return d;
}

std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t max) {
    int base = 10;
    if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
        base = 16;
        text.remove_prefix(2);
    } else if (text.size() > 2 && text[0] == '0' && (text[1] == 'b' || text[1] == 'B')) {
        base = 2;
        text.remove_prefix(2);
    }
    if (text.empty() || text.size() > 64) return std::nullopt;
    std::uint64_t v = 0;
    for (char c : text) {
        int digit;
        if (c >= '0' && c <= '9')
            digit = c - '0';
        else if (c >= 'a' && c <= 'f')
            digit = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            digit = c - 'A' + 10;
        else
            return std::nullopt;
        if (digit >= base) return std::nullopt;
        if (v > (max - static_cast<std::uint64_t>(digit)) / static_cast<std::uint64_t>(base)) return std::nullopt;
        v = v * static_cast<std::uint64_t>(base) + static_cast<std::uint64_t>(digit);
    }
    return v;
}

std::optional<float> parse_float32(std::string_view text) {
    const std::string s(text);
    if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const float f = std::strtof(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    if (errno == ERANGE && std::isinf(f)) return std::nullopt;
    return f;
}

}  // namespace fp8kit
