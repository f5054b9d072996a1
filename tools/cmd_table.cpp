// fp8kit table: an exhaustive conversion table as raw bytes, for diffing a kernel's own output.
#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <memory>
#include <new>
#include <vector>

#include <fcntl.h>
#include <omp.h>
#include <sys/stat.h>
#include <unistd.h>

#include "command.hpp"
#include "temp_cleanup.hpp"
#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::cli {
namespace {

struct TableOpts {
    std::string from, to, output;
    PolicyOptions policy;
};

// A regular file (or a name that does not exist yet) is written to a temporary file of a
// unique name in the same folder and renamed over FILE at the end: a failed run never leaves a
// file that looks complete, never touches another file of the user's, and two runs never share
// a temporary. A symlink is written through: the temporary goes next to the file it points at,
// and the rename replaces that file, not the link. Anything else that exists (/dev/null,
// /dev/stdout, a FIFO, a terminal) is written in place: renaming over it would replace the
// device with a plain file.
// Regular files are written with O_DIRECT where the file system allows it: a 4 GiB table then
// goes from our buffers to the disk without passing through the page cache, which costs the
// kernel about 9 s of CPU per table on ext4 (docs/performance.md). Writes that are not whole
// aligned blocks switch the file back to ordinary buffered writes.
class Sink {
public:
    static constexpr std::size_t kAlign = 4096;

    explicit Sink(const std::string& path) : path_(path) {
        if (path == "-") { fd_ = STDOUT_FILENO; in_place_ = true; return; }
        struct stat st {}, lst {};
        const bool exists = ::stat(path.c_str(), &st) == 0;
        if (exists && S_ISDIR(st.st_mode)) throw UsageError(fmt::format("-o {}: is a directory", path));
        const bool dangling = !exists && ::lstat(path.c_str(), &lst) == 0 && S_ISLNK(lst.st_mode);
        in_place_ = (exists && !S_ISREG(st.st_mode)) || dangling;
        if (in_place_) {  // a device, FIFO or terminal; or a dangling link, created through
            fd_ = ::open(path.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC | (dangling ? O_CREAT : 0), 0666);
            if (fd_ < 0) throw UsageError(fmt::format("-o {}: cannot write: {}", path, std::strerror(errno)));
            return;
        }
        target_ = path;
        if (exists) {  // through any symlinks, to the file itself
            char* real = ::realpath(path.c_str(), nullptr);
            if (!real) throw UsageError(fmt::format("-o {}: cannot resolve: {}", path, std::strerror(errno)));
            target_ = real;
            std::free(real);
        }
        const auto slash = target_.find_last_of('/');
        const std::string dir = slash == std::string::npos ? "" : target_.substr(0, slash + 1);
        const std::string base = slash == std::string::npos ? target_ : target_.substr(slash + 1);
        std::string tmpl = dir + "." + base + ".XXXXXX.partial";
        fd_ = make_registered_temp(tmpl.data(), 8, O_CLOEXEC);  // Ctrl-C now removes it (temp_cleanup.hpp)
        if (fd_ < 0) throw UsageError(fmt::format("-o {}: cannot create a temporary file in {}: {}", path,
                                                  dir.empty() ? "." : dir, std::strerror(errno)));
        tmp_ = tmpl;
        // mkostemps creates the file 0600; a table is as readable as any file the user writes.
        const mode_t mask = ::umask(0);
        ::umask(mask);
        ::fchmod(fd_, exists ? (st.st_mode & 07777) : (0666 & ~mask));
        const int fl = ::fcntl(fd_, F_GETFL);
        direct_ = fl >= 0 && ::fcntl(fd_, F_SETFL, fl | O_DIRECT) == 0;
    }
    void write(const void* p, std::size_t n) {
        if (direct_ && (reinterpret_cast<std::uintptr_t>(p) % kAlign != 0 || n % kAlign != 0)) buffered();
        const auto* c = static_cast<const char*>(p);
        while (n > 0) {
            const ssize_t w = ::write(fd_, c, n);
            if (w < 0 && errno == EINTR) continue;
            if (w < 0 && errno == EINVAL && direct_) { buffered(); continue; }
            if (w <= 0) fail();
            c += w;
            n -= static_cast<std::size_t>(w);
        }
    }
    void commit() {
        if (fd_ == STDOUT_FILENO) return;
        const int fd = fd_;
        fd_ = -1;
        if (::close(fd) != 0) fail();
        if (!in_place_ && rename_and_forget(tmp_.c_str(), target_.c_str()) != 0) fail();
        tmp_.clear();
    }
    ~Sink() {
        if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
        if (!tmp_.empty()) ::unlink(tmp_.c_str());
        forget_temp_file();
    }

private:
    void buffered() {
        direct_ = false;
        const int fl = ::fcntl(fd_, F_GETFL);
        if (fl < 0 || ::fcntl(fd_, F_SETFL, fl & ~O_DIRECT) != 0) fail();
    }
    [[noreturn]] void fail() {
        const std::string why = std::strerror(errno);
        if (fd_ >= 0 && fd_ != STDOUT_FILENO) ::close(fd_);
        if (!tmp_.empty()) ::unlink(tmp_.c_str());
        forget_temp_file();
        tmp_.clear();
        fd_ = -1;
        throw UsageError(fmt::format("-o {}: write failed: {}", path_, why));
    }
    std::string path_, target_, tmp_;
    int fd_ = -1;
    bool in_place_ = false;
    bool direct_ = false;
};

// Slices aligned for O_DIRECT.
struct AlignedBytes {
    explicit AlignedBytes(std::size_t n)
        : size(n), data(static_cast<std::uint8_t*>(std::aligned_alloc(Sink::kAlign, (n + Sink::kAlign - 1) / Sink::kAlign * Sink::kAlign))) {
        if (!data) throw std::bad_alloc();
    }
    ~AlignedBytes() { std::free(data); }
    AlignedBytes(const AlignedBytes&) = delete;
    AlignedBytes& operator=(const AlignedBytes&) = delete;
    std::size_t size;
    std::uint8_t* data;
};

// Writes filled slices in order on a thread of its own; the caller fills the next free one
// meanwhile. kSlots slices in flight smooth out a disk or a pipe that is briefly slower than
// the computation.
class SliceWriter {
public:
    static constexpr std::size_t kSlots = 4;

    SliceWriter(Sink& sink, std::size_t slice) : sink_(sink) {
        for (std::size_t i = 0; i < kSlots; ++i) bufs_.push_back(std::make_unique<AlignedBytes>(slice));
        thread_ = std::thread([this] { loop(); });
    }
    ~SliceWriter() {
        {
            std::lock_guard<std::mutex> l(m_);
            stop_ = true;
        }
        cv_.notify_all();
        thread_.join();
    }
    // The next slice to fill; waits while every slice is queued for writing.
    AlignedBytes& next() {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return queued_ < kSlots || error_; });
        if (error_) std::rethrow_exception(error_);
        return *bufs_[(head_ + queued_) % kSlots];
    }
    // Queue the slice returned by next().
    void push() {
        {
            std::lock_guard<std::mutex> l(m_);
            ++queued_;
        }
        cv_.notify_all();
    }
    // Wait until everything queued is written.
    void finish() {
        std::unique_lock<std::mutex> l(m_);
        cv_.wait(l, [&] { return queued_ == 0 || error_; });
        if (error_) std::rethrow_exception(error_);
    }

private:
    void loop() {
        for (;;) {
            AlignedBytes* b;
            {
                std::unique_lock<std::mutex> l(m_);
                cv_.wait(l, [&] { return queued_ > 0 || stop_; });
                if (stop_) return;
                b = bufs_[head_].get();
            }
            try {
                sink_.write(b->data, b->size);
            } catch (...) {
                std::lock_guard<std::mutex> l(m_);
                error_ = std::current_exception();
                cv_.notify_all();
                return;
            }
            {
                std::lock_guard<std::mutex> l(m_);
                head_ = (head_ + 1) % kSlots;
                --queued_;
            }
            cv_.notify_all();
        }
    }
    Sink& sink_;
    std::vector<std::unique_ptr<AlignedBytes>> bufs_;
    std::mutex m_;
    std::condition_variable cv_;
    std::size_t head_ = 0, queued_ = 0;
    bool stop_ = false;
    std::exception_ptr error_;
    std::thread thread_;
};

Register reg([](CLI::App& root) {
    auto o = std::make_shared<TableOpts>();
    auto* cmd = root.add_subcommand(
        "table",
        "Write a whole conversion table as raw bytes: one output per input bit pattern, in increasing order.\n"
        "Encode tables: --from f32|f16|bf16 --to FORMAT (2^32 bytes for f32, 65,536 for f16/bf16).\n"
        "Decode tables: --from FORMAT --to f32|f16|bf16 (2^bits little-endian values: 16 for FP4, 64 for FP6, 256 for FP8).\n"
        "Codes are one per byte, in the low bits (FP4: 0x0..0xF).");
    cmd->add_option("--from", o->from, "Input type (f32, f16, bf16) or a format of at most 8 bits")->required();
    cmd->add_option("--to", o->to, "Output format (at most 8 bits, one code per byte), or f32/f16/bf16 for a decode table")->required();
    cmd->add_option("-o,--output", o->output, "Output file, or - for standard output")->required();
    o->policy.add_to(cmd);
    cmd->callback([o] {
        const auto wide_from = parse_wide(o->from);
        const auto fmt_from = parse_format(o->from);
        if (fmt_from) {  // decode table
            const Wide to = require_wide(o->to, "--to");
            if (to == Wide::f64) throw UsageError("--to: decode tables are written as f32, f16 or bf16");
            const int n = emu::code_count(*fmt_from);  // 16 for FP4, 64 for FP6, else 256
            std::vector<std::uint8_t> codes(static_cast<std::size_t>(n));
            for (int i = 0; i < n; ++i) codes[i] = static_cast<std::uint8_t>(i);
            std::vector<unsigned char> out(codes.size() * wide_size(to));
            decode_array(*fmt_from, to, codes.data(), out.data(), codes.size());
            Sink sink(o->output);
            sink.write(out.data(), out.size());
            sink.commit();
            return;
        }
        if (!wide_from || *wide_from == Wide::f64)
            throw UsageError(fmt::format("--from: '{}' is neither f32, f16, bf16 nor an 8-bit format ({})", o->from, format_choices()));
        const Format to = require_format(o->to, "--to");
        const Policy p = o->policy.resolve(to, *wide_from);
        if (p.rounding == Rounding::stochastic)
            throw UsageError("--round stochastic has no single table; choose a deterministic rounding");
        const std::uint64_t total = std::uint64_t{1} << (8 * wide_size(*wide_from));
        const std::size_t slice = std::min<std::uint64_t>(std::uint64_t{1} << 24, total);
        // Slices are written on a thread of their own while the next ones are computed, so a
        // 4 GiB table costs about max(compute, write) rather than their sum.
        // A SIMD path computes about 5 G codes/s on one core (docs/performance.md), faster than a
        // file is written, so it runs on one thread: more threads only wait for each other at
        // the end of every slice, which on a shared machine cost more than they computed. The
        // scalar path needs every core.
        if (std::string(encode_path(to, *wide_from, p)) != "scalar") omp_set_num_threads(1);
        Sink sink(o->output);
        SliceWriter writer(sink, slice);
        for (std::uint64_t first = 0; first < total; first += slice) {
            AlignedBytes& buf = writer.next();  // rethrows a write error (UsageError)
            encode_bit_range(to, *wide_from, first, slice, buf.data, p);
            writer.push();
        }
        writer.finish();
        sink.commit();
    });
});

}  // namespace
}  // namespace fp8kit::cli
