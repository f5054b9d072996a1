// Reading and decoding one chunk task; see chunk_task.hpp.
#include "io/chunk_task.hpp"

#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace fp8kit::dump::detail {

std::string pread_exact(int fd, void* buf, std::size_t n, std::uint64_t offset) {
    auto* p = static_cast<unsigned char*>(buf);
    while (n > 0) {
        const ssize_t got = ::pread(fd, p, n, static_cast<off_t>(offset));
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return std::strerror(errno);
        if (got == 0) return "unexpected end of file";
        p += got;
        n -= static_cast<std::size_t>(got);
        offset += static_cast<std::uint64_t>(got);
    }
    return "";
}

std::shared_ptr<const void> map_extent(int fd, std::uint64_t offset, std::uint64_t n) {
    if (fd < 0 || n < kMapMin || n > SIZE_MAX / 2) return nullptr;
    // The file as it is now (it may have been cut since it was listed): bytes past its end would
    // raise SIGBUS when touched, so such a tensor is left to pread, which reports a short read.
    struct stat st {};
    if (::fstat(fd, &st) != 0 || offset > static_cast<std::uint64_t>(st.st_size) ||
        n > static_cast<std::uint64_t>(st.st_size) - offset)
        return nullptr;
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t skip = offset % page;
    const std::size_t len = static_cast<std::size_t>(n + skip);
    void* base = ::mmap(nullptr, len, PROT_READ, MAP_SHARED, fd, static_cast<off_t>(offset - skip));
    if (base == MAP_FAILED) return nullptr;
    ::madvise(base, len, MADV_SEQUENTIAL);
    // Aliasing constructor: the pointer is the data, the owner unmaps the whole mapping.
    std::shared_ptr<void> owner(base, [len](void* p) { ::munmap(p, len); });
    return std::shared_ptr<const void>(owner, static_cast<const unsigned char*>(base) + skip);
}

std::string run_chunk_task(const ChunkTask& t, const std::vector<unsigned char>& fill, unsigned char* out) {
    if (t.size == 0) {
        const std::size_t e = fill.empty() ? 1 : fill.size();
        if (fill.empty() || std::all_of(fill.begin(), fill.end(), [](unsigned char b) { return b == 0; }))
            std::memset(out, 0, t.decoded_bytes);
        else
            for (std::size_t b = 0; b + e <= t.decoded_bytes; b += e) std::memcpy(out + b, fill.data(), e);
        return "";
    }
    const bool filtered = t.pipeline && !t.pipeline->empty();
    if (!filtered && t.size != t.decoded_bytes)
        return fmt::format("it stores {} bytes, the chunk holds {}", t.size, t.decoded_bytes);
    // Per worker thread: the stored bytes and the decoder's two stages (bounded by the chunk size).
    thread_local std::vector<unsigned char> stored, scratch;
    const unsigned char* in = t.stored;
    if (!in) {
        if (!filtered) return pread_exact(t.fd, out, t.decoded_bytes, t.offset);  // straight in
        stored.resize(static_cast<std::size_t>(t.size));
        if (std::string e = pread_exact(t.fd, stored.data(), stored.size(), t.offset); !e.empty()) return e;
        in = stored.data();
    }
    if (!filtered) {
        std::memcpy(out, in, t.decoded_bytes);
        return "";
    }
    return decode_chunk(*t.pipeline, t.filter_mask, in, static_cast<std::size_t>(t.size), t.decoded_bytes, scratch,
                        out);
}

}  // namespace fp8kit::dump::detail
