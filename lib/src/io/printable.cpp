// Escaping text from files before it reaches a terminal (docs/hardening.md, "What reaches the
// terminal").
#include "fp8kit/io/printable.hpp"

#include <fmt/format.h>

namespace fp8kit::io {

std::string printable(std::string_view s) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        // U+0080..U+009F are C1 controls (CSI is U+009B): in UTF-8, 0xC2 followed by 0x80..0x9F.
        if (c == 0xC2 && i + 1 < s.size() && static_cast<unsigned char>(s[i + 1]) >= 0x80 &&
            static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
            out += fmt::format("\\u{:04x}", static_cast<unsigned char>(s[i + 1]));
            ++i;
            continue;
        }
        switch (c) {
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            case 0x1B: out += "\\e"; break;
            case 0: out += "\\0"; break;
            default:
                if (c < 0x20 || c == 0x7F)
                    out += fmt::format("\\x{:02x}", c);
                else
                    out += static_cast<char>(c);
        }
    }
    return out;
}

std::string quoted(std::string_view s, std::size_t max) {
    if (s.size() <= max) return printable(s);
    // Cut at a character boundary: never in the middle of a UTF-8 sequence.
    std::size_t n = max;
    while (n > 0 && (static_cast<unsigned char>(s[n]) & 0xC0) == 0x80) --n;
    return fmt::format("{}... ({} bytes)", printable(s.substr(0, n)), s.size());
}

std::string quoted_list(const std::vector<std::string>& items, std::size_t shown) {
    std::string out;
    for (std::size_t i = 0; i < items.size() && i < shown; ++i)
        out += fmt::format("{}'{}'", i ? ", " : "", quoted(items[i]));
    if (items.size() > shown) out += fmt::format(" and {} more", items.size() - shown);
    return out;
}

std::string csv_field(std::string_view s) {
    if (s.find_first_of(",\"\n\r") == std::string_view::npos) return std::string(s);
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

std::string name_cell(std::string_view raw, std::size_t width, std::size_t indent) {
    std::string s = printable(raw);
    if (s.size() <= width) return s + std::string(width - s.size(), ' ');
    if (width == 0) return s;
    return s + "\n" + std::string(indent + width, ' ');
}

}  // namespace fp8kit::io
