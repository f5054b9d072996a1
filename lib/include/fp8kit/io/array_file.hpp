// One array from a file, whatever the container: .npy, raw little-endian .bin (type and shape
// given by the caller), or an HDF5 dataset written as `file.h5:/path/to/dataset`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/io/dump.hpp"

namespace fp8kit {

// Unreadable file, wrong size, unsupported type: the message names the file or dataset.
struct ArrayFileError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// What an element is. u8: one byte (FP8 codes, E8M0 scales).
enum class ElementType { f64, f32, f16, bf16, u8 };
std::string_view name(ElementType t);
std::optional<ElementType> parse_element_type(std::string_view s);  // f64 f32 f16 bf16 u8
std::size_t element_size(ElementType t);
std::optional<Wide> as_wide(ElementType t);  // u8 has none

struct ArrayFile {
    std::string source;               // as the user named it
    ElementType type;
    std::vector<std::size_t> shape;
    std::vector<unsigned char> data;  // little-endian elements, C order
    std::size_t size() const;         // element count
};

// For raw files (anything that is neither .npy nor `file:/dataset`): the element type, and the
// shape (empty: one dimension from the file size). Ignored for .npy and HDF5, which carry both.
struct RawLayout {
    std::optional<ElementType> type;
    std::vector<std::size_t> shape;
};

// .npy dtypes: '<f8' '<f4' '<f2' -> f64 f32 f16; '<u2' and 'V2' -> bf16 (bits);
// '|u1' and 'V1' -> u8. HDF5: IEEE floats by size (2 bytes: f16 or bf16 by mantissa width),
// 1-byte integers or opaque -> u8, 2-byte integers or opaque -> bf16 (a 'dtype' attribute, as
// in dumps, decides otherwise). HDF5 datasets are read by the dump reader (dump.hpp) with `opts`:
// the same checks and limits as inspect, and nothing outside the named file.
ArrayFile load_array(const std::string& source, const RawLayout& raw, const dump::ReadOptions& opts = {});

// What load_array would return, less the data: the type and shape from headers (.npy header,
// raw file size, HDF5 dataset listing), nothing read. Same errors as load_array for everything
// that does not need the data, so a caller can check its operands against each other before
// loading any (validate: a wrong --output must not wait for a huge --input).
struct ArrayInfo {
    std::string source;
    ElementType type;
    std::vector<std::size_t> shape;
    std::uint64_t numel() const;  // product of shape (1 for a scalar)
};
ArrayInfo describe_array(const std::string& source, const RawLayout& raw, const dump::ReadOptions& opts = {});

// "a x b x c" for messages.
std::string shape_text(const std::vector<std::size_t>& shape);
// Parses "4096x1024", "4096,1024" or "4096"; nullopt on anything else.
std::optional<std::vector<std::size_t>> parse_shape(std::string_view s);

}  // namespace fp8kit
