// The layout of a StatsRecord's counters and sums as the statistics kernels fill them, written once
// for statistics.cu (the element loop) and statistics_bins.cu (the magnitude histogram), and read
// by stats_of_record.
#pragma once

#include <cfloat>

#include "fp8kit/cuda/statistics_async.hpp"

namespace fp8kit::cuda::detail {

enum Count { kZeros, kNan, kInf, kUnderflow, kSubnormal, kOverflow, kTeOverflow, kNonzeroX, kNonzeroQ, kCounts };
enum Sum { kX2, kErr2, kSums };
static_assert(sizeof(StatsRecord) % 8 == 0, "records are copied as 64-bit words");
static_assert(kCounts <= 16 && kSums == 2, "StatsRecord holds 16 counters and 2 sums");

// A scale pair the statistics can use (finite and > 0 both); otherwise the record says scale_ok 0.
__device__ __forceinline__ bool usable(float scale, float scale_inv) {
    return scale > 0.0f && scale <= FLT_MAX && scale_inv > 0.0f && scale_inv <= FLT_MAX;
}

// The checks every asynchronous statistics entry point makes of one plan and its buffers
// (statistics.cu); `fn` names the entry point in the message.
void check_async_args(const StatsPlan& p, const float* d_amax, const void* d_record, const void* d_workspace,
                      std::uint32_t sample, std::size_t n, const char* fn);

}  // namespace fp8kit::cuda::detail
