// Python-syntax module patterns through POSIX regexec (name_pattern.hpp).
#include "checkpoint/name_pattern.hpp"

#include <regex.h>

#include <cctype>
#include <cstring>

namespace fp8kit::checkpoint::detail {

std::optional<std::string> python_re_to_ere(std::string_view p) {
    std::string out;
    bool in_class = false;
    std::size_t class_start = 0;  // where the class's members begin in `out`
    for (std::size_t i = 0; i < p.size(); ++i) {
        const char c = p[i];
        if (c == '\\') {
            if (++i == p.size()) return std::nullopt;
            const char e = p[i];
            if (e == 'd') {
                out += in_class ? "0-9" : "[0-9]";
            } else if (e == 'D' && !in_class) {
                out += "[^0-9]";
            } else if (std::isalnum(static_cast<unsigned char>(e))) {
                // \s \S \w \W are GNU ERE too; \b \B (word boundaries) as well outside a class.
                if (in_class || !std::strchr("sSwWbB", e)) return std::nullopt;
                out += '\\';
                out += e;
            } else if (in_class) {
                // Inside a bracket expression a backslash is literal in ERE: the character alone,
                // except the ones that would change the class's meaning there.
                if (std::strchr("]^-\\", e)) return std::nullopt;
                out += e;
            } else {
                out += '\\';
                out += e;
            }
            continue;
        }
        if (in_class) {
            if (c == ']' && out.size() > class_start) in_class = false;
            out += c;
            continue;
        }
        if (c == '[') {
            in_class = true;
            out += c;
            if (i + 1 < p.size() && p[i + 1] == '^') out += p[++i];
            class_start = out.size();
            continue;
        }
        if (c == '(' && i + 1 < p.size() && p[i + 1] == '?') {
            if (i + 2 < p.size() && p[i + 2] == ':') {
                out += '(';
                i += 2;
                continue;
            }
            return std::nullopt;  // lookaround, named groups, inline flags
        }
        out += c;
        // A lazy quantifier (*? +? ?? {m,n}?) finds a match exactly where the greedy one does.
        if (std::strchr("*+?}", c) && i + 1 < p.size() && p[i + 1] == '?') ++i;
    }
    if (in_class) return std::nullopt;
    return out;
}

bool re_search(std::string_view pattern, const std::string& name) {
    const auto ere = python_re_to_ere(pattern);
    if (!ere) return false;
    regex_t re;
    if (::regcomp(&re, ere->c_str(), REG_EXTENDED) != 0) return false;
    // REG_STARTEND: the whole name, a NUL in it included.
    regmatch_t m{0, static_cast<regoff_t>(name.size())};
    const bool hit = ::regexec(&re, name.data(), 1, &m, REG_STARTEND) == 0;
    ::regfree(&re);
    return hit;
}

}  // namespace fp8kit::checkpoint::detail
