// AVX2 encode kernels (compiled with -mavx2 -mf16c; called only when the CPU has both).
// The method is described in quantize_simd.hpp.
#include "convert/quantize_simd.hpp"

#if defined(__x86_64__) && defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>

// No standard-library templates here: an out-of-line copy instantiated in this file would carry
// AVX instructions and the linker could pick it for the portable path too.

#include <cstdint>
#include <cstring>

namespace fp8kit::simd {
namespace {

struct Avx2Consts {
    __m128i round_shift;
    __m256i abs_mask, inf_bits, half_m1, rebias, min_normal, sub_base, shift_cap, man_mask, implicit, one, max_code,
        overflow_code, inf_code, nan_code, nan_sign, sign_bit;

    explicit Avx2Consts(const EncodeConsts& c)
        : round_shift(_mm_cvtsi32_si128(static_cast<int>(c.round_shift))),
          abs_mask(_mm256_set1_epi32(0x7FFFFFFF)),
          inf_bits(_mm256_set1_epi32(0x7F800000)),
          half_m1(_mm256_set1_epi32(static_cast<int>((1u << (c.round_shift - 1)) - 1))),
          rebias(_mm256_set1_epi32(static_cast<int>(c.rebias))),
          min_normal(_mm256_set1_epi32(static_cast<int>(c.min_normal))),
          sub_base(_mm256_set1_epi32(static_cast<int>(c.sub_base))),
          shift_cap(_mm256_set1_epi32(31)),
          man_mask(_mm256_set1_epi32(0x007FFFFF)),
          implicit(_mm256_set1_epi32(0x00800000)),
          one(_mm256_set1_epi32(1)),
          max_code(_mm256_set1_epi32(static_cast<int>(c.max_code))),
          overflow_code(_mm256_set1_epi32(static_cast<int>(c.overflow_code))),
          inf_code(_mm256_set1_epi32(static_cast<int>(c.inf_code))),
          nan_code(_mm256_set1_epi32(static_cast<int>(c.nan_code))),
          nan_sign(_mm256_set1_epi32(static_cast<int>(c.nan_sign))),
          sign_bit(_mm256_set1_epi32(0x80)) {}
};

// Eight f32 bit patterns -> eight codes in the low byte of each 32-bit lane.
inline __m256i encode8(const Avx2Consts& k, __m256i x) {
    const __m256i a = _mm256_and_si256(x, k.abs_mask);
    const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(x, 24), k.sign_bit);

    const __m256i lsb = _mm256_and_si256(_mm256_srl_epi32(a, k.round_shift), k.one);
    const __m256i rounded = _mm256_srl_epi32(_mm256_add_epi32(a, _mm256_add_epi32(k.half_m1, lsb)), k.round_shift);
    const __m256i normal = _mm256_sub_epi32(rounded, k.rebias);

    const __m256i shift = _mm256_min_epu32(_mm256_sub_epi32(k.sub_base, _mm256_srli_epi32(a, 23)), k.shift_cap);
    const __m256i sig = _mm256_or_si256(_mm256_and_si256(a, k.man_mask), k.implicit);
    const __m256i sub_lsb = _mm256_and_si256(_mm256_srlv_epi32(sig, shift), k.one);
    const __m256i sub_half_m1 = _mm256_sub_epi32(_mm256_sllv_epi32(k.one, _mm256_sub_epi32(shift, k.one)), k.one);
    const __m256i sub = _mm256_srlv_epi32(_mm256_add_epi32(sig, _mm256_add_epi32(sub_half_m1, sub_lsb)), shift);

    // a < 2^31, so signed compares are exact here.
    __m256i mag = _mm256_blendv_epi8(normal, sub, _mm256_cmpgt_epi32(k.min_normal, a));
    mag = _mm256_blendv_epi8(mag, k.overflow_code, _mm256_cmpgt_epi32(mag, k.max_code));
    mag = _mm256_blendv_epi8(mag, k.inf_code, _mm256_cmpeq_epi32(a, k.inf_bits));
    const __m256i code = _mm256_or_si256(mag, sign);
    const __m256i nan = _mm256_or_si256(k.nan_code, _mm256_and_si256(sign, k.nan_sign));
    return _mm256_blendv_epi8(code, nan, _mm256_cmpgt_epi32(a, k.inf_bits));
}

// Four vectors of codes -> 32 bytes in element order.
inline __m256i pack32(__m256i v0, __m256i v1, __m256i v2, __m256i v3) {
    const __m256i p01 = _mm256_packus_epi32(v0, v1);
    const __m256i p23 = _mm256_packus_epi32(v2, v3);
    const __m256i p = _mm256_packus_epi16(p01, p23);
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

struct LoadF32 {
    using T = std::uint32_t;
    static __m256i load(const T* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
};
struct LoadF16 {  // binary16 -> binary32 is exact, NaN stays NaN with its sign
    using T = std::uint16_t;
    static __m256i load(const T* p) {
        return _mm256_castps_si256(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
    }
};
struct LoadBF16 {  // bfloat16 is the top half of a binary32
    using T = std::uint16_t;
    static __m256i load(const T* p) {
        return _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))), 16);
    }
};

template <class L>
void run(const EncodeConsts& c, const typename L::T* in, std::uint8_t* out, std::size_t n) {
    const Avx2Consts k(c);
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i v = pack32(encode8(k, L::load(in + i)), encode8(k, L::load(in + i + 8)),
                                 encode8(k, L::load(in + i + 16)), encode8(k, L::load(in + i + 24)));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
    }
    if (i < n) {  // the tail goes through the same code on a zero-padded block
        typename L::T tail_in[32] = {};
        alignas(32) std::uint8_t tail_out[32];
        std::memcpy(tail_in, in + i, (n - i) * sizeof(typename L::T));
        const __m256i v = pack32(encode8(k, L::load(tail_in)), encode8(k, L::load(tail_in + 8)),
                                 encode8(k, L::load(tail_in + 16)), encode8(k, L::load(tail_in + 24)));
        _mm256_store_si256(reinterpret_cast<__m256i*>(tail_out), v);
        std::memcpy(out + i, tail_out, n - i);
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
    const Avx2Consts k(c);
    std::size_t i = head;
    for (; i + 64 <= n; i += 64)
        for (std::size_t h = i; h < i + 64; h += 32) {
            const __m256i v = pack32(encode8(k, L::load(in + h)), encode8(k, L::load(in + h + 8)),
                                     encode8(k, L::load(in + h + 16)), encode8(k, L::load(in + h + 24)));
            _mm256_stream_si256(reinterpret_cast<__m256i*>(out + h), v);
        }
    _mm_sfence();
    run<L>(c, in + i, out + i, n - i);
}

}  // namespace

void encode_f32_avx2(const EncodeConsts& c, const std::uint32_t* in, std::uint8_t* out, std::size_t n, bool stream) {
    if (stream)
        run_stream<LoadF32>(c, in, out, n);
    else
        run<LoadF32>(c, in, out, n);
}
void encode_f16_avx2(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream) {
    if (stream)
        run_stream<LoadF16>(c, in, out, n);
    else
        run<LoadF16>(c, in, out, n);
}
void encode_bf16_avx2(const EncodeConsts& c, const std::uint16_t* in, std::uint8_t* out, std::size_t n, bool stream) {
    if (stream)
        run_stream<LoadBF16>(c, in, out, n);
    else
        run<LoadBF16>(c, in, out, n);
}

void encode_f32_range_avx2(const EncodeConsts& c, std::uint32_t first, std::uint8_t* out, std::size_t n) {
    const Avx2Consts k(c);
    const __m256i iota = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i eight = _mm256_set1_epi32(8);
    __m256i x = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(first)), iota);
    std::size_t i = 0;
    for (; i + 32 <= n; i += 32) {
        const __m256i x1 = _mm256_add_epi32(x, eight);
        const __m256i x2 = _mm256_add_epi32(x1, eight);
        const __m256i x3 = _mm256_add_epi32(x2, eight);
        const __m256i v = pack32(encode8(k, x), encode8(k, x1), encode8(k, x2), encode8(k, x3));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), v);
        x = _mm256_add_epi32(x3, eight);
    }
    std::uint32_t tail[32];
    for (std::size_t j = 0; j < n - i; ++j) tail[j] = first + static_cast<std::uint32_t>(i + j);
    run<LoadF32>(c, tail, out + i, n - i);
}

}  // namespace fp8kit::simd
#endif
