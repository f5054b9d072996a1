// TE's random Hadamard transform of one 16-element group on the device, in S's own bits: the three
// calls of lib/src/convert/hadamard.cpp (widen each element exactly to binary64 by emu::convert,
// numerics::te_rht16_group, round once to S by emu::convert, nearest even). One function, so that
// te_rht16_columnwise (hadamard.cu, the column-wise copy) and the block quantiser that applies the
// transform as it casts (block_rows.cu, rht_col_blocks_kernel) compute the same bits by the same
// code. Internal to cuda/src.
#pragma once

#include "common.cuh"
#include "fp8kit/numerics/hadamard.hpp"

namespace fp8kit::cuda::detail {

constexpr emu::Policy kRhtRne{emu::Rounding::nearest_even, emu::Overflow::no_saturate,
                              emu::NanEncoding::signed_quiet_payload};

// y = round_S(te_rht16_group(x)): x and y are 16 elements of S (storage bits).
template <class S>
__device__ __forceinline__ void rht16_round(const typename S::storage_t (&x)[16], bool random_signs,
                                            typename S::storage_t (&y)[16]) {
    double v[16], t[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const std::uint64_t d = emu::convert<S, emu::Binary64>(x[i], kRhtRne);
        v[i] = __longlong_as_double(static_cast<long long>(d));
    }
    numerics::te_rht16_group(v, random_signs, t);
#pragma unroll
    for (int j = 0; j < 16; ++j)
        y[j] = static_cast<typename S::storage_t>(
            emu::convert<emu::Binary64, S>(static_cast<std::uint64_t>(__double_as_longlong(t[j])), kRhtRne));
}

}  // namespace fp8kit::cuda::detail
