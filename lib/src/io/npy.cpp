#include "fp8kit/io/npy.hpp"
#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

namespace fp8kit {

std::size_t NpyHeader::element_count() const {
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

namespace {

// A cursor over the header's Python dict literal: {'descr': '<f4', 'fortran_order': False,
// 'shape': (2, 3), }. Only the three keys NumPy writes are accepted.
struct Parser {
    const std::string& s;
    std::size_t pos = 0;
    const std::string& what;

    [[noreturn]] void fail(const std::string& why) const {
        throw NpyError(fmt::format("{}: malformed .npy header ({}) in: {}", what, why, io::quoted(s)));
    }
    void skip_space() {
        while (pos < s.size() && std::isspace(static_cast<unsigned char>(s[pos]))) ++pos;
    }
    bool accept(char c) {
        skip_space();
        if (pos < s.size() && s[pos] == c) {
            ++pos;
            return true;
        }
        return false;
    }
    void expect(char c) {
        if (!accept(c)) fail(fmt::format("expected '{}' at offset {}", c, pos));
    }
    std::string string_literal() {
        skip_space();
        if (pos >= s.size() || (s[pos] != '\'' && s[pos] != '"')) fail("expected a quoted string");
        const char q = s[pos++];
        const std::size_t end = s.find(q, pos);
        if (end == std::string::npos) fail("unterminated string");
        std::string out = s.substr(pos, end - pos);
        pos = end + 1;
        return out;
    }
    bool boolean() {
        skip_space();
        if (s.compare(pos, 4, "True") == 0) {
            pos += 4;
            return true;
        }
        if (s.compare(pos, 5, "False") == 0) {
            pos += 5;
            return false;
        }
        fail("expected True or False");
    }
    std::vector<std::size_t> tuple() {
        std::vector<std::size_t> out;
        expect('(');
        while (!accept(')')) {
            skip_space();
            if (pos >= s.size() || !std::isdigit(static_cast<unsigned char>(s[pos]))) fail("expected a dimension");
            std::size_t v = 0;
            while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
                const std::size_t d = static_cast<std::size_t>(s[pos++] - '0');
                if (v > (SIZE_MAX - d) / 10) fail("dimension too large");
                v = v * 10 + d;
            }
            out.push_back(v);
            if (!accept(',')) {
                expect(')');
                break;
            }
        }
        return out;
    }
};

}  // namespace

NpyHeader parse_npy_header(const unsigned char* b, std::size_t size, std::size_t file_size, const std::string& what) {
    static const unsigned char magic[6] = {0x93, 'N', 'U', 'M', 'P', 'Y'};
    if (size < 10 || std::memcmp(b, magic, 6) != 0)
        throw NpyError(fmt::format("{}: not a .npy file (no \\x93NUMPY magic at the start)", what));
    NpyHeader h;
    h.major = b[6];
    h.minor = b[7];
    std::size_t len_bytes;
    if (h.major == 1)
        len_bytes = 2;
    else if (h.major == 2 || h.major == 3)
        len_bytes = 4;
    else
        throw NpyError(fmt::format("{}: unsupported .npy format version {}.{}", what, h.major, h.minor));
    if (size < 8 + len_bytes) throw NpyError(fmt::format("{}: truncated .npy header", what));
    std::size_t header_len = 0;
    for (std::size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<std::size_t>(b[8 + i]) << (8 * i);
    h.data_offset = 8 + len_bytes + header_len;
    if (h.data_offset > size)
        throw NpyError(
            fmt::format("{}: truncated .npy header (header says {} bytes, file has {})", what, h.data_offset, size));
    const std::string text(reinterpret_cast<const char*>(b) + 8 + len_bytes, header_len);

    Parser p{text, 0, what};
    bool have_descr = false, have_order = false, have_shape = false, fortran = false;
    p.expect('{');
    while (!p.accept('}')) {
        const std::string key = p.string_literal();
        p.expect(':');
        if (key == "descr") {
            p.skip_space();
            if (p.pos < text.size() && text[p.pos] == '[')
                throw NpyError(fmt::format("{}: structured dtype (a list descr) is not supported", what));
            h.descr = p.string_literal();
            have_descr = true;
        } else if (key == "fortran_order") {
            fortran = p.boolean();
            have_order = true;
        } else if (key == "shape") {
            h.shape = p.tuple();
            have_shape = true;
        } else {
            p.fail(fmt::format("unexpected key '{}'", key));
        }
        if (!p.accept(',')) {
            p.expect('}');
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape) p.fail("needs the keys descr, fortran_order and shape");
    if (fortran)
        throw NpyError(
            fmt::format("{}: fortran_order is True; save the array in C order "
                        "(numpy.ascontiguousarray) before validating",
                        what));

    // descr: byte order, kind letter, item size ("<f4", "|u1", "|V2").
    const std::string& d = h.descr;
    if (d.size() < 3 || std::string("<>|=").find(d[0]) == std::string::npos ||
        std::string("fuiVb").find(d[1]) == std::string::npos)
        throw NpyError(fmt::format("{}: unsupported dtype '{}'", what, io::quoted(d)));
    std::size_t item = 0;
    for (std::size_t i = 2; i < d.size(); ++i) {
        if (!std::isdigit(static_cast<unsigned char>(d[i])) || item > 1024)
            throw NpyError(fmt::format("{}: unsupported dtype '{}'", what, io::quoted(d)));
        item = item * 10 + static_cast<std::size_t>(d[i] - '0');
    }
    if (item == 0) throw NpyError(fmt::format("{}: unsupported dtype '{}'", what, io::quoted(d)));
    if (d[0] == '>' && item > 1)
        throw NpyError(fmt::format("{}: big-endian dtype '{}' is not supported; save it little-endian", what, d));
    h.kind = d[1];
    h.item_size = item;

    std::size_t n = 1;
    for (std::size_t dim : h.shape) {
        if (dim != 0 && n > SIZE_MAX / dim) throw NpyError(fmt::format("{}: shape too large", what));
        n *= dim;
    }
    if (n > (SIZE_MAX - h.data_offset) / item) throw NpyError(fmt::format("{}: shape too large", what));
    const std::size_t expected = h.data_offset + n * item;
    if (file_size != expected)
        throw NpyError(
            fmt::format("{}: wrong size: the header says {} elements of {} bytes ({} bytes in all), "
                        "the file has {} bytes",
                        what, n, item, expected, file_size));
    return h;
}

namespace {

struct FileCloser {
    void operator()(std::FILE* f) const { std::fclose(f); }
};

std::unique_ptr<std::FILE, FileCloser> open_file(const std::string& path, std::size_t& size) {
    std::unique_ptr<std::FILE, FileCloser> f;
    try {
        f.reset(io::open_input_stream(path).release());  // regular files only (io/gate.hpp)
    } catch (const io::InputError& e) {
        throw NpyError(e.what());
    }
    if (std::fseek(f.get(), 0, SEEK_END) != 0) throw NpyError(fmt::format("{}: cannot seek", path));
    const long end = std::ftell(f.get());
    if (end < 0) throw NpyError(fmt::format("{}: cannot tell its size", path));
    size = static_cast<std::size_t>(end);
    std::rewind(f.get());
    return f;
}

std::vector<unsigned char> read_prefix(std::FILE* f, std::size_t want, const std::string& path) {
    std::vector<unsigned char> buf(want);
    const std::size_t got = std::fread(buf.data(), 1, want, f);
    if (got != want) throw NpyError(fmt::format("{}: read failed after {} bytes", path, got));
    return buf;
}

}  // namespace

NpyHeader read_npy_header(const std::string& path) {
    std::size_t size = 0;
    auto f = open_file(path, size);
    // A header is at most a few kilobytes; v2/v3 allow up to 4 GiB but nothing sane writes that.
    std::size_t want = size < 12 ? size : 12;
    auto pre = read_prefix(f.get(), want, path);
    if (want >= 10 && std::memcmp(pre.data() + 1, "NUMPY", 5) == 0) {
        const std::size_t len_bytes = pre[6] == 1 ? 2 : 4;
        std::size_t header_len = 0;
        if (8 + len_bytes <= want)
            for (std::size_t i = 0; i < len_bytes; ++i) header_len |= static_cast<std::size_t>(pre[8 + i]) << (8 * i);
        want = 8 + len_bytes + header_len;
        if (want > size) want = size;
        std::rewind(f.get());
        pre = read_prefix(f.get(), want, path);
    }
    return parse_npy_header(pre.data(), pre.size(), size, path);
}

NpyArray read_npy(const std::string& path) {
    NpyArray a;
    a.header = read_npy_header(path);
    std::size_t size = 0;
    auto f = open_file(path, size);
    if (std::fseek(f.get(), static_cast<long>(a.header.data_offset), SEEK_SET) != 0)
        throw NpyError(fmt::format("{}: cannot seek to the data", path));
    const std::size_t bytes = a.header.element_count() * a.header.item_size;
    a.data.resize(bytes);
    if (bytes && std::fread(a.data.data(), 1, bytes, f.get()) != bytes)
        throw NpyError(fmt::format("{}: read failed (file changed or unreadable)", path));
    return a;
}

void write_npy(const std::string& path, const std::string& descr, const std::vector<std::size_t>& shape,
               const void* data, std::size_t bytes, const std::string& option) {
    // 1. Header: the dict literal, padded with spaces to a multiple of 64 bytes, ending in '\n'.
    std::string dims;
    for (std::size_t d : shape) dims += fmt::format("{}, ", d);
    if (shape.size() > 1) dims.resize(dims.size() - 2);
    std::string dict = fmt::format("{{'descr': '{}', 'fortran_order': False, 'shape': ({}), }}", descr, dims);
    const std::size_t unpadded = 10 + dict.size() + 1;
    dict.append((64 - unpadded % 64) % 64, ' ');
    dict += '\n';
    std::string head("\x93NUMPY\x01\x00", 8);
    head += static_cast<char>(dict.size() & 0xFF);
    head += static_cast<char>(dict.size() >> 8);
    head += dict;
    // 2. Through the one sink (io/sink.hpp): a unique temporary beside the target, renamed into place.
    io::OutputFile f(path, option);
    f.write(head);
    if (bytes) f.write(data, bytes);
    f.commit();
}

}  // namespace fp8kit
