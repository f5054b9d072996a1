// fp8kit encode / decode: one value at a time, with everything a kernel author wants to see
// (lib: fp8kit/convert/explain.hpp).
#include <memory>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/convert/explain.hpp"
#include "fp8kit/convert/parse.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/emu/emu.hpp"

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
    return wide_bits(*parsed, from);
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
            if (o->json)
                out.push_back(encode_json(s, from, b, to, p));
            else
                fmt::print("{}", encode_text(s, from, b, to, p));
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
            if (o->json)
                out.push_back(decode_json(f, c));
            else
                fmt::print("{}", decode_text(f, c));
        }
        if (o->json) fmt::print("{}\n", out.dump(1));
    });
});

}  // namespace
}  // namespace fp8kit::cli::encode_command
