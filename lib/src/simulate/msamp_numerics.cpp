// MS-AMP's scale rule and the casts its paths use (include/fp8kit/simulate.hpp, docs/msamp.md).
#include "../convert/float_bits.hpp"
#include <cmath>
#include <cstdint>
#include <limits>

#include "fp8kit/emu/formats.hpp"
#include "fp8kit/numerics/scale_rules.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {
// The rule is written once, in fp8kit::numerics (scale_rules.hpp).
float compute_scaling_factor(float amax, float scale, float fp_max, int margin) {
    return numerics::msamp_scale(amax, scale, fp_max, margin);
}

std::uint8_t to_e4m3_satfinite(float x) {
    return emu::convert<emu::Binary32, emu::E4M3>(detail::bits_of(x), emu::kRneSaturate);
}
std::uint8_t half_to_e4m3_satfinite(std::uint16_t h) {
    return emu::convert<emu::Binary16, emu::E4M3>(h, emu::kRneSaturate);
}
float e4m3_to_float(std::uint8_t code) {
    return detail::float_of(
        static_cast<std::uint32_t>(emu::convert<emu::E4M3, emu::Binary32>(code, emu::kDecodePolicy)));
}
// __float2half and Tensor.to(torch.float16): round to nearest even, Inf past 65504.
std::uint16_t to_f16(float x) {
    return emu::convert<emu::Binary32, emu::Binary16>(detail::bits_of(x), emu::kRneNoSaturate);
}
float f16_to_float(std::uint16_t h) {
    return detail::float_of(
        static_cast<std::uint32_t>(emu::convert<emu::Binary16, emu::Binary32>(h, emu::kDecodePolicy)));
}

std::uint8_t fp8_add(std::uint8_t a, std::uint8_t b, HopArith h) {
    if (h == HopArith::float32) return to_e4m3_satfinite(e4m3_to_float(a) + e4m3_to_float(b));
    // __half(x) is exact; __hadd rounds the exact sum to half (the float32 sum of two E4M3
    // values is exact, so rounding it once to half is __hadd's result).
    return half_to_e4m3_satfinite(to_f16(e4m3_to_float(a) + e4m3_to_float(b)));
}

}  // namespace fp8kit::simulate
