// Cast tables: for a deterministic rounding, the code of a float32 y in an FP8 element format D
// depends only on y's sign, exponent, leading D::man_bits + 1 mantissa bits and whether any bit
// below them is set (the kept bits, the rounding bit and the sticky bit, for normal and subnormal
// results alike, and the NaN payload bits a NaN code keeps). A table indexed by those
// 1 + 8 + (man_bits + 1) + 1 bits (16 KiB for E4M3, 8 KiB for E5M2) therefore holds every answer;
// each entry is emu::convert's result for one representative y of its key (the key's bits with
// the sticky bit as the lowest mantissa bit). E8M0 is excluded (its result for float32
// subnormals depends on more bits). cuda/tools/exhaustive_check.cu compares the table path with
// emu::convert on all 2^32 inputs for every policy. Internal to cuda/src.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit::cuda::detail {

template <class D>
constexpr int cast_table_drop() {
    return 22 - D::man_bits;
}  // float32 mantissa bits below the key

template <class D>
constexpr std::size_t cast_table_size() {
    return std::size_t{1} << (D::man_bits + 11);
}

template <class D>
__host__ __device__ __forceinline__ std::uint32_t cast_table_key(std::uint32_t y) {
    constexpr int kDrop = cast_table_drop<D>();
    return ((y >> kDrop) << 1) | ((y & ((1u << kDrop) - 1u)) != 0u ? 1u : 0u);
}

template <class D>
__host__ __device__ __forceinline__ std::uint32_t cast_table_representative(std::uint32_t key) {
    return ((key >> 1) << cast_table_drop<D>()) | (key & 1u);
}

// Device pointer to the table of (format, policy) (deterministic rounding, format not E8M0),
// built on first use on this device (on `stream`, which is then synchronized once) and kept for
// the life of the process.
const std::uint8_t* cast_table(emu::Format to, const emu::Policy& policy, cudaStream_t stream);

}  // namespace fp8kit::cuda::detail
