// The one way fp8kit opens a file it reads (docs/hardening.md, "Reading inputs").
//
// Every reader of the library (dumps, arrays, recipes, traces, checkpoint configs, TE logs) opens
// its file here, or checks it here first where a third-party library opens it by name (libhdf5):
// - only regular files are read. A FIFO, a device, a socket or a folder is refused by a stat()
//   before any open, so nothing blocks (a FIFO's open waits for a writer) and no device is
//   touched; the open itself is O_NONBLOCK | O_CLOEXEC and is checked again with fstat(), so a
//   path swapped between the two is refused too.
// - a limit that refuses a file is named in the message ("over the 16 MiB limit of a recipe file").
// - paths and every other untrusted string in a message go through io::quoted() (printable.hpp):
//   control characters escaped, at most a few hundred bytes.
// - what a reader skips on purpose is a dump::Problem note; dump::skipped() (dump.hpp) is the one
//   list every command prints ("note: skipped ..."), puts in its JSON ("skipped") and Python warns of.
#pragma once

#include <cstdint>
#include <cstdio>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/io/printable.hpp"

namespace fp8kit::io {

// A file that cannot be read as an input: the message names the file (quoted) and the reason.
struct InputError : std::runtime_error {
    InputError(const std::string& path, const std::string& reason);
    std::string path, reason;  // what() is "PATH: REASON", the path quoted
};

// An open regular file, read-only, closed when destroyed.
class InputFile {
public:
    InputFile() = default;
    InputFile(int fd, std::uint64_t size) : fd_(fd), size_(size) {}
    InputFile(InputFile&& o) noexcept : fd_(o.fd_), size_(o.size_) { o.fd_ = -1; }
    InputFile& operator=(InputFile&& o) noexcept;
    InputFile(const InputFile&) = delete;
    InputFile& operator=(const InputFile&) = delete;
    ~InputFile();
    int fd() const { return fd_; }
    std::uint64_t size() const { return size_; }  // at the open
    int release();                                // the descriptor, now the caller's to close

private:
    int fd_ = -1;
    std::uint64_t size_ = 0;
};

// What a file of stat mode `mode` is, for a message: "a FIFO", "a device", "a socket",
// "a directory", "a regular file".
std::string_view kind_name(unsigned mode);

// Opens `path` for reading. Throws InputError:
//   "PATH: cannot open: No such file or directory"
//   "PATH: a FIFO, not a regular file: not read (fp8kit reads inputs from regular files only)"
InputFile open_input(const std::string& path);
// The same, as a stdio stream ("rb").
std::unique_ptr<std::FILE, int (*)(std::FILE*)> open_input_stream(const std::string& path);
// For a reader that opens `path` by name itself (libhdf5): the same checks, the file opened
// without blocking and closed again. Throws InputError.
void check_input(const std::string& path);
// The reason open_input() gives for a file of stat mode `mode` that is not a regular file.
std::string not_regular(unsigned mode);
// True when `path` is a folder (followed through symlinks); false for anything else or nothing.
bool is_folder(const std::string& path);

// The whole of a small file (a recipe, a config.json, an index): at most `max_bytes`, else
// InputError "PATH: N bytes, over the M-byte limit of WHAT".
std::string read_input_text(const std::string& path, std::uint64_t max_bytes, std::string_view what);

}  // namespace fp8kit::io
