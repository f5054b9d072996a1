// Host-side facts about each format of at most 8 bits, all derived from emu's traits (nothing typed in).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fp8kit/convert/names.hpp"

namespace fp8kit {

enum class CodeClass { zero, subnormal, normal, infinity, nan };
const char* name(CodeClass c);

struct FormatInfo {
    Format format;
    int exp_bits, man_bits, bias;
    int total_bits;  // 4 (FP4), 6 (FP6) or 8; codes are 0 .. code_count - 1, one per byte
    int code_count;
    std::uint8_t sign_mask;  // 0 for unsigned formats (E8M0)
    bool has_nan;
    bool has_sign, has_inf, has_negative_zero, has_zero;
    std::uint8_t max_finite_code, min_normal_code, min_subnormal_code;
    double max_finite, min_normal, min_subnormal;  // min_subnormal = min_normal when none
    int emin, emax;
    std::vector<std::uint8_t> nan_codes, inf_codes;
};

FormatInfo format_info(Format f);

double decode_value(Format f, std::uint8_t code);  // exact (binary64 holds every 8-bit value)
// Codes of at most 8 bits: code_count(f) = 2^total_bits; higher bits of a code are ignored.
CodeClass classify(Format f, std::uint8_t code);

// "s e m" fields of a code as binary digits, e.g. "0 1111 110" (E8M0: "11111110").
std::string fields(Format f, std::uint8_t code);

// `fp8kit formats`: every format's bits, bias, limits (with their codes), -0, NaN and Inf codes
// and ml_dtypes name, as a table (one row per format) or as JSON (an array of objects).
nlohmann::json formats_json();
void write_formats_text(std::FILE* out);

}  // namespace fp8kit
