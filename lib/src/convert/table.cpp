// Whole conversion tables (convert/table.hpp).
#include "fp8kit/convert/table.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <memory>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

#include <omp.h>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/io/sink.hpp"

namespace fp8kit {
namespace {

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

}  // namespace

void write_decode_table(Format from, Wide to, const std::string& path, const char* arg) {
    const int n = emu::code_count(from);  // 16 for FP4, 64 for FP6, else 256
    std::vector<std::uint8_t> codes(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) codes[i] = static_cast<std::uint8_t>(i);
    std::vector<unsigned char> out(codes.size() * wide_size(to));
    decode_array(from, to, codes.data(), out.data(), codes.size());
    Sink sink(path, arg, true);
    sink.write(out.data(), out.size());
    sink.commit();
}

void write_encode_table(Wide from, Format to, const Policy& p, const std::string& path, const char* arg) {
    const std::uint64_t total = std::uint64_t{1} << (8 * wide_size(from));
    const std::size_t slice = std::min<std::uint64_t>(std::uint64_t{1} << 24, total);
    // Slices are written on a thread of their own while the next ones are computed, so a
    // 4 GiB table costs about max(compute, write) rather than their sum.
    // A SIMD path computes about 5 G codes/s on one core (docs/performance.md), faster than a
    // file is written, so it runs on one thread: more threads only wait for each other at
    // the end of every slice, which on a shared machine cost more than they computed. The
    // scalar path needs every core.
    if (std::string(encode_path(to, from, p)) != "scalar") omp_set_num_threads(1);
    Sink sink(path, arg, true);
    SliceWriter writer(sink, slice);
    for (std::uint64_t first = 0; first < total; first += slice) {
        AlignedBytes& buf = writer.next();  // rethrows a write error (io::OutputError)
        encode_bit_range(to, from, first, slice, buf.data, p);
        writer.push();
    }
    writer.finish();
    sink.commit();
}

}  // namespace fp8kit
