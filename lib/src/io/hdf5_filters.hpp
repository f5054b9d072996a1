// Internal: the two HDF5 filters dumps use (deflate, shuffle), decoded by fp8kit itself.
//
// Why not let libhdf5 decode them: libhdf5 1.10 does not check that a decoded chunk has the
// chunk's size. A chunk whose deflate stream ends early, or whose filter mask says "no filters"
// on compressed bytes, makes H5Dread copy past the end of its own buffer (heap over-read, found by
// tests/corrupt under AddressSanitizer; garbage numbers in a normal build). Decoding here lets the
// reader demand exactly the chunk's size and name the chunk when it is wrong.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace fp8kit::dump::detail {

// A filter pipeline in write order, as H5Pget_filter2 lists it.
struct FilterStep {
    enum Kind { shuffle, deflate } kind;
    unsigned element_size = 1;  // shuffle: the element size it was set up with (cd_values[0])
};

// Decodes one stored chunk into exactly `chunk_bytes` at `out`: the pipeline's filters in reverse
// order, skipping those whose bit is set in `filter_mask` (bit i: filter i of the write order was
// not applied to this chunk). Returns "" on success, else what is wrong with the chunk.
// `scratch` is reused between calls.
std::string decode_chunk(const std::vector<FilterStep>& pipeline, unsigned filter_mask, const unsigned char* stored,
                         std::size_t stored_size, std::size_t chunk_bytes, std::vector<unsigned char>& scratch,
                         unsigned char* out);

}  // namespace fp8kit::dump::detail
