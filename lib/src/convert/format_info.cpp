#include "fp8kit/convert/format_info.hpp"

#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit {

const char* name(CodeClass c) {
    switch (c) {
        case CodeClass::zero: return "zero";
        case CodeClass::subnormal: return "subnormal";
        case CodeClass::normal: return "normal";
        case CodeClass::infinity: return "inf";
        case CodeClass::nan: return "nan";
    }
    return "?";
}

double decode_value(Format f, std::uint8_t code) {
    const std::uint64_t bits = emu::decode(f, Wide::f64, code);
    double v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

CodeClass classify(Format f, std::uint8_t code) {
    return emu::with_format(f, [&](auto fmt) {
        using F = decltype(fmt);
        const auto u = emu::detail::unpack<F>(code);
        switch (u.kind) {
            case emu::detail::Unpacked::nan: return CodeClass::nan;
            case emu::detail::Unpacked::infinity: return CodeClass::infinity;
            case emu::detail::Unpacked::zero: return CodeClass::zero;
            case emu::detail::Unpacked::finite: break;
        }
        const std::uint64_t biased = (code & ~F::sign_mask) >> F::man_bits;
        return (F::has_subnormals && biased == 0) ? CodeClass::subnormal : CodeClass::normal;
    });
}

std::string fields(Format f, std::uint8_t code) {
    return emu::with_format(f, [&](auto fmt) {
        using F = decltype(fmt);
        std::string s;
        for (int bit = F::total_bits - 1; bit >= 0; --bit) {
            s += ((code >> bit) & 1) ? '1' : '0';
            const bool sign_end = F::has_sign && bit == F::total_bits - 1;
            const bool exp_end = bit == F::man_bits && F::man_bits > 0;
            if (sign_end || exp_end) s += ' ';
        }
        return s;
    });
}

FormatInfo format_info(Format f) {
    return emu::with_format(f, [&](auto fmt) {
        using F = decltype(fmt);
        FormatInfo i{};
        i.format = f;
        i.exp_bits = F::exp_bits;
        i.man_bits = F::man_bits;
        i.bias = F::bias;
        i.total_bits = F::total_bits;
        i.code_count = 1 << F::total_bits;
        i.sign_mask = static_cast<std::uint8_t>(F::sign_mask);
        i.has_nan = F::has_nan;
        i.has_sign = F::has_sign;
        i.has_inf = F::has_inf;
        i.has_negative_zero = F::has_negative_zero;
        i.has_zero = F::has_zero;
        i.max_finite_code = static_cast<std::uint8_t>(F::max_finite_code);
        i.min_normal_code = static_cast<std::uint8_t>(F::min_normal_code);
        i.min_subnormal_code = static_cast<std::uint8_t>(F::min_subnormal_code);
        i.max_finite = decode_value(f, i.max_finite_code);
        i.min_normal = decode_value(f, i.min_normal_code);
        i.min_subnormal = decode_value(f, i.min_subnormal_code);
        i.emin = F::emin;
        i.emax = F::emax;
        for (int c = 0; c < i.code_count; ++c) {
            const CodeClass k = classify(f, static_cast<std::uint8_t>(c));
            if (k == CodeClass::nan) i.nan_codes.push_back(static_cast<std::uint8_t>(c));
            if (k == CodeClass::infinity) i.inf_codes.push_back(static_cast<std::uint8_t>(c));
        }
        return i;
    });
}

namespace {

// Special codes as a list, runs as ranges: E5M2's six NaN codes read 0x7d-0x7f,0xfd-0xff.
std::string codes(const std::vector<std::uint8_t>& v) {
    if (v.empty()) return "none";
    std::string s;
    for (std::size_t i = 0; i < v.size();) {
        std::size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
        if (!s.empty()) s += ",";
        s += j == i ? fmt::format("0x{:02x}", v[i]) : fmt::format("0x{:02x}-0x{:02x}", v[i], v[j]);
        i = j + 1;
    }
    return s;
}

}  // namespace

nlohmann::json formats_json() {
    nlohmann::json out = nlohmann::json::array();
    for (Format f : emu::kAllFormats) {
        const FormatInfo i = format_info(f);
        out.push_back(
            {{"format", name(f)},
             {"ml_dtypes", ml_dtypes_name(f)},
             {"sign_bits", i.has_sign ? 1 : 0},
             {"exponent_bits", i.exp_bits},
             {"mantissa_bits", i.man_bits},
             {"bias", i.bias},
             {"max_finite", i.max_finite},
             {"max_finite_code", i.max_finite_code},
             {"min_normal", i.min_normal},
             {"min_normal_code", i.min_normal_code},
             {"min_subnormal", i.has_zero && i.man_bits > 0 ? nlohmann::json(i.min_subnormal) : nlohmann::json()},
             {"emin", i.emin},
             {"emax", i.emax},
             {"negative_zero", i.has_negative_zero},
             {"total_bits", i.total_bits},
             {"code_count", i.code_count},
             {"nan_codes", i.nan_codes},
             {"inf_codes", i.inf_codes}});
    }
    return out;
}

void write_formats_text(std::FILE* out) {
    fmt::print(out, "{:<11} {:>4} {:>4} {:>12} {:>14} {:>14} {:>5} {:<20} {:<10} {}\n", "format", "bits", "bias",
               "max finite", "min normal", "min subnormal", "-0", "NaN", "Inf", "ml_dtypes name");
    for (Format f : emu::kAllFormats) {
        const FormatInfo i = format_info(f);
        const std::string bits = fmt::format("{}{}{}", i.has_sign ? "1" : "0", i.exp_bits, i.man_bits);
        const std::string sub = i.has_zero && i.man_bits > 0 ? fmt::format("{:g}", i.min_subnormal) : "none";
        fmt::print(out, "{:<11} {:>4} {:>4} {:>7g}=0x{:02x} {:>9g}=0x{:02x} {:>14} {:>5} {:<20} {:<10} {}\n", name(f),
                   bits, i.bias, i.max_finite, i.max_finite_code, i.min_normal, i.min_normal_code, sub,
                   i.has_negative_zero ? fmt::format("0x{:02x}", i.sign_mask) : "none", codes(i.nan_codes),
                   codes(i.inf_codes), ml_dtypes_name(f));
    }
}

}  // namespace fp8kit
