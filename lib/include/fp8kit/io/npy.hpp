// Reading NumPy .npy files (format versions 1.0, 2.0 and 3.0) without NumPy: the header is
// parsed by hand and checked strictly, because a silently misread dtype or shape turns into
// wrong numbers downstream. Only little-endian or byte-order-free dtypes in C order are accepted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8kit {

// Bad or unsupported file: the message names the file and what is wrong with it.
struct NpyError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

struct NpyHeader {
    int major = 0, minor = 0;        // format version
    std::string descr;               // as written, e.g. "<f4", "|u1", "|V2"
    char kind = 0;                   // 'f', 'u', 'i', 'V', 'b'
    std::size_t item_size = 0;       // bytes per element
    std::vector<std::size_t> shape;  // () is a scalar: one element
    std::size_t data_offset = 0;     // where the array's bytes start
    std::size_t element_count() const;
};

// Parses the header of `path` (throws NpyError naming the file: not .npy, truncated header,
// fortran_order True, big-endian dtype, structured dtype, malformed dictionary, data size
// different from what the shape says).
NpyHeader read_npy_header(const std::string& path);

struct NpyArray {
    NpyHeader header;
    std::vector<unsigned char> data;  // element_count() * item_size bytes, little-endian
};

NpyArray read_npy(const std::string& path);

// Parses a header from memory (what read_npy_header does after reading the file); `what` names
// the source in error messages; `file_size` is checked against the shape.
NpyHeader parse_npy_header(const unsigned char* bytes, std::size_t size, std::size_t file_size,
                           const std::string& what);

// Writes a format 1.0 .npy file (C order): `descr` as NumPy spells it ("<f4", "<u2", "|u1"),
// `bytes` little-endian element bytes. Written through io::OutputFile (io/sink.hpp): a failed
// write leaves nothing behind and `path` as it was; throws io::OutputError naming `option` (the
// argument, e.g. "-o"; may be empty) and the file.
void write_npy(const std::string& path, const std::string& descr, const std::vector<std::size_t>& shape,
               const void* data, std::size_t bytes, const std::string& option = {});

}  // namespace fp8kit
