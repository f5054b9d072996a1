// Opens a dump and reads every tensor the listing offers, the way inspect does. Anything but a
// DumpError (or a Problem record) escaping is a failure of the test; every error must name the file.
#pragma once

#include "corrupt_util.hpp"
#include "fp8kit/io/dump.hpp"

namespace fp8kit::corrupt {

struct Outcome {
    bool file_error = false;          // open_source refused the whole file
    std::size_t tensors_read = 0;     // read to the end, element count matching the shape
    std::vector<std::string> errors;  // file-level, listing and read errors, as described
    std::size_t too_large = 0;        // listed, not read (see kMaxReadElements)
};

// A flipped byte in an HDF5 dataspace can turn a 10 KB file into a valid one that lists a tensor of
// 2^40 elements (chunks never written read as the fill value): correct, but hours to stream. Such
// tensors are listed and counted, not read.
constexpr std::uint64_t kMaxReadElements = std::uint64_t(1) << 20;

inline Outcome exercise(const std::string& path) {
    Outcome o;
    dump::ReadOptions opts;
    opts.chunk_bytes = 64;  // many chunks even for small tensors
    // Corrupt global heaps can send libhdf5's listing into a loop: the child process that lists
    // first is stopped after this much silence (a fixture lists in milliseconds).
    opts.hdf5_listing_timeout_ms = 3000;
    std::unique_ptr<dump::Source> src;
    try {
        src = dump::open_source(path, opts);
    } catch (const dump::DumpError& e) {
        CHECK(e.file == path);
        CHECK(contains(e.what(), path));
        o.file_error = true;
        o.errors.push_back(e.what());
        return o;
    }
    for (const auto& p : src->errors()) {
        CHECK(p.file == path);
        CHECK(!p.message.empty());
        o.errors.push_back(p.describe());
    }
    for (const auto& t : src->tensors()) {
        if (t.numel > kMaxReadElements) {
            ++o.too_large;
            continue;
        }
        std::uint64_t seen = 0;
        try {
            src->read(t, [&](const dump::Chunk& c) {
                REQUIRE(c.first == seen);
                REQUIRE(c.first + c.count <= t.numel);
                seen += c.count;
            });
            REQUIRE(seen == t.numel);
            ++o.tensors_read;
        } catch (const dump::DumpError& e) {
            CHECK(e.file == path);
            CHECK(e.name == t.name);
            o.errors.push_back(e.what());
        }
    }
    return o;
}

}  // namespace fp8kit::corrupt
