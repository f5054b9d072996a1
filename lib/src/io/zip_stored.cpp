// The strict STORED-only zip reader of torch.save archives (see zip_stored.hpp for the steps).
#include "io/zip_stored.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/gate.hpp"

namespace fp8kit::dump::detail {
namespace {

constexpr std::uint32_t kEocdSig = 0x06054b50, kCentralSig = 0x02014b50, kLocalSig = 0x04034b50;
constexpr std::size_t kEocdSize = 22, kCentralSize = 46, kLocalSize = 30;

std::uint32_t u16(const std::uint8_t* p) { return p[0] | (p[1] << 8); }
std::uint32_t u32(const std::uint8_t* p) {
    return std::uint32_t(p[0]) | (std::uint32_t(p[1]) << 8) | (std::uint32_t(p[2]) << 16) | (std::uint32_t(p[3]) << 24);
}

struct Fd {
    int fd;
    ~Fd() {
        if (fd >= 0) ::close(fd);
    }
};

void pread_all(int fd, const std::string& path, std::uint64_t at, void* out, std::size_t n) {
    auto* p = static_cast<char*>(out);
    while (n > 0) {
        const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(at));
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0)
            throw ZipError(fmt::format("{}: truncated or unreadable at byte {}{}", path, at,
                                       got < 0 ? fmt::format(": {}", std::strerror(errno)) : ""));
        p += got, at += got, n -= static_cast<std::size_t>(got);
    }
}

// A name that stays inside `folder/`: no absolute path, no '\', no '.' or '..' component.
bool safe_name(const std::string& name) {
    if (name.empty() || name[0] == '/' || name.find('\\') != std::string::npos) return false;
    if (name.find('\0') != std::string::npos) return false;
    std::size_t start = 0;
    while (start <= name.size()) {
        const std::size_t end = std::min(name.find('/', start), name.size());
        const std::string_view part(name.data() + start, end - start);
        if (part == "." || part == ".." || (part.empty() && end != name.size())) return false;
        start = end + 1;
    }
    return true;
}

}  // namespace

// Both through the input gate (io/gate.hpp): a FIFO or device is refused without blocking.
int open_gated(const std::string& path) {
    try {
        return io::open_input(path).release();
    } catch (const io::InputError&) {
        return -1;
    }
}

bool is_zip_file(const std::string& path) {
    Fd f{open_gated(path)};
    std::uint8_t h[4];
    return f.fd >= 0 && ::pread(f.fd, h, 4, 0) == 4 && u32(h) == kLocalSig;
}

ZipStored::~ZipStored() {
    if (fd_ >= 0) ::close(fd_);
}

ZipStored::ZipStored(const std::string& path) : path_(path) {
    Fd f{-1};
    try {
        f.fd = io::open_input(path).release();
    } catch (const io::InputError& e) {
        throw ZipError(e.what());
    }
    struct stat st {};
    if (::fstat(f.fd, &st) != 0 || !S_ISREG(st.st_mode)) throw ZipError(fmt::format("{}: not a regular file", path));
    file_size_ = static_cast<std::uint64_t>(st.st_size);
    if (file_size_ < kEocdSize) throw ZipError(fmt::format("{}: truncated zip archive ({} bytes)", path, file_size_));
    // 1. The end record: its comment is at most 65535 bytes, so it starts in the last 64 KiB + 22.
    const std::size_t tail = static_cast<std::size_t>(std::min<std::uint64_t>(file_size_, kEocdSize + 65535));
    std::vector<std::uint8_t> buf(tail);
    pread_all(f.fd, path, file_size_ - tail, buf.data(), tail);
    std::size_t e = tail - kEocdSize + 1;
    do {
        --e;
        if (u32(&buf[e]) == kEocdSig && e + kEocdSize + u16(&buf[e + 20]) == tail) break;
    } while (e > 0);
    if (u32(&buf[e]) != kEocdSig)
        throw ZipError(fmt::format("{}: no end of central directory: truncated or not a zip archive", path));
    const std::uint8_t* eo = &buf[e];
    const std::uint32_t count = u16(eo + 10), cd_size = u32(eo + 12), cd_off = u32(eo + 16);
    if (u16(eo + 4) != 0 || u16(eo + 6) != 0 || u16(eo + 8) != count)
        throw ZipError(fmt::format("{}: multi-disk zip archives are not supported", path));
    if (count == 0xffff || cd_size == 0xffffffffu || cd_off == 0xffffffffu)
        throw ZipError(fmt::format("{}: ZIP64 archive (over 4 GiB or 65535 entries): not supported", path));
    const std::uint64_t eocd_at = file_size_ - tail + e;
    if (std::uint64_t(cd_off) + cd_size > eocd_at)
        throw ZipError(fmt::format("{}: central directory past its end record: truncated or corrupt", path));
    // 2. The central directory.
    std::vector<std::uint8_t> cd(cd_size);
    pread_all(f.fd, path, cd_off, cd.data(), cd_size);
    struct Span {
        std::uint64_t begin, end;
        std::string name;
    };
    std::vector<Span> spans;
    std::size_t at = 0;
    for (std::uint32_t i = 0; i < count; ++i) {
        if (at + kCentralSize > cd.size() || u32(&cd[at]) != kCentralSig)
            throw ZipError(fmt::format("{}: central directory entry {} is corrupt", path, i));
        const std::uint8_t* c = &cd[at];
        const std::uint32_t flags = u16(c + 8), method = u16(c + 10), csize = u32(c + 20), usize = u32(c + 24);
        const std::uint32_t nlen = u16(c + 28), xlen = u16(c + 30), clen = u16(c + 32), local = u32(c + 42);
        if (at + kCentralSize + nlen + xlen + clen > cd.size())
            throw ZipError(fmt::format("{}: central directory entry {} runs past the directory", path, i));
        const std::string name(reinterpret_cast<const char*>(c + kCentralSize), nlen);
        at += kCentralSize + nlen + xlen + clen;
        const std::string shown = io::quoted(name, 120);
        // 4. What the entry may be.
        const std::size_t slash = name.find('/');
        const std::string top = slash == std::string::npos ? "" : name.substr(0, slash);
        if (!safe_name(name) || top.empty() || (i > 0 && top != folder_))
            throw ZipError(fmt::format("{}: zip entry {} escapes the archive's folder{}", path, shown,
                                       folder_.empty() ? "" : fmt::format(" '{}/'", folder_)));
        if (i == 0) folder_ = top;
        if (flags & 1) throw ZipError(fmt::format("{}: zip entry {} is encrypted", path, shown));
        if (method != 0)
            throw ZipError(
                fmt::format("{}: zip entry {} is compressed (method {}): torch.save writes entries "
                            "stored; compressed archives are not supported",
                            path, shown, method));
        if (csize != usize || csize == 0xffffffffu || local == 0xffffffffu)
            throw ZipError(fmt::format("{}: zip entry {}: inconsistent or ZIP64 sizes", path, shown));
        // 3. The local header, whose name must be the same.
        std::uint8_t lh[kLocalSize];
        if (std::uint64_t(local) + kLocalSize > cd_off)
            throw ZipError(fmt::format("{}: zip entry {}: local header past the central directory", path, shown));
        pread_all(f.fd, path, local, lh, kLocalSize);
        const std::uint32_t lnlen = u16(lh + 26), lxlen = u16(lh + 28);
        std::string lname(lnlen, '\0');
        if (u32(lh) == kLocalSig && lnlen > 0) pread_all(f.fd, path, local + kLocalSize, lname.data(), lnlen);
        if (u32(lh) != kLocalSig || lname != name)
            throw ZipError(fmt::format("{}: zip entry {}: local header does not match the directory", path, shown));
        const std::uint64_t data = std::uint64_t(local) + kLocalSize + lnlen + lxlen;
        if (data + csize > cd_off)
            throw ZipError(fmt::format("{}: zip entry {} ({} bytes) runs past the data area: truncated or corrupt",
                                       path, shown, csize));
        const std::string rel = name.substr(slash + 1);
        if (!entries_.emplace(rel, ZipEntry{data, csize}).second)
            throw ZipError(fmt::format("{}: zip entry {} appears twice", path, shown));
        spans.push_back({local, data + csize, shown});
    }
    std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin < b.begin; });
    for (std::size_t i = 1; i < spans.size(); ++i)
        if (spans[i].begin < spans[i - 1].end)
            throw ZipError(fmt::format("{}: zip entries {} and {} overlap", path, spans[i - 1].name, spans[i].name));
    std::swap(fd_, f.fd);
}

const ZipEntry* ZipStored::find(const std::string& rel) const {
    const auto it = entries_.find(rel);
    return it == entries_.end() ? nullptr : &it->second;
}

void ZipStored::read(const ZipEntry& e, std::uint64_t at, void* out, std::size_t n) const {
    if (at > e.size || n > e.size - at) throw ZipError(fmt::format("{}: read past the end of a zip entry", path_));
    pread_all(fd_, path_, e.offset + at, out, n);
}

std::vector<std::uint8_t> ZipStored::read_all(const ZipEntry& e, std::size_t limit) const {
    if (e.size > limit)
        throw ZipError(fmt::format("{}: zip entry of {} bytes is larger than the {} allowed", path_, e.size, limit));
    std::vector<std::uint8_t> v(static_cast<std::size_t>(e.size));
    if (!v.empty()) read(e, 0, v.data(), v.size());
    return v;
}

}  // namespace fp8kit::dump::detail
