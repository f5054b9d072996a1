// Strict parsing of the numbers users type on the command line: the whole text must be a number,
// or the answer is "no" (std::nullopt) and the caller names the argument in its error.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fp8kit {

// Decimal or C hex-float ("0x1.8p-9"), "inf", "nan" with optional sign, read to the nearest
// binary64 (strtod, correctly rounded). Empty text, trailing characters, or a decimal exponent
// so large that strtod overflows are accepted only when they spell an infinity.
std::optional<double> parse_number(std::string_view text);

// Unsigned integer in 0..max: hex "0x..", binary "0b..", or decimal. No sign, no spaces.
std::optional<std::uint64_t> parse_unsigned(std::string_view text, std::uint64_t max);

// A float32 given as a number, exactly representable or rounded to nearest-even.
std::optional<float> parse_float32(std::string_view text);

}  // namespace fp8kit
