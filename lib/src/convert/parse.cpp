#include "fp8kit/convert/parse.hpp"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <string>

namespace fp8kit {

namespace {

// `s` read whole by `convert` (strtod, strtof): nullopt for leading white space, characters left
// over, or a number too large for T. ERANGE on overflow gives +-HUGE_VAL: a number too large for
// T is a user error, not Inf; underflow to a subnormal or zero is the correctly rounded result
// and is kept.
template <class T, class Convert>
std::optional<T> parse_whole(const std::string& s, Convert convert) {
    if (s.empty() || std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
    char* end = nullptr;
    errno = 0;
    const T v = convert(s.c_str(), &end);
    if (end != s.c_str() + s.size()) return std::nullopt;
    if (errno == ERANGE && std::isinf(v)) return std::nullopt;
    return v;
}

}  // namespace

std::optional<double> parse_number(std::string_view text) {
    if (text.empty() || text.size() > 4096) return std::nullopt;
    // A copy: strtod needs a terminator.
    return parse_whole<double>(std::string(text), [](const char* p, char** end) { return std::strtod(p, end); });
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
    return parse_whole<float>(std::string(text), [](const char* p, char** end) { return std::strtof(p, end); });
}

}  // namespace fp8kit
