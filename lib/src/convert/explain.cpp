// One value or code at a time (convert/explain.hpp).
#include "fp8kit/convert/explain.hpp"

#include <cmath>
#include <cstring>
#include <tuple>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/emu/emu.hpp"

namespace fp8kit {

std::uint64_t wide_bits(double x, Wide from) {
    std::uint64_t b;
    std::memcpy(&b, &x, sizeof x);
    if (from == Wide::f64) return b;
    return emu::with_wide(
        from, [&](auto w) -> std::uint64_t { return emu::convert<emu::Binary64, decltype(w)>(b, emu::kDecodePolicy); });
}

double wide_value(Wide from, std::uint64_t bits) {
    const std::uint64_t d = emu::with_wide(from, [&](auto w) -> std::uint64_t {
        using W = decltype(w);
        return emu::convert<W, emu::Binary64>(static_cast<typename W::storage_t>(bits), emu::kDecodePolicy);
    });
    double v;
    std::memcpy(&v, &d, sizeof v);
    return v;
}

std::string value_text(Format f, std::uint8_t c) {
    switch (classify(f, c)) {
        case CodeClass::nan: return "nan";
        case CodeClass::infinity: return (decode_value(f, c) < 0) ? "-inf" : "inf";
        default: return fmt::format("{}", decode_value(f, c));
    }
}

std::pair<int, int> neighbours(Format f, double x) {
    int below = -1, above = -1;
    double vb = -INFINITY, va = INFINITY;
    for (int c = 0; c < emu::code_count(f); ++c) {
        const CodeClass k = classify(f, static_cast<std::uint8_t>(c));
        if (k == CodeClass::nan || k == CodeClass::infinity) continue;
        if (k == CodeClass::zero && c != 0) continue;  // -0 is the same value as +0
        const double v = decode_value(f, static_cast<std::uint8_t>(c));
        if (v < x && v > vb) {
            vb = v;
            below = c;
        }
        if (v > x && v < va) {
            va = v;
            above = c;
        }
    }
    return {below, above};
}

namespace {

// One encode, worked out once for its JSON and its text.
struct Encoded {
    double x, v;  // the input's value, the code's
    std::uint8_t c;
    CodeClass k;
    bool finite;  // neither the code nor the input is NaN or infinite: the error is a number
    int below, above;
    int hexw;  // hex digits of the source type
};

Encoded encode_one(Wide from, std::uint64_t bits, Format to, const Policy& p) {
    Encoded e;
    e.x = wide_value(from, bits);
    e.c = emu::encode(to, from, bits, p);
    e.v = decode_value(to, e.c);
    e.k = classify(to, e.c);
    e.finite = e.k != CodeClass::nan && e.k != CodeClass::infinity && std::isfinite(e.x);
    std::tie(e.below, e.above) = std::isnan(e.x) ? std::pair<int, int>{-1, -1} : neighbours(to, e.x);
    e.hexw = static_cast<int>(2 * wide_size(from));
    return e;
}

nlohmann::json neighbour_json(Format to, int code) {
    return code < 0 ? nlohmann::json()
                    : nlohmann::json({{"code", fmt::format("0x{:02x}", code)}, {"value", decode_value(to, code)}});
}

std::string neighbour_text(Format to, int code) {
    return code < 0 ? std::string("none") : fmt::format("0x{:02x} = {}", code, decode_value(to, code));
}

}  // namespace

nlohmann::json encode_json(const std::string& input, Wide from, std::uint64_t bits, Format to, const Policy& p) {
    const Encoded e = encode_one(from, bits, to, p);
    nlohmann::json j = {{"input", input},
                        {"from", name(from)},
                        {"input_bits", fmt::format("0x{:0{}x}", bits, e.hexw)},
                        {"to", name(to)},
                        {"policy", describe(p)},
                        {"code", fmt::format("0x{:02x}", e.c)},
                        {"fields", fields(to, e.c)},
                        {"class", name(e.k)},
                        {"value", value_text(to, e.c)}};
    j["error"] = e.finite ? nlohmann::json(e.v - e.x) : nlohmann::json();
    j["below"] = neighbour_json(to, e.below);
    j["above"] = neighbour_json(to, e.above);
    return j;
}

std::string encode_text(const std::string& input, Wide from, std::uint64_t bits, Format to, const Policy& p) {
    const Encoded e = encode_one(from, bits, to, p);
    std::string s = fmt::format("{} ({} 0x{:0{}x}) -> {} 0x{:02x} [{}] {} = {}", input, name(from), bits, e.hexw,
                                name(to), e.c, fields(to, e.c), name(e.k), value_text(to, e.c));
    if (e.finite) s += fmt::format("  error {}", e.v - e.x);
    return s + fmt::format("\n  neighbours: below {}  above {}\n", neighbour_text(to, e.below),
                           neighbour_text(to, e.above));
}

nlohmann::json decode_json(Format f, std::uint8_t c) {
    return {{"code", fmt::format("0x{:02x}", c)},
            {"format", name(f)},
            {"fields", fields(f, c)},
            {"class", name(classify(f, c))},
            {"value", value_text(f, c)},
            {"f32_bits", fmt::format("0x{:08x}", emu::decode(f, Wide::f32, c))},
            {"f16_bits", fmt::format("0x{:04x}", emu::decode(f, Wide::f16, c))},
            {"bf16_bits", fmt::format("0x{:04x}", emu::decode(f, Wide::bf16, c))}};
}

std::string decode_text(Format f, std::uint8_t c) {
    return fmt::format("{} 0x{:02x} [{}] {} = {}  (f32 0x{:08x}, f16 0x{:04x}, bf16 0x{:04x})\n", name(f), c,
                       fields(f, c), name(classify(f, c)), value_text(f, c), emu::decode(f, Wide::f32, c),
                       emu::decode(f, Wide::f16, c), emu::decode(f, Wide::bf16, c));
}

}  // namespace fp8kit
