// One value or code at a time, with everything a kernel author wants to see (`fp8kit encode`,
// `fp8kit decode`): the code, its fields and class, the decoded value, the error and the two
// neighbouring codes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include <nlohmann/json_fwd.hpp>

#include "fp8kit/convert/names.hpp"

namespace fp8kit {

// The binary64 `x` as a `from` value, rounded to nearest-even like a C cast (f64: x's own bits).
std::uint64_t wide_bits(double x, Wide from);
// The value of `from` bits, exactly, as binary64.
double wide_value(Wide from, std::uint64_t bits);
// A code's value as text: "nan", "inf", "-inf", or the shortest decimal that reads back exactly.
std::string value_text(Format f, std::uint8_t c);
// The finite codes next to x: the largest value below x and the smallest above it (-1: none).
// -0 is left out (the same value as +0). Brute force over all codes on purpose.
std::pair<int, int> neighbours(Format f, double x);

// `bits` of the source type `from` (the user typed `input`) encoded to `to` under `p`: JSON
// {input, from, input_bits, to, policy, code, fields, class, value, error, below, above}, or the
// text (one line, then the neighbours' line).
nlohmann::json encode_json(const std::string& input, Wide from, std::uint64_t bits, Format to, const Policy& p);
std::string encode_text(const std::string& input, Wide from, std::uint64_t bits, Format to, const Policy& p);
// Code `c` of `f`: JSON {code, format, fields, class, value, f32_bits, f16_bits, bf16_bits}, or
// the text line.
nlohmann::json decode_json(Format f, std::uint8_t c);
std::string decode_text(Format f, std::uint8_t c);

}  // namespace fp8kit
