// torch.save files (TransformerEngine DumpTensors): the strict zip reader, the non-executing
// pickle interpreter and the tensor checks (offset/size/stride against the storage), through the
// same open_source/read path as `fp8kit inspect`; then inspect's comparison of a Float8Tensor's
// codes with the reference (check_te_quantized, and check_te_quantized_columnwise for the
// column-wise copy), each reading the file again on its own.
#include "fuzz_dump_common.hpp"
#include "fp8kit/validate.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fp8kit::fuzz::read_whole_dump(data, size, [](const std::string& path, const fp8kit::dump::Source&) {
        if (fp8kit::dump::is_hdf5_file(path)) return;  // the hdf5 harnesses cover those
        try {
            (void)fp8kit::check_te_quantized(path);
        } catch (const fp8kit::dump::DumpError&) {}
        try {
            (void)fp8kit::check_te_quantized_columnwise(path);
        } catch (const fp8kit::dump::DumpError&) {}
    });
    return 0;
}
