// MS-AMP's scale rule and the casts its paths use (include/fp8kit/simulate.hpp, docs/msamp.md).
#include "../convert/float_bits.hpp"
#include <cmath>
#include <cstdint>
#include <limits>

#include "fp8kit/emu/formats.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {
namespace {

constexpr emu::Policy kSatfinite{emu::Rounding::nearest_even, emu::Overflow::saturate_all,
                                 emu::NanEncoding::canonical};
// __float2half and Tensor.to(torch.float16): round to nearest even, Inf past 65504.
constexpr emu::Policy kIeee{emu::Rounding::nearest_even, emu::Overflow::no_saturate,
                            emu::NanEncoding::canonical};

// torch.log2 on a float32 tensor: log2f, taken here as correctly rounded (the binary64 log2
// rounded to float32). Within half a float32 ulp of an integer k it returns k, also for q just
// below 2^k, where the exact floor would be k - 1: MS-AMP's scale is then twice the exact one.
// CUDA's log2f (1 ulp) can differ from the correctly rounded value in that band.
float log2f_rounded(float q) { return static_cast<float>(std::log2(static_cast<double>(q))); }

}  // namespace

float compute_scaling_factor(float amax, float scale, float fp_max, int margin) {
    // 1. TorchScript: `fp_max / amax` is `torch.reciprocal(amax) * fp_max`.
    const float q = (1.0f / amax) * fp_max;
    // 2. exp = floor(log2(q)) - margin, float32 (log2 of 0 is -Inf, of a negative or NaN q NaN)
    float e = std::floor(log2f_rounded(q)) - static_cast<float>(margin);
    // 3. sf = round(2^|exp|): a power of two, Inf past 2^127, NaN for a NaN exp.
    const float a = std::fabs(e);
    float sf = std::isnan(a) ? a : (a > 127.0f ? std::numeric_limits<float>::infinity() : std::ldexp(1.0f, static_cast<int>(a)));
    // 4. and 5. the old scale where amax is not positive, then where it is not finite.
    if (!(amax > 0.0f)) sf = scale;
    if (!std::isfinite(amax)) sf = scale;
    // 6. the inverse where exp < 0 (NaN compares false).
    if (e < 0) sf = 1.0f / sf;
    return sf;
}

std::uint8_t to_e4m3_satfinite(float x) {
    return emu::convert<emu::Binary32, emu::E4M3>(detail::bits_of(x), kSatfinite);
}
std::uint8_t half_to_e4m3_satfinite(std::uint16_t h) { return emu::convert<emu::Binary16, emu::E4M3>(h, kSatfinite); }
float e4m3_to_float(std::uint8_t code) {
    return detail::float_of(static_cast<std::uint32_t>(emu::convert<emu::E4M3, emu::Binary32>(code, emu::kDecodePolicy)));
}
std::uint16_t to_f16(float x) { return emu::convert<emu::Binary32, emu::Binary16>(detail::bits_of(x), kIeee); }
float f16_to_float(std::uint16_t h) {
    return detail::float_of(static_cast<std::uint32_t>(emu::convert<emu::Binary16, emu::Binary32>(h, emu::kDecodePolicy)));
}

std::uint8_t fp8_add(std::uint8_t a, std::uint8_t b, HopArith h) {
    if (h == HopArith::float32) return to_e4m3_satfinite(e4m3_to_float(a) + e4m3_to_float(b));
    // __half(x) is exact; __hadd rounds the exact sum to half (the float32 sum of two E4M3
    // values is exact, so rounding it once to half is __hadd's result).
    return half_to_e4m3_satfinite(to_f16(e4m3_to_float(a) + e4m3_to_float(b)));
}

}  // namespace fp8kit::simulate
