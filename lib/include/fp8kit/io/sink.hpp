// The one way fp8kit writes a file (every command's -o / --save, the safetensors and .npy writers,
// the Python module's files) and checks its standard output. docs/hardening.md, "Output".
//
// Where the output goes, by what PATH is when the sink opens it:
// - nothing, or a regular file: the bytes go to a temporary of a unique name created exclusively
//   (mkostemps: O_CREAT|O_EXCL) in PATH's folder, `.NAME.XXXXXX.partial`; commit() checks every
//   write, fsyncs, checks the close and renames it over PATH. A failed or abandoned output leaves
//   no temporary and PATH as it was; no other file of the user's is touched (no fixed PATH.tmp).
//   An existing file keeps its permission bits.
// - a symbolic link: written through to the regular file it resolves to (the link stays a link;
//   the temporary goes beside the file it points at). A link that resolves to nothing is refused.
// - a character device, a FIFO or a socket, and "-" (standard output): written in place, never
//   replaced; every write and the close are checked. A FIFO is opened without blocking: one with
//   no reader is refused at once rather than left waiting.
// - a folder: refused.
#pragma once

#include <cstddef>
#include <cstdio>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fp8kit::io {

// Every failure of an output: one line naming the option (when given) and the path.
struct OutputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

class OutputFile {
public:
    // Buffers given to write() aligned to kAlign, in whole multiples of it, go to a regular file
    // with O_DIRECT when `direct` is set and the file system allows it (large tables: no page
    // cache); anything else switches the file back to buffered writes.
    static constexpr std::size_t kAlign = 4096;

    // `option` names the argument in messages ("-o", "--save"); may be empty. Throws OutputError
    // when PATH cannot be written (a folder, a dangling link, a FIFO without a reader, no room
    // for the temporary).
    explicit OutputFile(std::string path, std::string option = {}, bool direct = false);
    ~OutputFile();  // without commit(): removes the temporary (PATH untouched)
    OutputFile(const OutputFile&) = delete;
    OutputFile& operator=(const OutputFile&) = delete;

    void write(const void* data, std::size_t n);  // throws OutputError (and removes the temporary)
    void write(std::string_view s) { write(s.data(), s.size()); }
    // fsync (regular files), close, rename into place. Throws OutputError; nothing is left then.
    void commit();
    // True when PATH is written in place (standard output, a device, a FIFO).
    bool in_place() const { return in_place_; }

private:
    [[noreturn]] void fail(const std::string& what, int err);
    void buffered();
    std::string path_, option_, target_, tmp_;
    int fd_ = -1;
    bool in_place_ = false;
    bool direct_ = false;
};

// PATH's whole contents at once, through an OutputFile.
void write_file(const std::string& path, std::string_view bytes, const std::string& option = {});

// From now on, SIGINT, SIGTERM, SIGHUP and SIGQUIT remove the temporary of the OutputFile being
// written before the process dies of the signal (destructors do not run then). For programs that
// own their signals (the CLI); a host such as Python keeps its own handlers, so it is off by
// default.
void remove_temporaries_on_signals();

// Standard output, checked: fflush(stdout), throwing OutputError with the reason when the bytes
// did not reach it (a full disk, a closed pipe or descriptor).
void flush_stdout();
// The same for any stream a report is written to: flush_stdout() for stdout, else fflush(f),
// throwing OutputError when the bytes did not get out.
void flush(std::FILE* f);

// At exit: flushes and closes standard output and returns `status`, or 2 after one line on
// standard error when anything written to it was lost. `closed_at_start`: descriptor 1 was closed
// when the process started (reserve_stdout).
int finish_stdout(int status, bool closed_at_start);

// A descriptor every write to fails (EBADF): the read end of a pipe whose write end is closed. It
// needs no file, so it holds where /dev/full is missing or a plain file (some sandboxes). -1 when
// pipe2 fails.
int open_write_refusing();

// A closed descriptor 1 would let the next open() take it, and a report would be written into
// whatever file that was. Takes it with open_write_refusing() instead (every write then fails and
// finish_stdout reports the loss). Returns true when descriptor 1 was closed.
bool reserve_stdout();

// Standard output is known to be closed (reserve_stdout found descriptor 1 closed; an MPI
// launcher's standard output is closed): `-o -` and the checks of standard output then say that it
// is closed instead of the stand-in descriptor's "Bad file descriptor".
void set_stdout_closed();

// Makes descriptor 1 the open file description `fd` (dup2; the offset and O_APPEND are shared, as
// if inherited), after flushing what was written before. Used for a launcher's own standard
// output (cluster/mpi.hpp). Returns false (nothing changed) when `fd` < 0 or dup2 fails.
bool adopt_stdout(int fd);

}  // namespace fp8kit::io
