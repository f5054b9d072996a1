// .npy files: magic, version, header length, the Python-literal dictionary, and the data size the
// shape implies.
#include <cstdint>
#include <cstdlib>

#include "fp8kit/io/npy.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    // From memory, claiming the file is exactly as long as the input.
    try {
        const auto h = fp8kit::parse_npy_header(data, size, size, "fuzz");
        if (h.data_offset > size) std::abort();
    } catch (const fp8kit::NpyError&) {}
    // Through the file reader, which must agree with the header and read exactly the data.
    fp8kit::fuzz::InputFile file(data, size);
    try {
        const auto a = fp8kit::read_npy(file.path());
        if (a.header.data_offset + a.data.size() != size) std::abort();
    } catch (const fp8kit::NpyError&) {}
    return 0;
}
