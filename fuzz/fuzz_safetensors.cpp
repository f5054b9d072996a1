// safetensors: the u64 header length, the JSON header (dtype, shape, data_offsets) and the data
// it points at, through the same open_source/read path as `fp8kit inspect`.
#include "fuzz_dump_common.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fp8kit::fuzz::read_whole_dump(data, size);
    return 0;
}
