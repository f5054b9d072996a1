// Internal: the SIMD encode kernels (quantize_avx2.cpp, quantize_avx512.cpp) and the constants
// they run on. Each kernel is compiled with its own -m flags and only called after a run-time
// CPU check, so this header holds nothing that needs those flags.
//
// The method, per element (integer only, so the floating-point environment cannot change it):
//   a = |x| as bits. NaN: a > 0x7F800000; Inf: a == 0x7F800000.
//   Destination-normal range (a >= bits of the destination's smallest normal): round the f32
//   bits themselves, r = (a + half - 1 + lsb) >> (23 - M), and rebias: code = r - rebias. A
//   mantissa carry walks into the exponent field, which is the right answer, and code >
//   max_code means overflow (the rounded value is past the largest finite one).
//   Below it (destination subnormals and underflow): shift the f32 significand (implicit one
//   made explicit) right by shift = sub_base - biased_exp, clamped to 31, rounding the same way;
//   a carry to 1 << M is exactly the smallest normal code.
// tests/emu/test_simd_encode.cpp checks this against emu::convert on every float32 input.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8kit::simd {

struct EncodeConsts {
    std::uint32_t round_shift;    // 23 - M
    std::uint32_t rebias;         // (127 - bias) << M
    std::uint32_t min_normal;     // f32 bits of the destination's smallest normal
    std::uint32_t sub_base;       // shift = sub_base - biased f32 exponent, below min_normal
    std::uint32_t max_code;       // largest finite magnitude code
    std::uint32_t overflow_code;  // magnitude code for finite overflow (the sign is added)
    std::uint32_t inf_code;       // magnitude code for +-Inf inputs (the sign is added)
    std::uint32_t nan_code;       // code for NaN inputs
    std::uint32_t nan_sign;       // 0x80 when NaN codes carry the input's sign, else 0
};

// Kernels: out[i] = code of in[i] for i < n; any n (tails go through a padded block).
// stream: write whole cache lines with non-temporal stores (no read-for-ownership of `out`, and
// it does not evict the input from cache); for arrays far larger than the caches.
void encode_f32_avx2(const EncodeConsts& c, const std::uint32_t* in, std::uint8_t* out, std::size_t n, bool stream);
void encode_f16_avx2(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream);
void encode_bf16_avx2(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream);
void encode_f32_avx512(const EncodeConsts& c, const std::uint32_t* in, std::uint8_t* out, std::size_t n, bool stream);
void encode_f16_avx512(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream);
void encode_bf16_avx512(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream);

// Conversion tables: out[i] = code of the f32 bit pattern first + i (mod 2^32), i < n, with the
// patterns made in registers rather than read from memory.
void encode_f32_range_avx2(const EncodeConsts& c, std::uint32_t first, std::uint8_t* out, std::size_t n);
void encode_f32_range_avx512(const EncodeConsts& c, std::uint32_t first, std::uint8_t* out, std::size_t n);

}  // namespace fp8kit::simd
