// The output sink: see io/sink.hpp and docs/hardening.md ("Output").
#include "fp8kit/io/sink.hpp"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include "temp_cleanup.hpp"

namespace fp8kit::io {
namespace {

// Descriptor 1 was closed when the program started (reserve_stdout put a write-refusing pipe end
// there): every write to it fails with EBADF, so messages name the closed output instead.
bool stdout_closed = false;

constexpr const char* kStdoutClosed = "standard output is closed";

std::string label(const std::string& option, const std::string& path) {
    return option.empty() ? path : option + " " + path;
}

std::string folder_of(const std::string& path) {
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

std::string base_of(const std::string& path) {
    const auto slash = path.find_last_of('/');
    return slash == std::string::npos ? path : path.substr(slash + 1);
}

// Standard output's buffered bytes, flushed; false with errno set when they did not get out.
bool flush_stdio() {
    errno = 0;
    std::cout.flush();  // synced with stdio: this may be where a full disk is found
    int e = errno;
    const bool cout_bad = std::cout.bad();
    errno = 0;
    const bool failed = std::fflush(stdout) != 0 || std::ferror(stdout) != 0;
    if (!e) e = errno;
    const bool ok = !cout_bad && !failed;
    errno = ok ? 0 : e;  // 0 when the failure was met (and cleared) by an earlier write
    return ok;
}

}  // namespace

OutputFile::OutputFile(std::string path, std::string option, bool direct)
    : path_(std::move(path)), option_(std::move(option)) {
    const std::string who = label(option_, path_);
    if (path_.empty()) throw OutputError(fmt::format("{}: an empty path", option_.empty() ? "output" : option_));
    if (path_ == "-") {  // standard output, after what stdio holds
        if (stdout_closed) throw OutputError(fmt::format("{}: {}: nothing was written", who, kStdoutClosed));
        if (!flush_stdio()) fail("writing standard output failed", errno ? errno : EIO);
        fd_ = STDOUT_FILENO;
        in_place_ = true;
        return;
    }
    struct stat lst {
    }, st{};
    bool exists = false;
    target_ = path_;
    if (::lstat(path_.c_str(), &lst) == 0) {
        exists = true;
        st = lst;
        if (S_ISLNK(lst.st_mode)) {  // written through to the file it resolves to
            char* real = ::realpath(path_.c_str(), nullptr);
            if (!real || ::stat(real, &st) != 0) {
                const int e = errno;
                std::free(real);
                throw OutputError(
                    fmt::format("{}: is a symbolic link that resolves to no file ({}); "
                                "name the file itself",
                                who, std::strerror(e)));
            }
            target_ = real;
            std::free(real);
        }
    } else if (errno != ENOENT) {
        throw OutputError(fmt::format("{}: cannot write: {}", who, std::strerror(errno)));
    }
    if (exists && S_ISDIR(st.st_mode)) throw OutputError(fmt::format("{}: is a directory", who));
    if (exists && !S_ISREG(st.st_mode)) {
        // A device, FIFO or socket: written in place, never replaced. O_NONBLOCK: a FIFO with no
        // reader fails with ENXIO at once instead of blocking the open; cleared for the writes.
        in_place_ = true;
        fd_ = ::open(path_.c_str(), O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd_ < 0) {
            const int e = errno;
            if (e == ENXIO && S_ISFIFO(st.st_mode))
                throw OutputError(fmt::format("{}: is a FIFO that no process is reading: not written", who));
            throw OutputError(fmt::format("{}: cannot write: {}", who, std::strerror(e)));
        }
        const int fl = ::fcntl(fd_, F_GETFL);
        if (fl < 0 || ::fcntl(fd_, F_SETFL, fl & ~O_NONBLOCK) != 0) fail("cannot write", errno);
        return;
    }
    // A regular file, or none yet: a temporary of a unique name beside it, renamed at the end.
    const std::string dir = folder_of(target_);
    std::string tmpl = dir + "." + base_of(target_) + ".XXXXXX.partial";
    fd_ = detail::make_registered_temp(tmpl.data(), 8, O_CLOEXEC);
    if (fd_ < 0)
        throw OutputError(fmt::format("{}: cannot create a temporary file in {}: {}", who, dir.empty() ? "." : dir,
                                      std::strerror(errno)));
    tmp_ = tmpl;
    // mkostemps creates the file 0600: an existing file keeps its bits (and, for root, owner);
    // a new one gets what the umask allows, as any file the user creates.
    if (exists) {
        ::fchmod(fd_, st.st_mode & 07777);
        if (::geteuid() == 0 && (st.st_uid != 0 || st.st_gid != 0) && ::fchown(fd_, st.st_uid, st.st_gid) != 0) {
            // best effort: the contents matter more than the owner
        }
    } else {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        ::fchmod(fd_, 0666 & ~mask);
    }
    if (direct) {
        const int fl = ::fcntl(fd_, F_GETFL);
        direct_ = fl >= 0 && ::fcntl(fd_, F_SETFL, fl | O_DIRECT) == 0;
    }
}

OutputFile::~OutputFile() {
    if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
    if (!tmp_.empty()) {
        ::unlink(tmp_.c_str());
        detail::forget_temp_file(tmp_.c_str());
    }
}

void OutputFile::buffered() {
    direct_ = false;
    const int fl = ::fcntl(fd_, F_GETFL);
    if (fl < 0 || ::fcntl(fd_, F_SETFL, fl & ~O_DIRECT) != 0) fail("write failed", errno);
}

void OutputFile::write(const void* data, std::size_t n) {
    if (fd_ < 0) throw OutputError(fmt::format("{}: written after it was closed", label(option_, path_)));
    if (direct_ && (reinterpret_cast<std::uintptr_t>(data) % kAlign != 0 || n % kAlign != 0)) buffered();
    const auto* c = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd_, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0 && errno == EINVAL && direct_) {
            buffered();
            continue;
        }
        if (w < 0) fail("write failed", errno);
        if (w == 0) fail("write failed", ENOSPC);
        c += w;
        n -= static_cast<std::size_t>(w);
    }
}

void OutputFile::commit() {
    if (fd_ == STDOUT_FILENO) {  // its close is finish_stdout's
        fd_ = -1;
        return;
    }
    if (fd_ < 0) throw OutputError(fmt::format("{}: committed twice", label(option_, path_)));
    // fsync: a delayed-allocation file system reports a full disk here, not at write().
    if (!in_place_ && ::fsync(fd_) != 0) fail("write failed", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("write failed", errno);  // NFS and the like report errors here
    if (in_place_) return;
    if (detail::rename_and_forget(tmp_.c_str(), target_.c_str()) != 0)
        fail("cannot rename the temporary into place", errno);
    tmp_.clear();
    // The rename itself reaches the disk with the folder's entry (best effort: not every file
    // system lets a folder be opened or synced).
    const std::string dir = folder_of(target_);
    const int dfd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

void OutputFile::fail(const std::string& what, int err) {
    if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
    fd_ = -1;
    if (!tmp_.empty()) {
        ::unlink(tmp_.c_str());
        detail::forget_temp_file(tmp_.c_str());
        tmp_.clear();
    }
    throw OutputError(fmt::format("{}: {}: {}", label(option_, path_), what, std::strerror(err)));
}

void write_file(const std::string& path, std::string_view bytes, const std::string& option) {
    OutputFile f(path, option);
    f.write(bytes);
    f.commit();
}

void remove_temporaries_on_signals() { detail::enable_temp_cleanup(); }

void flush_stdout() {
    if (stdout_closed) throw OutputError(fmt::format("{}: the report was lost", kStdoutClosed));
    if (!flush_stdio())
        throw OutputError(fmt::format("writing standard output failed{}{}: the report is incomplete", errno ? ": " : "",
                                      errno ? std::strerror(errno) : ""));
}

void flush(std::FILE* f) {
    if (f == stdout) return flush_stdout();
    errno = 0;
    if (std::fflush(f) != 0 || std::ferror(f) != 0)
        throw OutputError(fmt::format("writing the report failed{}{}: the report is incomplete", errno ? ": " : "",
                                      errno ? std::strerror(errno) : ""));
}

int finish_stdout(int status, bool closed_at_start) {
    const bool flushed = flush_stdio();
    const int flush_errno = errno;
    errno = 0;
    const bool closed = std::fclose(stdout) == 0;
    if (flushed && closed) return status;
    const int e = !flushed ? flush_errno : errno;
    if (closed_at_start || stdout_closed)
        std::fprintf(stderr, "fp8kit: error: %s: the report was lost\n", kStdoutClosed);
    else
        std::fprintf(stderr, "fp8kit: error: writing standard output failed%s%s: the report is incomplete\n",
                     e ? ": " : "", e ? std::strerror(e) : "");
    return 2;
}

int open_write_refusing() {
    int ends[2];
    if (::pipe2(ends, O_CLOEXEC) != 0) return -1;
    ::close(ends[1]);
    return ends[0];
}

bool reserve_stdout() {
    if (::fcntl(STDOUT_FILENO, F_GETFD) != -1 || errno != EBADF) return false;
    stdout_closed = true;
    const int fd = open_write_refusing();
    if (fd >= 0 && fd != STDOUT_FILENO) {
        ::dup2(fd, STDOUT_FILENO);
        ::close(fd);
    }
    return true;
}

void set_stdout_closed() { stdout_closed = true; }

bool adopt_stdout(int fd) {
    if (fd < 0) return false;
    std::fflush(stdout);
    const bool ok = ::dup2(fd, STDOUT_FILENO) == STDOUT_FILENO;
    ::close(fd);
    return ok;
}

}  // namespace fp8kit::io
