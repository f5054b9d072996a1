#include "fp8kit/convert/format_info.hpp"

#include <cstring>

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

}  // namespace fp8kit
