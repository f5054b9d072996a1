// safetensors: the u64 header length, the JSON header (dtype, shape, data_offsets) and the data
// it points at, through the same open_source/read path as `fp8kit inspect`; then every tensor
// (fuzz_validate_path.hpp's bound) as `validate --output model.safetensors:x` reads it
// (load_safetensors: the reader's raw mode, FP8 and U8 as codes), which parses the header again
// for its one tensor. Measured side by side for 30 s on the shared 2-core box (load ~8): 22.0k
// inputs before this was added, 25.0k after (no slowdown beyond the noise).
#include "fuzz_dump_common.hpp"
#include "fuzz_validate_path.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fp8kit::fuzz::read_whole_dump(data, size, [](const std::string& path, const fp8kit::dump::Source& src) {
        if (fp8kit::dump::is_hdf5_file(path)) return;  // the hdf5 harnesses cover those
        fp8kit::fuzz::load_each_as_validate(path, fp8kit::fuzz::names_to_validate(src), false,
                                            fp8kit::fuzz::fuzz_read_options());
    });
    return 0;
}
