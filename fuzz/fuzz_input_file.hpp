// The readers take a path (they stat, pread and hand it to HDF5), so each fuzz input becomes a file:
// an anonymous memfd reached through /proc/self/fd, which no other process sees and which
// disappears when closed.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace fp8kit::fuzz {

class InputFile {
public:
    InputFile(const std::uint8_t* data, std::size_t size) : fd_(::memfd_create("fuzz-input", 0)) {
        if (fd_ < 0) std::abort();  // the harness cannot run at all; not a finding
        for (std::size_t done = 0; done < size;) {
            const ssize_t n = ::write(fd_, data + done, size - done);
            if (n <= 0) std::abort();
            done += static_cast<std::size_t>(n);
        }
        path_ = "/proc/self/fd/" + std::to_string(fd_);
    }
    ~InputFile() { ::close(fd_); }
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;
    const std::string& path() const { return path_; }

private:
    int fd_;
    std::string path_;
};

}  // namespace fp8kit::fuzz
