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

// store(j, round_S(te_rht16_group(x))[j]) for j = 0 .. 15, x[i] = load(i): 16 elements of S
// (storage bits). Every load comes before the first store, so the two may name the same array.
template <class S, class Load, class Store>
__device__ __forceinline__ void rht16_round(Load&& load, bool random_signs, Store&& store) {
    double v[16], y[16];
#pragma unroll
    for (int i = 0; i < 16; ++i) {
        const std::uint64_t d = emu::convert<S, emu::Binary64>(load(i), kRhtRne);
        v[i] = __longlong_as_double(static_cast<long long>(d));
    }
    numerics::te_rht16_group(v, random_signs, y);
#pragma unroll
    for (int j = 0; j < 16; ++j)
        store(j, static_cast<typename S::storage_t>(
                     emu::convert<emu::Binary64, S>(static_cast<std::uint64_t>(__double_as_longlong(y[j])), kRhtRne)));
}

}  // namespace fp8kit::cuda::detail
