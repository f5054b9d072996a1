// Internal: the AVX-512 element kernel of compute_stats (statistics_avx512.cpp, compiled with
// -mavx512f and without floating-point contraction; called only after a run-time CPU check).
// It gives bit for bit what the portable loop in statistics.cpp gives: each vector predicate is
// the bit form of a test of numerics::element_step (numerics/element_stats.hpp), with the same
// numerics::ElementConsts (te_threshold, overflow limits, scale_inv); counts and extremes are
// exact, and each binary64 sum is kept in kStatsLanes partial sums, element i of a chunk going
// to lane i % kStatsLanes in index order, exactly as the portable loop adds them.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fp8kit::simd {

inline constexpr std::size_t kStatsLanes = 8;

struct StatsConsts {
    double scale_inv;                    // ElementConsts::scale_inv
    std::uint32_t te_threshold;          // magnitude bits of ElementConsts::te_threshold
    std::uint32_t limit_pos, limit_neg;  // ElementConsts::limit[0], limit[1]
    std::uint32_t sub_max_code;          // code magnitudes 1..sub_max_code are subnormal, 0 is zero
    const double* dec_err;               // 256 decoded code values, NaN codes as +Inf
};

struct StatsAcc {
    std::uint64_t nan = 0, inf = 0, zeros = 0, zero_s = 0, sub_s = 0, te_over = 0, over = 0, qzero = 0, under = 0,
                  sub = 0;
    std::uint32_t amax = 0, min_nonzero = 0xFFFFFFFFu;  // magnitude bits over finite x
    double sx2[kStatsLanes] = {}, se2[kStatsLanes] = {};
};

// Adds elements [0, m) to acc: xs = float32 bits of x, ss = bits of fl32(x * scale), qs = the
// codes of ss. m must be a multiple of kStatsLanes except at the end of a chunk. Reads up to 15
// elements past m in each array (callers pass buffers with that much room; the values are ignored).
void stats_avx512(const StatsConsts& c, const std::uint32_t* xs, const std::uint32_t* ss, const std::uint8_t* qs,
                  std::size_t m, StatsAcc& acc);

// The two binary64 sums of elements [0, m) of a bfloat16 (bf16 true) or float16 array, added to
// sx2 / se2[kStatsLanes] exactly as stats_avx512 adds them (element i to lane i % kStatsLanes,
// in index order): x^2 of the exact float32 widening of each finite x, and err2[h], looked up by
// the element's 16-bit pattern h (the caller's table: (x - x^)^2 for finite x, +0.0 otherwise,
// and adding +0.0 leaves a sum of squares unchanged).
void half_sums_avx512(const void* data, std::size_t m, bool bf16, const double* err2, double* sx2, double* se2);

}  // namespace fp8kit::simd
