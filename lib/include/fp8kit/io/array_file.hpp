// One array from a file, whatever the container: .npy, raw little-endian .bin (type and shape
// given by the caller), an HDF5 dataset written as `file.h5:/path/to/dataset`, or a tensor of a
// safetensors file (load_safetensors).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
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
    std::string source;  // as the user named it
    ElementType type;
    std::vector<std::size_t> shape;
    std::vector<unsigned char> data;  // little-endian elements, C order
    std::size_t size() const;         // element count
    // map_array: the elements in place, a read-only mapping of the file (data is then empty).
    std::shared_ptr<const void> mapped = nullptr;
    const unsigned char* bytes() const {
        return mapped ? static_cast<const unsigned char*>(mapped.get()) : data.data();
    }
    // u8 only: the format the file says the codes are in (a safetensors F8_* dtype); empty when
    // it does not say (.npy |u1, raw files, HDF5 integers, safetensors U8).
    std::optional<Format> codes_format = std::nullopt;
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

// As load_array (and load_safetensors for `file` and `tensor` given), but where the elements lie
// in the file as stored (.npy, raw files, HDF5 contiguous datasets, safetensors tensors of 4 MiB
// or more) they are mapped read-only instead of read (ArrayFile::mapped): the process reads only
// the pages it touches, and processes on one node share them in the page cache. validate's MPI
// ranks each touch their own blocks (docs/mpi.md), so each reads about 1/P of the arrays. HDF5
// chunked (compressed) data cannot be mapped: it is read whole, as load_array does. A file cut
// by another process while mapped raises SIGBUS when a lost page is touched (as for inspect's
// mappings, io/chunk_task.hpp).
ArrayFile map_array(const std::string& source, const RawLayout& raw, const dump::ReadOptions& opts = {});
ArrayFile map_safetensors(const std::string& source, const std::string& file, const std::string& tensor,
                          const dump::ReadOptions& opts = {});

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

// Tensor `tensor` of the safetensors file `file` (`source` is how the user wrote both, for
// messages), through the dump reader with its checks (dump.hpp): F64/F32/F16/BF16 as such, FP8
// and E8M0 tensors as their stored codes (u8, codes_format set, not decoded), U8 as codes.
ArrayFile load_safetensors(const std::string& source, const std::string& file, const std::string& tensor,
                           const dump::ReadOptions& opts = {});
// What load_safetensors would return, less the data (type, shape and codes_format; nothing read).
ArrayFile describe_safetensors(const std::string& source, const std::string& file, const std::string& tensor,
                               const dump::ReadOptions& opts = {});

// "a x b x c" for messages.
std::string shape_text(const std::vector<std::size_t>& shape);
// Parses "4096x1024", "4096,1024" or "4096"; nullopt on anything else.
std::optional<std::vector<std::size_t>> parse_shape(std::string_view s);

}  // namespace fp8kit
