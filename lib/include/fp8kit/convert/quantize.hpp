// Bulk conversion of arrays on the CPU (OpenMP), every element through emu::convert or a SIMD
// path that tests/emu prove identical on all 2^32 float32 inputs. Inputs are raw bits: f64 as
// uint64, f32 as uint32, f16 and bf16 as uint16, little-endian as in memory.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/convert/names.hpp"

namespace fp8kit {

// Size in bytes of one element of a wide format.
std::size_t wide_size(Wide w);

// out[i] = encode(in[i]) for i < n. Rounding::stochastic draws emu::stochastic_bits(seed,
// first_index + i) for element i, so any split of an array gives the same codes.
void encode_array(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy,
                  std::uint64_t seed = 0, std::uint64_t first_index = 0);

// out[i] = decode(in[i]) written as the bits of `to`.
void decode_array(Format from, Wide to, const std::uint8_t* in, void* out, std::size_t n);

// The codes of the n consecutive input bit patterns starting at `first_bits` (conversion tables).
void encode_bit_range(Format to, Wide from, std::uint64_t first_bits, std::size_t n, std::uint8_t* out,
                      const Policy& policy);

// Which implementation encode_array and encode_bit_range use for these arguments on this CPU
// under the current path limit (for benchmarks/logs): "avx512", "avx2" or "scalar".
// The SIMD paths cover E4M3 and E5M2 from f32, f16 and bf16 with Rounding::nearest_even, every
// Overflow policy and NanEncoding canonical, signed_all_ones and signed_quiet; everything else
// runs the scalar emu::convert loop.
const char* encode_path(Format to, Wide from, const Policy& policy);

// Implementations in increasing order of preference.
enum class EncodePath : std::uint8_t { scalar, avx2, avx512 };

// Whether this build and this CPU (and its OS) can run `p`. scalar: always.
bool encode_path_supported(EncodePath p);

// The fastest path allowed. Starts at avx512, or at scalar when the environment variable
// FP8KIT_FORCE_SCALAR is set to a non-empty value other than "0". Tests and benchmarks lower it
// to exercise each path on one machine; it is process-wide, so set it before converting.
void set_encode_path_limit(EncodePath p);
EncodePath encode_path_limit();

}  // namespace fp8kit
