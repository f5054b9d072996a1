// Code tables and output rounding for the reference GEMM (all rounding through emu::convert).
#include "operands.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "fp8kit/emu/emu.hpp"

namespace fp8kit::gemm::detail {

CodeTable decode_table(Format f) {
    if (f == Format::e8m0) throw std::invalid_argument("format e8m0 is a scale format, not a GEMM operand format");
    CodeTable t;
    // Codes above the format's width read as zero, as `code` does.
    t.term.fill(numerics::gemm::zero_term());
    emu::with_format(f, [&](auto fmt) {
        using F = decltype(fmt);
        t.min_exp = F::quantum_min;
        for (int c = 0; c < (1 << F::total_bits); ++c) {
            const auto u = emu::detail::unpack<F>(static_cast<std::uint64_t>(c));
            CodeValue& v = t.code[c];
            t.term[c] = numerics::gemm::code_term<F>(static_cast<std::uint32_t>(c));
            const auto bits = static_cast<std::uint32_t>(emu::decode(f, Wide::f32, static_cast<std::uint8_t>(c)));
            std::memcpy(&v.value, &bits, sizeof v.value);
            if (u.kind == emu::detail::Unpacked::nan || u.kind == emu::detail::Unpacked::infinity) {
                v.special = t.any_special = true;
                continue;
            }
            if (u.kind == emu::detail::Unpacked::zero) continue;
            v.sig = static_cast<std::int32_t>(u.significand) * (u.negative ? -1 : 1);
            v.exp = u.exponent;
            t.max_units = std::max(t.max_units, std::ldexp(static_cast<double>(u.significand), u.exponent - t.min_exp));
        }
    });
    return t;
}

std::uint32_t to_output(float v, OutType out) { return numerics::gemm::output_bits(v, out); }

std::uint32_t round_output(double v, OutType out) {
    std::uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    if (out == OutType::f32)
        return static_cast<std::uint32_t>(emu::convert<emu::Binary64, emu::Binary32>(b, emu::kDecodePolicy));
    return static_cast<std::uint32_t>(emu::convert<emu::Binary64, emu::BFloat16>(b, emu::kDecodePolicy));
}

}  // namespace fp8kit::gemm::detail
