// safetensors: the u64 header length, the JSON header (dtype, shape, data_offsets) and the data
// it points at, through the same open_source/read path as `fp8kit inspect`, then every tensor
// (up to a bound) as `validate --output model.safetensors:x` reads it: load_safetensors, the
// reader's raw mode, where FP8 and U8 tensors arrive as their stored codes.
#include "fuzz_dump_common.hpp"
#include "fuzz_validate_path.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fp8kit::fuzz::read_whole_dump(data, size);
    fp8kit::fuzz::InputFile file(data, size);
    const fp8kit::dump::ReadOptions opts = fp8kit::fuzz::fuzz_read_options();
    std::unique_ptr<fp8kit::dump::Source> src;
    try {
        src = fp8kit::dump::open_source(file.path(), opts);
    } catch (const fp8kit::dump::DumpError&) {
        return 0;
    }
    const bool hdf5 = fp8kit::dump::is_hdf5_file(file.path());  // the hdf5 harnesses cover those
    if (!hdf5) fp8kit::fuzz::load_each_as_validate(file.path(), fp8kit::fuzz::names_to_validate(*src), false, opts);
    return 0;
}
