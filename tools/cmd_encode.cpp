// fp8kit encode / decode: one value at a time, with everything a kernel author wants to see.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/convert/parse.hpp"
#include "fp8kit/convert/quantize.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::encode_command {
namespace {

std::uint64_t require_unsigned(const std::string& s, std::uint64_t max, const char* what) {
    const auto v = fp8kit::parse_unsigned(s, max);
    if (!v)
        throw UsageError(
            fmt::format("{} '{}' is not an integer in 0..0x{:x} (hex 0x.., binary 0b.., or decimal)", what, s, max));
    return *v;
}

// The bits of VALUE as the source type: a decimal or hex-float number read to the nearest
// binary64 and then, for narrower sources, rounded to nearest-even like a C cast; or with
// --bits, the source's own bit pattern.
std::uint64_t source_bits(const std::string& s, Wide from, bool bits) {
    if (bits)
        return require_unsigned(s, from == Wide::f64 ? ~0ull : (1ull << (8 * fp8kit::wide_size(from))) - 1,
                                "bit pattern");
    const auto parsed = fp8kit::parse_number(s);
    if (!parsed)
        throw UsageError(fmt::format("VALUE '{}' is not a number (decimal, hex float like 0x1.8p-9, inf, nan)", s));
    const double d = *parsed;
    std::uint64_t b;
    std::memcpy(&b, &d, sizeof d);
    if (from == Wide::f64) return b;
    return emu::with_wide(
        from, [&](auto w) -> std::uint64_t { return emu::convert<emu::Binary64, decltype(w)>(b, emu::kDecodePolicy); });
}

double as_double(Wide from, std::uint64_t bits) {
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

// The finite codes next to x: the largest value <= x and the smallest >= x (or, when x is a
// code's value, the codes just below and above it). Brute force over all codes on purpose.
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

struct EncodeOpts {
    std::vector<std::string> values;
    std::string to, from = "f64";
    bool bits = false, json = false;
    PolicyOptions policy;
};

Register encode_cmd([](CLI::App& root) {
    auto o = std::make_shared<EncodeOpts>();
    auto* cmd = root.add_subcommand("encode",
                                    "Encode values to a format of at most 8 bits, showing the code, its fields, "
                                    "the decoded value, the error and the two neighbouring codes");
    cmd->add_option("VALUE", o->values,
                    "Numbers (decimal, hex float, inf, nan; use -- before negatives), "
                    "or bit patterns with --bits")
        ->required();
    cmd->add_option("--to", o->to, "Target format: " + format_choices())->required();
    cmd->add_option("--from", o->from,
                    "Source type the value is first read as: " + wide_choices() +
                        " (default f64: one rounding from the nearest binary64)");
    cmd->add_flag("--bits", o->bits, "VALUEs are bit patterns of the --from type (e.g. --from f32 0x43e80000)");
    cmd->add_flag("--json", o->json, "Print JSON");
    o->policy.add_to(cmd);
    cmd->callback([o] {
        const Format to = require_format(o->to, "--to");
        const Wide from = require_wide(o->from, "--from");
        const Policy p = o->policy.resolve(to, from);
        nlohmann::json out = nlohmann::json::array();
        for (const auto& s : o->values) {
            const std::uint64_t b = source_bits(s, from, o->bits);
            const double x = as_double(from, b);
            const std::uint8_t c = emu::encode(to, from, b, p);
            const double v = decode_value(to, c);
            const CodeClass k = classify(to, c);
            const bool finite = k != CodeClass::nan && k != CodeClass::infinity && std::isfinite(x);
            const auto [below, above] = std::isnan(x) ? std::pair<int, int>{-1, -1} : neighbours(to, x);
            const int hexw = static_cast<int>(2 * fp8kit::wide_size(from));
            if (o->json) {
                nlohmann::json j = {{"input", s},
                                    {"from", name(from)},
                                    {"input_bits", fmt::format("0x{:0{}x}", b, hexw)},
                                    {"to", name(to)},
                                    {"policy", describe(p)},
                                    {"code", fmt::format("0x{:02x}", c)},
                                    {"fields", fields(to, c)},
                                    {"class", name(k)},
                                    {"value", value_text(to, c)}};
                j["error"] = finite ? nlohmann::json(v - x) : nlohmann::json();
                j["below"] = below < 0 ? nlohmann::json()
                                       : nlohmann::json({{"code", fmt::format("0x{:02x}", below)},
                                                         {"value", decode_value(to, below)}});
                j["above"] = above < 0 ? nlohmann::json()
                                       : nlohmann::json({{"code", fmt::format("0x{:02x}", above)},
                                                         {"value", decode_value(to, above)}});
                out.push_back(j);
                continue;
            }
            fmt::print("{} ({} 0x{:0{}x}) -> {} 0x{:02x} [{}] {} = {}", s, name(from), b, hexw, name(to), c,
                       fields(to, c), name(k), value_text(to, c));
            if (finite) fmt::print("  error {}", v - x);
            fmt::print("\n  neighbours: below {}  above {}\n",
                       below < 0 ? std::string("none") : fmt::format("0x{:02x} = {}", below, decode_value(to, below)),
                       above < 0 ? std::string("none") : fmt::format("0x{:02x} = {}", above, decode_value(to, above)));
        }
        if (o->json)
            fmt::print("{}\n", out.dump(1));
        else
            fmt::print("{}\n", o->policy.describe(to, from));
    });
});

struct DecodeOpts {
    std::vector<std::string> codes;
    std::string from;
    bool json = false;
};

Register decode_cmd([](CLI::App& root) {
    auto o = std::make_shared<DecodeOpts>();
    auto* cmd = root.add_subcommand(
        "decode",
        "Decode codes (FP4/FP6/FP8, one per byte): fields, class, value, and the float32/float16/bfloat16 bits");
    cmd->add_option("CODE", o->codes, "Codes 0..2^bits-1 (hex 0x7e, binary 0b01111110, or decimal)")->required();
    cmd->add_option("--from", o->from, "Format of the codes: " + format_choices())->required();
    cmd->add_flag("--json", o->json, "Print JSON");
    cmd->callback([o] {
        const Format f = require_format(o->from, "--from");
        nlohmann::json out = nlohmann::json::array();
        for (const auto& s : o->codes) {
            const auto c = static_cast<std::uint8_t>(
                require_unsigned(s, static_cast<std::uint64_t>(emu::code_count(f) - 1), "CODE"));
            const auto f32 = emu::decode(f, Wide::f32, c), f16 = emu::decode(f, Wide::f16, c),
                       bf16 = emu::decode(f, Wide::bf16, c);
            if (o->json) {
                out.push_back({{"code", fmt::format("0x{:02x}", c)},
                               {"format", name(f)},
                               {"fields", fields(f, c)},
                               {"class", name(classify(f, c))},
                               {"value", value_text(f, c)},
                               {"f32_bits", fmt::format("0x{:08x}", f32)},
                               {"f16_bits", fmt::format("0x{:04x}", f16)},
                               {"bf16_bits", fmt::format("0x{:04x}", bf16)}});
            } else {
                fmt::print("{} 0x{:02x} [{}] {} = {}  (f32 0x{:08x}, f16 0x{:04x}, bf16 0x{:04x})\n", name(f), c,
                           fields(f, c), name(classify(f, c)), value_text(f, c), f32, f16, bf16);
            }
        }
        if (o->json) fmt::print("{}\n", out.dump(1));
    });
});

}  // namespace
}  // namespace fp8kit::cli::encode_command
