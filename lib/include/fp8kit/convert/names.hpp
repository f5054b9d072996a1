// Names users type for formats, policies and profiles, and the names fp8kit prints.
// Parsing returns std::nullopt on an unknown name; `*_choices()` lists what is accepted, so every
// error message can say what would have worked.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit {

using emu::Format;
using emu::NanEncoding;
using emu::Overflow;
using emu::Policy;
using emu::Profile;
using emu::Rounding;
using emu::Wide;

std::optional<Format> parse_format(std::string_view s);  // e4m3, e4m3fn, float8_e4m3fn, ...
std::optional<Wide> parse_wide(std::string_view s);      // f64 f32 f16 bf16 (and long names)
std::optional<Rounding> parse_rounding(std::string_view s);
std::optional<Overflow> parse_overflow(std::string_view s);
std::optional<NanEncoding> parse_nan(std::string_view s);
std::optional<Profile> parse_profile(std::string_view s);

std::string_view name(Format f);            // "e4m3", "e5m2", "e4m3fnuz", "e5m2fnuz", "e8m0"
std::string_view ml_dtypes_name(Format f);  // "float8_e4m3fn", ...
std::string_view name(Wide w);              // "f64", "f32", "f16", "bf16"
std::string_view name(Rounding r);          // "nearest-even", ...
std::string_view name(Overflow o);          // "saturate-all", "saturate-finite", "no-saturate"
std::string_view name(NanEncoding n);       // "canonical", "signed-all-ones", "signed-quiet"
std::string_view name(Profile p);           // "cuda-satfinite", "cuda-nosat", "ml_dtypes", "torch"

std::string format_choices();
std::string wide_choices();
std::string rounding_choices();
std::string overflow_choices();
std::string nan_choices();
std::string profile_choices();

// A policy as one line: "nearest-even, saturate-all, NaN canonical".
std::string describe(const Policy& p);

}  // namespace fp8kit
