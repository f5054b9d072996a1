// Shared by the dump readers (not installed): the two file kinds, and the conversion of stored
// elements into delivered chunks.
#pragma once

#include <stdexcept>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp8kit/io/dump.hpp"

namespace fp8kit::dump::detail {

std::unique_ptr<Source> open_hdf5(const std::string& path, const ReadOptions& opts);
// One dataset of an HDF5 file (validate's `file.h5:/path`), through the same hardened reader;
// nothing else in the file is listed. read() delivers the stored elements as they are (FP8 codes
// not decoded: Chunk::count stored elements of stored_size(dtype) bytes), and integers without
// a 'dtype' attribute are codes (1 byte, listed as e4m3) or bfloat16 bits (2 bytes). The dataset
// is in tensors() if it can be read, else the reason is in errors() or notes().
std::unique_ptr<Source> open_hdf5_dataset(const std::string& path, const std::string& dataset, const ReadOptions& opts);
// `raw` (validate's model.safetensors:name): read() delivers the stored elements as they are (FP8
// codes not decoded, as open_hdf5_dataset), and U8 tensors are listed as one-byte codes (dtype
// e4m3, storage "U8": the file does not say which format they are in). int8_bytes (with raw): I8
// tensors too (storage "I8": ModelOpt's INT8 weights, which `checkpoint check` reads as bytes).
std::unique_ptr<Source> open_safetensors(const std::string& path, const ReadOptions& opts, bool raw = false,
                                         bool int8_bytes = false);

// deliver() found bytes that are not codes of the tensor's FP4 / FP6 format; Dump::read names
// the file and tensor (DumpError).
struct BadCodes : std::runtime_error {
    using std::runtime_error::runtime_error;
};
std::size_t stored_size(DType d);  // bytes of one stored element (FP8: 1)

// Elements per read so that neither the stored nor the delivered bytes exceed the budget.
std::size_t elements_per_read(DType d, const ReadOptions& opts);

// Hands `n` stored little-endian elements to `fn` as delivered bits (FP8 codes decoded to f32
// through `scratch`, which is resized as needed).
void deliver(DType d, const void* stored, std::size_t n, std::uint64_t first, std::vector<std::uint8_t>& scratch,
             const ChunkFn& fn);

// Fills step/role from the name (then the file name, for the step) where no attribute gave them.
void complete_guesses(TensorInfo& t);

// out = a * b; true when that overflows 64 bits.
bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out);

}  // namespace fp8kit::dump::detail
