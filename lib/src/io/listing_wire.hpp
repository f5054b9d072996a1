// Internal: a file's listing (tensors, errors, notes) as bytes, so that the child process that
// lists an HDF5 file first (dump_hdf5.cpp: libhdf5 1.10 can crash or loop on corrupt metadata)
// hands its result to the parent instead of the parent listing the file a second time (10^5
// datasets: 13 s per listing).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/io/dump.hpp"

namespace fp8kit::dump::detail {

// Where a tensor stored contiguously as it is delivered lies in the file: what listing learned,
// so that reading need not open the dataset again. bytes 0: not known (libhdf5 is asked).
struct Extent {
    std::uint64_t addr = 0, bytes = 0;
};

struct Listing {
    std::vector<TensorInfo> tensors;
    std::vector<Problem> errors, notes;
    std::vector<Extent> extents;  // empty, or one per tensor
};

std::string encode_listing(const Listing& l);
// false when the bytes are not a whole listing (then the caller lists the file itself).
bool decode_listing(const std::string& bytes, Listing& out);

}  // namespace fp8kit::dump::detail
