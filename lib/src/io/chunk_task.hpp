// Internal: one unit of parallel reading, shared by every dump reader (docs/ARCHITECTURE.md,
// "Chunk tasks"). A task names stored bytes (a file and a byte range, or bytes a caller already
// read) and the filters that encode them; run_chunk_task reads and decodes it on any thread.
// Readers list tasks in a fixed order on their own thread (where libhdf5's global lock is held
// anyway) and run them through parallel::ordered, which hands the decoded chunks back in that
// order: results never depend on the thread count. An MPI rank runs a subset of the tasks.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "io/hdf5_filters.hpp"

namespace fp8kit::dump::detail {

struct ChunkTask {
    int fd = -1;                            // the file, opened read-only by the reader (the file named)
    std::uint64_t offset = 0;               // where the stored bytes start in it
    std::uint64_t size = 0;                 // stored bytes; 0: a chunk never written, read as `fill` repeated
    const unsigned char* stored = nullptr;  // or: the stored bytes, already in memory (size of them)
    const std::vector<FilterStep>* pipeline = nullptr;  // null or empty: stored as they are
    unsigned filter_mask = 0;                           // bit i: filter i of the write order was not applied
    std::size_t decoded_bytes = 0;                      // what the chunk holds decoded
};

// Reads (pread) and decodes `t` into exactly t.decoded_bytes at `out`; `fill` is one element.
// Safe on any thread: scratch memory is per thread (threads x chunk size). Returns "" or what is
// wrong with the chunk (a short read, a stream that does not decode to the chunk's size).
std::string run_chunk_task(const ChunkTask& t, const std::vector<unsigned char>& fill, unsigned char* out);

// pread of exactly n bytes at `offset`, retried on EINTR; "" or what went wrong.
std::string pread_exact(int fd, void* buf, std::size_t n, std::uint64_t offset);

// The n bytes at `offset` of the file, mapped read-only (unmapped when the last copy of the
// pointer goes); null when the mapping fails or n < kMapMin (then the caller preads). Measured
// faster than pread into a buffer for data in the page cache (docs/performance.md, issue 22:
// the kernel copy of pread ran at 0.4-1.4 GB/s on the dev VM, one pass over a mapping at 1.6-3.9).
// Null too when offset + n runs past the file's end now (cut since it was listed: pread then
// reports the short read); a file cut by another process while mapped would still raise SIGBUS
// on access (fp8kit reads files nobody is writing).
constexpr std::uint64_t kMapMin = std::uint64_t(4) << 20;
std::shared_ptr<const void> map_extent(int fd, std::uint64_t offset, std::uint64_t n);

}  // namespace fp8kit::dump::detail
