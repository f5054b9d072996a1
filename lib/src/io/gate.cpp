// Opening inputs: regular files only, refused without blocking (fp8kit/io/gate.hpp).
#include "fp8kit/io/gate.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <fmt/format.h>

namespace fp8kit::io {

InputError::InputError(const std::string& p, const std::string& r)
    : std::runtime_error(quoted(p, 400) + ": " + r), path(p), reason(r) {}

InputFile& InputFile::operator=(InputFile&& o) noexcept {
    if (this != &o) {
        if (fd_ >= 0) ::close(fd_);
        fd_ = o.fd_;
        size_ = o.size_;
        o.fd_ = -1;
    }
    return *this;
}

InputFile::~InputFile() {
    if (fd_ >= 0) ::close(fd_);
}

int InputFile::release() {
    const int fd = fd_;
    fd_ = -1;
    return fd;
}

std::string_view kind_name(unsigned mode) {
    if (S_ISREG(mode)) return "a regular file";
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

std::string not_regular(unsigned mode) {
    return fmt::format("{}, not a regular file: not read (fp8kit reads inputs from regular files only)",
                       kind_name(mode));
}

bool is_folder(const std::string& path) {
    struct stat st {};
    return ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode);
}

InputFile open_input(const std::string& path) {
    // stat() first: a FIFO or a device is refused without being opened (opening a FIFO waits for a
    // writer; opening some devices has effects of its own).
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) throw InputError(path, fmt::format("cannot open: {}", std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) throw InputError(path, not_regular(st.st_mode));
    const int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) throw InputError(path, fmt::format("cannot open: {}", std::strerror(errno)));
    InputFile f(fd, 0);
    // Checked again on what was opened: the path may have been replaced in between.
    if (::fstat(fd, &st) != 0) throw InputError(path, fmt::format("cannot stat: {}", std::strerror(errno)));
    if (!S_ISREG(st.st_mode)) throw InputError(path, not_regular(st.st_mode));
    const int fl = ::fcntl(fd, F_GETFL);
    if (fl >= 0) ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    return InputFile(f.release(), static_cast<std::uint64_t>(st.st_size));
}

std::unique_ptr<std::FILE, int (*)(std::FILE*)> open_input_stream(const std::string& path) {
    InputFile f = open_input(path);
    std::FILE* s = ::fdopen(f.fd(), "rb");
    if (!s) throw InputError(path, fmt::format("cannot open: {}", std::strerror(errno)));
    f.release();  // the stream owns it now
    return {s, &std::fclose};
}

void check_input(const std::string& path) { (void)open_input(path); }

std::string read_input_text(const std::string& path, std::uint64_t max_bytes, std::string_view what) {
    InputFile f = open_input(path);
    if (f.size() > max_bytes)
        throw InputError(path, fmt::format("{} bytes, over the {}-byte limit of {}", f.size(), max_bytes, what));
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(f.fd(), buf, sizeof buf);
        if (n < 0) {
            if (errno == EINTR) continue;
            throw InputError(path, fmt::format("cannot read: {}", std::strerror(errno)));
        }
        if (n == 0) break;
        out.append(buf, static_cast<std::size_t>(n));
        if (out.size() > max_bytes)
            throw InputError(path, fmt::format("over the {}-byte limit of {}", max_bytes, what));
    }
    return out;
}

}  // namespace fp8kit::io
