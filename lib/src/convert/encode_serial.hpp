// Internal: encode_array's conversion on the calling thread only, for code that already splits
// its work across threads (statistics). Same codes as encode_array, deterministic roundings only.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::detail {

// out[i] = code of in[i] (raw bits of `from`) for i < n; policy.rounding must not be stochastic.
void encode_array_serial(Format to, Wide from, const void* in, std::uint8_t* out, std::size_t n, const Policy& policy);

}  // namespace fp8kit::detail
