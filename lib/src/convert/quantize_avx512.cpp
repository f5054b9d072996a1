// AVX-512 (F only) encode kernels (compiled with -mavx512f; called only when the CPU and OS
// support AVX512F). The method is described in quantize_simd.hpp.
#include "convert/quantize_simd.hpp"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

// No standard-library templates here: an out-of-line copy instantiated in this file would carry
// AVX instructions and the linker could pick it for the portable path too.

#include <cstdint>
#include <cstring>

namespace fp8kit::simd {
namespace {

struct Avx512Consts {
    __m128i round_shift;
    __m512i abs_mask, inf_bits, half_m1, rebias, min_normal, sub_base, shift_cap, man_mask, implicit, one, max_code,
        overflow_code, inf_code, nan_code, nan_sign, sign_bit;

    explicit Avx512Consts(const EncodeConsts& c)
        : round_shift(_mm_cvtsi32_si128(static_cast<int>(c.round_shift))),
          abs_mask(_mm512_set1_epi32(0x7FFFFFFF)),
          inf_bits(_mm512_set1_epi32(0x7F800000)),
          half_m1(_mm512_set1_epi32(static_cast<int>((1u << (c.round_shift - 1)) - 1))),
          rebias(_mm512_set1_epi32(static_cast<int>(c.rebias))),
          min_normal(_mm512_set1_epi32(static_cast<int>(c.min_normal))),
          sub_base(_mm512_set1_epi32(static_cast<int>(c.sub_base))),
          shift_cap(_mm512_set1_epi32(31)),
          man_mask(_mm512_set1_epi32(0x007FFFFF)),
          implicit(_mm512_set1_epi32(0x00800000)),
          one(_mm512_set1_epi32(1)),
          max_code(_mm512_set1_epi32(static_cast<int>(c.max_code))),
          overflow_code(_mm512_set1_epi32(static_cast<int>(c.overflow_code))),
          inf_code(_mm512_set1_epi32(static_cast<int>(c.inf_code))),
          nan_code(_mm512_set1_epi32(static_cast<int>(c.nan_code))),
          nan_sign(_mm512_set1_epi32(static_cast<int>(c.nan_sign))),
          sign_bit(_mm512_set1_epi32(0x80)) {}
};

// Sixteen f32 bit patterns -> sixteen bytes of codes.
inline __m128i encode16(const Avx512Consts& k, __m512i x) {
    const __m512i a = _mm512_and_si512(x, k.abs_mask);
    const __m512i sign = _mm512_and_si512(_mm512_srli_epi32(x, 24), k.sign_bit);

    const __m512i lsb = _mm512_and_si512(_mm512_srl_epi32(a, k.round_shift), k.one);
    const __m512i rounded = _mm512_srl_epi32(_mm512_add_epi32(a, _mm512_add_epi32(k.half_m1, lsb)), k.round_shift);
    const __m512i normal = _mm512_sub_epi32(rounded, k.rebias);

    const __m512i shift = _mm512_min_epu32(_mm512_sub_epi32(k.sub_base, _mm512_srli_epi32(a, 23)), k.shift_cap);
    const __m512i sig = _mm512_or_si512(_mm512_and_si512(a, k.man_mask), k.implicit);
    const __m512i sub_lsb = _mm512_and_si512(_mm512_srlv_epi32(sig, shift), k.one);
    const __m512i sub_half_m1 = _mm512_sub_epi32(_mm512_sllv_epi32(k.one, _mm512_sub_epi32(shift, k.one)), k.one);
    const __m512i sub = _mm512_srlv_epi32(_mm512_add_epi32(sig, _mm512_add_epi32(sub_half_m1, sub_lsb)), shift);

    __m512i mag = _mm512_mask_blend_epi32(_mm512_cmplt_epu32_mask(a, k.min_normal), normal, sub);
    mag = _mm512_mask_mov_epi32(mag, _mm512_cmpgt_epu32_mask(mag, k.max_code), k.overflow_code);
    mag = _mm512_mask_mov_epi32(mag, _mm512_cmpeq_epi32_mask(a, k.inf_bits), k.inf_code);
    __m512i code = _mm512_or_si512(mag, sign);
    const __m512i nan = _mm512_or_si512(k.nan_code, _mm512_and_si512(sign, k.nan_sign));
    code = _mm512_mask_mov_epi32(code, _mm512_cmpgt_epu32_mask(a, k.inf_bits), nan);
    return _mm512_cvtepi32_epi8(code);
}

struct LoadF32 {
    using T = std::uint32_t;
    static __m512i load(const T* p) { return _mm512_loadu_si512(p); }
};
struct LoadF16 {  // binary16 -> binary32 is exact, NaN stays NaN with its sign
    using T = std::uint16_t;
    static __m512i load(const T* p) {
        return _mm512_castps_si512(_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))));
    }
};
struct LoadBF16 {  // bfloat16 is the top half of a binary32
    using T = std::uint16_t;
    static __m512i load(const T* p) {
        return _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))), 16);
    }
};

template <class L>
void run(const EncodeConsts& c, const typename L::T* in, std::uint8_t* out, std::size_t n) {
    const Avx512Consts k(c);
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m128i c0 = encode16(k, L::load(in + i));
        const __m128i c1 = encode16(k, L::load(in + i + 16));
        const __m128i c2 = encode16(k, L::load(in + i + 32));
        const __m128i c3 = encode16(k, L::load(in + i + 48));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), c0);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 16), c1);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 32), c2);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 48), c3);
    }
    for (; i < n; i += 16) {  // the tail goes through the same code on a zero-padded block
        const std::size_t m = n - i < 16 ? n - i : 16;
        typename L::T block[16] = {};
        std::memcpy(block, in + i, m * sizeof(typename L::T));
        std::uint8_t codes[16];
        _mm_storeu_si128(reinterpret_cast<__m128i*>(codes), encode16(k, L::load(block)));
        std::memcpy(out + i, codes, m);
    }
}

// Non-temporal stores of whole 64-byte lines of `out`; the part before the first line boundary
// and the tail go through run().
template <class L>
void run_stream(const EncodeConsts& c, const typename L::T* in, std::uint8_t* out, std::size_t n) {
    const auto misalign = static_cast<std::size_t>(reinterpret_cast<std::uintptr_t>(out) % 64);
    const std::size_t to_line = (64 - misalign) % 64;
    const std::size_t head = n < to_line ? n : to_line;
    run<L>(c, in, out, head);
    const Avx512Consts k(c);
    std::size_t i = head;
    for (; i + 64 <= n; i += 64) {
        __m512i line = _mm512_castsi128_si512(encode16(k, L::load(in + i)));
        line = _mm512_inserti32x4(line, encode16(k, L::load(in + i + 16)), 1);
        line = _mm512_inserti32x4(line, encode16(k, L::load(in + i + 32)), 2);
        line = _mm512_inserti32x4(line, encode16(k, L::load(in + i + 48)), 3);
        _mm512_stream_si512(reinterpret_cast<__m512i*>(out + i), line);
    }
    _mm_sfence();
    run<L>(c, in + i, out + i, n - i);
}

}  // namespace

void encode_f32_avx512(const EncodeConsts& c, const std::uint32_t* in, std::uint8_t* out, std::size_t n, bool stream) {
    if (stream)
        run_stream<LoadF32>(c, in, out, n);
    else
        run<LoadF32>(c, in, out, n);
}
void encode_f16_avx512(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream) {
    if (stream)
        run_stream<LoadF16>(c, in, out, n);
    else
        run<LoadF16>(c, in, out, n);
}
void encode_bf16_avx512(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream) {
    if (stream)
        run_stream<LoadBF16>(c, in, out, n);
    else
        run<LoadBF16>(c, in, out, n);
}

void encode_f32_range_avx512(const EncodeConsts& c, std::uint32_t first, std::uint8_t* out, std::size_t n) {
    const Avx512Consts k(c);
    const __m512i sixteen = _mm512_set1_epi32(16);
    __m512i x = _mm512_add_epi32(_mm512_set1_epi32(static_cast<int>(first)),
                                 _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    std::size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        const __m512i x1 = _mm512_add_epi32(x, sixteen);
        const __m512i x2 = _mm512_add_epi32(x1, sixteen);
        const __m512i x3 = _mm512_add_epi32(x2, sixteen);
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), encode16(k, x));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 16), encode16(k, x1));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 32), encode16(k, x2));
        _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i + 48), encode16(k, x3));
        x = _mm512_add_epi32(x3, sixteen);
    }
    std::uint32_t tail[64];
    for (std::size_t j = 0; j < n - i; ++j) tail[j] = first + static_cast<std::uint32_t>(i + j);
    run<LoadF32>(c, tail, out + i, n - i);
}

}  // namespace fp8kit::simd
#endif
