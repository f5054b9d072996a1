// Lists a dump and reads every tensor it offers, as `fp8kit inspect` does. Errors (DumpError,
// Problem records) are the expected answer to a bad file; a crash, a sanitizer report or an
// allocation past libFuzzer's limit is a finding.
#pragma once

#include <cstdint>
#include <cstdlib>
#include <functional>
#include <string>

#include "fp8kit/io/dump.hpp"
#include "fuzz_input_file.hpp"

namespace fp8kit::fuzz {

inline dump::ReadOptions fuzz_read_options() {
    dump::ReadOptions opts;
    opts.chunk_bytes = 4096;  // several chunks per tensor even for tiny inputs
    opts.hdf5_cache_bytes = 1 << 20;
    // libhdf5 can loop on corrupt metadata; the reader's listing child is stopped after this much
    // silence, well inside libFuzzer's -timeout (a valid input lists in milliseconds).
    opts.hdf5_listing_timeout_ms = 2000;
    return opts;
}

// `then`, if given, runs after the reads with the input's path and its listing (the file still exists).
inline void read_whole_dump(const std::uint8_t* data, std::size_t size,
                            const std::function<void(const std::string&, const dump::Source&)>& then = {}) {
    InputFile file(data, size);
    const dump::ReadOptions opts = fuzz_read_options();
    std::unique_ptr<dump::Source> src;
    try {
        src = dump::open_source(file.path(), opts);
    } catch (const dump::DumpError&) {
        return;
    }
    for (const auto& t : src->tensors()) {
        // A few bytes of HDF5 can describe a valid tensor of 2^40 elements (unwritten chunks read
        // as the fill value): correct to stream, but it would only show up as a timeout.
        if (t.numel > (std::uint64_t(1) << 20)) continue;
        std::uint64_t seen = 0;
        try {
            src->read(t, [&](const dump::Chunk& c) {
                // The chunks must tile the tensor in order and never run past its element count.
                if (c.first != seen || c.count == 0 || c.first + c.count > t.numel) std::abort();
                volatile unsigned char sink = 0;
                const auto* b = static_cast<const unsigned char*>(c.bits);
                const std::size_t width = c.wide == Wide::f64 ? 8 : c.wide == Wide::f32 ? 4 : 2;
                for (std::size_t i = 0; i < c.count * width; ++i) sink = sink ^ b[i];  // ASan checks every byte
                seen += c.count;
            });
        } catch (const dump::DumpError&) {
            continue;
        }
        if (seen != t.numel) std::abort();  // a read that "succeeded" but delivered too few elements
    }
    if (then) then(file.path(), *src);
}

}  // namespace fp8kit::fuzz
