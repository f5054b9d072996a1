// validate() on files, as `fp8kit validate` runs it (lib/src/validate/files.cpp): the kernel's
// input, its codes and its block scales, each a file or a tensor in one (file.npy, raw .bin,
// file.h5:/path or file.h5:path, model.safetensors:name), checked against each other from their
// headers before any data is read (a wrong --output must not wait for a huge --input to load),
// then mapped where they lie in the file: under mpirun each rank reads only the pages of its own
// blocks (docs/mpi.md).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8kit/io/array_file.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit {

// Bad input (a file, a tensor, their types or shapes, options that do not fit them): the CLI
// exits 2. Messages name the CLI's options where one is at fault (--packed, --scales-dtype, ...).
struct ValidateInputError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct ValidateFileSpec {
    std::string input, output;  // sources, as above
    RawLayout raw;              // a raw input's element type and shape
    Format to = Format::e4m3;
    bool packed = false;  // output: E2M1 codes two per byte along each row, element 2i in the low nibble
    // One scale for the whole input (mode scale or scale_inv, value S, no scales file) or block
    // scales from `scales` (mode scale or scale_inv).
    ScaleMode mode = ScaleMode::none;
    float value = 1.0f;
    std::string scales;  // empty: no block scales
    BlockLayout layout = BlockLayout::tensor;
    ScaleType scales_type = ScaleType::f32;  // as asked for; one-byte scales are E8M0 unless e4m3
    ScaleOrder order = ScaleOrder::row_major;
    std::optional<float> global;  // E4M3 scales' second-level scale (default 1)
};

// The opened files and the request over them (it points into them: keep this alive while it is
// used).
struct ValidateFiles {
    ValidateRequest request{};
    std::vector<std::uint64_t> shape;  // the input's, for ValidateReport::shape
    ArrayFile in, out;
    std::vector<std::uint8_t> unpacked;  // packed output, one code per byte
    std::vector<float> block_scales;     // row-major float32, as validate() reads them
};

// A raw input's element type and shape as the CLI spells them (--dtype f64|f32|f16|bf16, --shape
// 4096x1024; empty: not given). ValidateInputError naming the option.
RawLayout parse_raw_layout(const std::string& dtype, const std::string& shape);

// Reads the headers, checks them against each other and the spec, then maps the data. `policy`
// gives the reference policy once the input's element type is known (it may throw). Throws
// ValidateInputError on bad input.
std::unique_ptr<ValidateFiles> open_validate_files(const ValidateFileSpec& spec, const dump::ReadOptions& read,
                                                   const std::function<Policy(Wide)>& policy);

}  // namespace fp8kit
