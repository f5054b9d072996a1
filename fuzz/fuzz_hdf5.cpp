// The HDF5 reading layer (dataset walk, type/attribute checks, chunked reads) on arbitrary file
// images. Inputs that do not start with the HDF5 signature would go to the safetensors reader,
// which has its own harness, so they are skipped here to keep the time on HDF5.
#include <cstring>

#include "fuzz_dump_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (size < sizeof kSignature || std::memcmp(data, kSignature, sizeof kSignature) != 0) return 0;
    fp8kit::fuzz::read_whole_dump(data, size);
    return 0;
}
