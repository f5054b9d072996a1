// fp8kit formats: the limits of every 8-bit format, derived from emu's traits.
#include <memory>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/convert/format_info.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::formats_command {
namespace {

std::string codes(const std::vector<std::uint8_t>& v) {
    if (v.empty()) return "none";
    std::string s;
    // Ranges keep E5M2's six NaN codes readable: 0x7d-0x7f, 0xfd-0xff.
    for (std::size_t i = 0; i < v.size();) {
        std::size_t j = i;
        while (j + 1 < v.size() && v[j + 1] == v[j] + 1) ++j;
        if (!s.empty()) s += ",";
        s += j == i ? fmt::format("0x{:02x}", v[i]) : fmt::format("0x{:02x}-0x{:02x}", v[i], v[j]);
        i = j + 1;
    }
    return s;
}

Register reg([](CLI::App& root) {
    auto* cmd = root.add_subcommand("formats", "Bias, limits and special codes of every format of at most 8 bits");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print JSON instead of a table");
    cmd->callback([json] {
        nlohmann::json out = nlohmann::json::array();
        if (!*json)
            fmt::print("{:<11} {:>4} {:>4} {:>12} {:>14} {:>14} {:>5} {:<20} {:<10} {}\n", "format", "bits", "bias",
                       "max finite", "min normal", "min subnormal", "-0", "NaN", "Inf", "ml_dtypes name");
        for (Format f : emu::kAllFormats) {
            const FormatInfo i = format_info(f);
            const std::string bits = fmt::format("{}{}{}", i.has_sign ? "1" : "0", i.exp_bits, i.man_bits);
            const std::string sub = i.has_zero && i.man_bits > 0 ? fmt::format("{:g}", i.min_subnormal) : "none";
            if (*json) {
                out.push_back({{"format", name(f)},
                               {"ml_dtypes", ml_dtypes_name(f)},
                               {"sign_bits", i.has_sign ? 1 : 0},
                               {"exponent_bits", i.exp_bits},
                               {"mantissa_bits", i.man_bits},
                               {"bias", i.bias},
                               {"max_finite", i.max_finite},
                               {"max_finite_code", i.max_finite_code},
                               {"min_normal", i.min_normal},
                               {"min_normal_code", i.min_normal_code},
                               {"min_subnormal",
                                i.has_zero && i.man_bits > 0 ? nlohmann::json(i.min_subnormal) : nlohmann::json()},
                               {"emin", i.emin},
                               {"emax", i.emax},
                               {"negative_zero", i.has_negative_zero},
                               {"total_bits", i.total_bits},
                               {"code_count", i.code_count},
                               {"nan_codes", i.nan_codes},
                               {"inf_codes", i.inf_codes}});
            } else {
                fmt::print("{:<11} {:>4} {:>4} {:>7g}=0x{:02x} {:>9g}=0x{:02x} {:>14} {:>5} {:<20} {:<10} {}\n",
                           name(f), bits, i.bias, i.max_finite, i.max_finite_code, i.min_normal, i.min_normal_code, sub,
                           i.has_negative_zero ? fmt::format("0x{:02x}", i.sign_mask) : "none", codes(i.nan_codes),
                           codes(i.inf_codes), ml_dtypes_name(f));
            }
        }
        if (*json) fmt::print("{}\n", out.dump(1));
    });
});

}  // namespace
}  // namespace fp8kit::cli::formats_command
