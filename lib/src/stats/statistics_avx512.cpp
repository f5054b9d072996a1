// AVX-512 (F only) element kernel of compute_stats; the contract is in statistics_simd.hpp.
// Each predicate is numerics::element_step's test on the bits, for float32 x (a = |x| bits,
// s = bits of fl32(x * scale), cm = code magnitude): nan a > Inf; inf a == Inf; zero a == 0;
// te_overflow Inf >= a > te_threshold; overflow (x finite) |s| > limit[sign of s]; underflow and
// subnormal: x finite nonzero with code kind zero / subnormal (cm == 0 / 1 <= cm <= sub_max_code).
#include "stats/statistics_simd.hpp"

#if defined(__x86_64__) && defined(__AVX512F__)
#include <immintrin.h>

namespace fp8kit::simd {

void stats_avx512(const StatsConsts& c, const std::uint32_t* xs, const std::uint32_t* ss, const std::uint8_t* qs,
                  std::size_t m, StatsAcc& acc) {
    const __m512i abs_mask = _mm512_set1_epi32(0x7FFFFFFF), inf_bits = _mm512_set1_epi32(0x7F800000),
                  max_finite = _mm512_set1_epi32(0x7F7FFFFF), max_sub_f32 = _mm512_set1_epi32(0x007FFFFF),
                  one = _mm512_set1_epi32(1), thr = _mm512_set1_epi32(static_cast<int>(c.te_threshold)),
                  lim_pos = _mm512_set1_epi32(static_cast<int>(c.limit_pos)),
                  lim_neg = _mm512_set1_epi32(static_cast<int>(c.limit_neg)), code_mag = _mm512_set1_epi32(0x7F),
                  sub_max = _mm512_set1_epi32(static_cast<int>(c.sub_max_code));
    const __m512d scale_inv = _mm512_set1_pd(c.scale_inv);
    // Per-lane counters (at most m / 16 + 1 per lane, reduced at the end).
    __m512i n_nan = _mm512_setzero_si512(), n_inf = n_nan, n_zero = n_nan, n_zero_s = n_nan, n_sub_s = n_nan,
            n_te = n_nan, n_over = n_nan, n_qzero = n_nan, n_under = n_nan, n_sub = n_nan, amax = n_nan,
            mn = _mm512_set1_epi32(-1);
    __m512d sx2 = _mm512_loadu_pd(acc.sx2), se2 = _mm512_loadu_pd(acc.se2);
    for (std::size_t i = 0; i < m; i += 16) {
        const __mmask16 k = m - i >= 16 ? __mmask16(0xFFFF) : __mmask16((1u << (m - i)) - 1);
        const __m512i x = _mm512_loadu_si512(xs + i);
        const __m512i s = _mm512_loadu_si512(ss + i);
        const __m512i q = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(qs + i)));
        const __m512i a = _mm512_and_si512(x, abs_mask), smag = _mm512_and_si512(s, abs_mask);
        const __mmask16 finite = _mm512_mask_cmplt_epu32_mask(k, a, inf_bits);
        const __mmask16 finite_nonzero = _mm512_mask_cmplt_epu32_mask(k, _mm512_sub_epi32(a, one), max_finite);
        n_nan = _mm512_mask_add_epi32(n_nan, _mm512_mask_cmpgt_epu32_mask(k, a, inf_bits), n_nan, one);
        n_inf = _mm512_mask_add_epi32(n_inf, _mm512_mask_cmpeq_epi32_mask(k, a, inf_bits), n_inf, one);
        n_zero = _mm512_mask_add_epi32(n_zero, _mm512_mask_cmpeq_epi32_mask(k, a, _mm512_setzero_si512()), n_zero, one);
        n_zero_s = _mm512_mask_add_epi32(n_zero_s, _mm512_mask_cmpeq_epi32_mask(k, smag, _mm512_setzero_si512()),
                                         n_zero_s, one);
        n_sub_s = _mm512_mask_add_epi32(
            n_sub_s, _mm512_mask_cmplt_epu32_mask(k, _mm512_sub_epi32(smag, one), max_sub_f32), n_sub_s, one);
        const __mmask16 te = _mm512_mask_cmple_epu32_mask(_mm512_mask_cmpgt_epu32_mask(k, a, thr), a, inf_bits);
        n_te = _mm512_mask_add_epi32(n_te, te, n_te, one);
        const __m512i lim =
            _mm512_mask_blend_epi32(_mm512_cmplt_epi32_mask(s, _mm512_setzero_si512()), lim_pos, lim_neg);
        n_over = _mm512_mask_add_epi32(n_over, _mm512_mask_cmpgt_epu32_mask(finite, smag, lim), n_over, one);
        amax = _mm512_mask_max_epu32(amax, finite, amax, a);
        mn = _mm512_mask_min_epu32(mn, finite_nonzero, mn, a);
        const __m512i cm = _mm512_and_si512(q, code_mag);
        const __mmask16 qz = _mm512_mask_cmpeq_epi32_mask(k, cm, _mm512_setzero_si512());
        const __mmask16 qsub = _mm512_mask_cmplt_epu32_mask(k, _mm512_sub_epi32(cm, one), sub_max);
        n_qzero = _mm512_mask_add_epi32(n_qzero, qz, n_qzero, one);
        n_under = _mm512_mask_add_epi32(n_under, qz & finite_nonzero, n_under, one);
        n_sub = _mm512_mask_add_epi32(n_sub, qsub & finite_nonzero, n_sub, one);
        // Sums: elements i..i+7 to lanes 0..7, then i+8..i+15 to lanes 0..7 (index order per lane).
        for (int half = 0; half < 2; ++half) {
            const __m256i xh = half ? _mm512_extracti64x4_epi64(x, 1) : _mm512_castsi512_si256(x);
            const __m256i qh = half ? _mm512_extracti64x4_epi64(q, 1) : _mm512_castsi512_si256(q);
            const __mmask8 fin = static_cast<__mmask8>(half ? finite >> 8 : finite & 0xFF);
            const __m512d xd = _mm512_cvtps_pd(_mm256_castsi256_ps(xh));
            const __m512d dq = _mm512_i32gather_pd(qh, c.dec_err, 8);
            const __m512d e = _mm512_sub_pd(xd, _mm512_mul_pd(dq, scale_inv));
            sx2 = _mm512_mask_add_pd(sx2, fin, sx2, _mm512_mul_pd(xd, xd));
            se2 = _mm512_mask_add_pd(se2, fin, se2, _mm512_mul_pd(e, e));
        }
    }
    _mm512_storeu_pd(acc.sx2, sx2);
    _mm512_storeu_pd(acc.se2, se2);
    acc.nan += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_nan));
    acc.inf += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_inf));
    acc.zeros += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_zero));
    acc.zero_s += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_zero_s));
    acc.sub_s += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_sub_s));
    acc.te_over += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_te));
    acc.over += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_over));
    acc.qzero += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_qzero));
    acc.under += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_under));
    acc.sub += static_cast<std::uint32_t>(_mm512_reduce_add_epi32(n_sub));
    const std::uint32_t am = static_cast<std::uint32_t>(_mm512_reduce_max_epu32(amax));
    const std::uint32_t mi = static_cast<std::uint32_t>(_mm512_reduce_min_epu32(mn));
    if (am > acc.amax) acc.amax = am;
    if (mi < acc.min_nonzero) acc.min_nonzero = mi;
}

namespace {

// Sixteen 16-bit elements: x^2 (finite x only) and err2[h] into the lanes, elements 0..7 then 8..15.
inline void half_step(__m256i h16, __mmask16 k, bool bf16, const double* err2, __m512d& sx2, __m512d& se2) {
    const __m512i idx = _mm512_cvtepu16_epi32(h16);
    const __m512i exp_mask = _mm512_set1_epi32(bf16 ? 0x7F80 : 0x7C00);
    const __mmask16 finite = _mm512_mask_cmpneq_epi32_mask(k, _mm512_and_si512(idx, exp_mask), exp_mask);
    // Exact widening: bfloat16 is the top half of a float32; vcvtph2ps is exact for finite float16.
    const __m512 x = bf16 ? _mm512_castsi512_ps(_mm512_slli_epi32(idx, 16)) : _mm512_cvtph_ps(h16);
    for (int half = 0; half < 2; ++half) {
        const __m256 xh =
            half ? _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)) : _mm512_castps512_ps256(x);
        const __m256i ih = half ? _mm512_extracti64x4_epi64(idx, 1) : _mm512_castsi512_si256(idx);
        const __mmask8 fin = static_cast<__mmask8>(half ? finite >> 8 : finite & 0xFF);
        const __mmask8 kh = static_cast<__mmask8>(half ? k >> 8 : k & 0xFF);
        const __m512d xd = _mm512_cvtps_pd(xh);
        sx2 = _mm512_mask_add_pd(sx2, fin, sx2, _mm512_mul_pd(xd, xd));
        se2 = _mm512_mask_add_pd(se2, kh, se2, _mm512_mask_i32gather_pd(_mm512_setzero_pd(), kh, ih, err2, 8));
    }
}

}  // namespace

void half_sums_avx512(const void* data, std::size_t m, bool bf16, const double* err2, double* sx2_out,
                      double* se2_out) {
    const auto* h = static_cast<const std::uint16_t*>(data);
    __m512d sx2 = _mm512_loadu_pd(sx2_out), se2 = _mm512_loadu_pd(se2_out);
    std::size_t i = 0;
    for (; i + 16 <= m; i += 16)
        half_step(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(h + i)), 0xFFFF, bf16, err2, sx2, se2);
    if (i < m) {  // the tail through a zero-padded copy (no read past the array), masked
        std::uint16_t tail[16] = {};
        for (std::size_t j = 0; j < m - i; ++j) tail[j] = h[i + j];
        const auto k = static_cast<__mmask16>((1u << (m - i)) - 1);
        half_step(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(tail)), k, bf16, err2, sx2, se2);
    }
    _mm512_storeu_pd(sx2_out, sx2);
    _mm512_storeu_pd(se2_out, se2);
}

}  // namespace fp8kit::simd
#endif
