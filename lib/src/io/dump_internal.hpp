// Shared by the dump readers (not installed): the two file kinds, and the conversion of stored
// elements into delivered chunks.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp8kit/io/dump.hpp"

namespace fp8kit::dump::detail {

std::unique_ptr<Source> open_hdf5(const std::string& path, const ReadOptions& opts);
std::unique_ptr<Source> open_safetensors(const std::string& path, const ReadOptions& opts);

std::size_t stored_size(DType d);  // bytes of one stored element (FP8: 1)

// Elements per read so that neither the stored nor the delivered bytes exceed the budget.
std::size_t elements_per_read(DType d, const ReadOptions& opts);

// Hands `n` stored little-endian elements to `fn` as delivered bits (FP8 codes decoded to f32
// through `scratch`, which is resized as needed).
void deliver(DType d, const void* stored, std::size_t n, std::uint64_t first,
             std::vector<std::uint8_t>& scratch, const ChunkFn& fn);

// Fills step/role from the name (then the file name, for the step) where no attribute gave them.
void complete_guesses(TensorInfo& t);

// out = a * b; true when that overflows 64 bits.
bool mul_overflows(std::uint64_t a, std::uint64_t b, std::uint64_t& out);

}  // namespace fp8kit::dump::detail
