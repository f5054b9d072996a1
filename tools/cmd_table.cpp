// fp8kit table: an exhaustive conversion table as raw bytes, for diffing a kernel's own output.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <memory>
#include <new>
#include <vector>

#include <omp.h>

#include "command.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/io/sink.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::table_command {
namespace {

struct TableOpts {
    std::string from, to, output;
    PolicyOptions policy;
};

// The output goes through the one sink (io/sink.hpp: a unique temporary renamed into place, a
// device or FIFO written in place). Regular files are written with O_DIRECT where the file system
// allows it: a 4 GiB table then goes from our buffers to the disk without passing through the page
// cache, which costs the kernel about 9 s of CPU per table on ext4 (docs/performance.md).
using Sink = io::OutputFile;

// Slices aligned for O_DIRECT.
struct AlignedBytes {
    explicit AlignedBytes(std::size_t n)
        : size(n),
          data(static_cast<std::uint8_t*>(
              std::aligned_alloc(Sink::kAlign, (n + Sink::kAlign - 1) / Sink::kAlign * Sink::kAlign))) {
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
        "Decode tables: --from FORMAT --to f32|f16|bf16 (2^bits little-endian values: 16 for FP4, 64 for FP6, 256 for "
        "FP8).\n"
        "Codes are one per byte, in the low bits (FP4: 0x0..0xF).");
    cmd->add_option("--from", o->from, "Input type (f32, f16, bf16) or a format of at most 8 bits")->required();
    cmd->add_option("--to", o->to,
                    "Output format (at most 8 bits, one code per byte), or f32/f16/bf16 for a decode table")
        ->required();
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
            Sink sink(o->output, "-o", true);
            sink.write(out.data(), out.size());
            sink.commit();
            return;
        }
        if (!wide_from || *wide_from == Wide::f64)
            throw UsageError(fmt::format("--from: '{}' is neither f32, f16, bf16 nor an 8-bit format ({})", o->from,
                                         format_choices()));
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
        Sink sink(o->output, "-o", true);
        SliceWriter writer(sink, slice);
        for (std::uint64_t first = 0; first < total; first += slice) {
            AlignedBytes& buf = writer.next();  // rethrows a write error (io::OutputError)
            encode_bit_range(to, *wide_from, first, slice, buf.data, p);
            writer.push();
        }
        writer.finish();
        sink.commit();
    });
});

}  // namespace
}  // namespace fp8kit::cli::table_command
