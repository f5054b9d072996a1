// The element formats that have no cast table and no sm_90 cvt instruction: FP4 E2M1 and FP6
// E2M3 / E3M2 (OCP MX v1.0 elements) and ml_dtypes' e3m4, e4m3b11fnuz and e4m3ieee. Their
// kernels (narrow_cast.cu, fp4_blocks.cu) run emu::convert itself on the device: the emulation is
// the path on sm_90. The hardware FP4/FP6 conversions (cvt.rn.satfinite.e2m1x2.f32 and friends)
// exist only from sm_100 (PTX ISA 8.6); fp8kit does not use them, and require_no_fp4_cvt below
// refuses loudly a request for them. Internal to cuda/src.
#pragma once

#include <type_traits>

#include "common.cuh"

namespace fp8kit::cuda::detail {

inline bool is_narrow_format(Format f) {
    return f == Format::e2m1 || f == Format::e2m3 || f == Format::e3m2 || f == Format::e3m4 ||
           f == Format::e4m3b11fnuz || f == Format::e4m3ieee;
}

// The same set as emu types, for compile-time choices (element.cuh's path_exists): these formats
// take the kConvert path (emu::convert on the device) in every element-wise kernel.
template <class D>
constexpr bool is_narrow_type() {
    return std::is_same_v<D, emu::E2M1> || std::is_same_v<D, emu::E2M3> || std::is_same_v<D, emu::E3M2> ||
           std::is_same_v<D, emu::E3M4> || std::is_same_v<D, emu::E4M3B11FNUZ> || std::is_same_v<D, emu::E4M3IEEE>;
}

// Host dispatch of a run-time narrow format to a callable templated on its emu format.
template <class Fn>
decltype(auto) with_narrow(Format f, Fn&& fn) {
    switch (f) {
        case Format::e2m3: return fn(emu::E2M3{});
        case Format::e3m2: return fn(emu::E3M2{});
        case Format::e3m4: return fn(emu::E3M4{});
        case Format::e4m3b11fnuz: return fn(emu::E4M3B11FNUZ{});
        case Format::e4m3ieee: return fn(emu::E4M3IEEE{});
        case Format::e2m1: break;
        default: throw std::invalid_argument("fp8kit::cuda: internal: with_narrow called for an FP8 format");
    }
    return fn(emu::E2M1{});
}

// Every element format with an element-wise kernel: the FP8 ones (with_fp8) and the narrow ones.
template <class Fn>
decltype(auto) with_cast_format(Format f, Fn&& fn) {
    if (is_narrow_format(f)) return with_narrow(f, std::forward<Fn>(fn));
    return with_fp8(f, std::forward<Fn>(fn));
}

// quantize() for a narrow format (narrow_cast.cu): same definition as kernels.hpp's quantize.
void quantize_narrow(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy,
                     float scale, std::uint64_t seed, std::uint64_t first_index, cudaStream_t stream);

}  // namespace fp8kit::cuda::detail
