// fp8kit formats: the limits of every 8-bit format, derived from emu's traits.
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/convert/format_info.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::formats_command {
namespace {

Register reg([](CLI::App& root) {
    auto* cmd = root.add_subcommand("formats", "Bias, limits and special codes of every format of at most 8 bits");
    auto json = std::make_shared<bool>(false);
    cmd->add_flag("--json", *json, "Print JSON instead of a table");
    cmd->callback([json] {
        if (*json)
            fmt::print("{}\n", formats_json().dump(1));
        else
            write_formats_text(stdout);
    });
});

}  // namespace
}  // namespace fp8kit::cli::formats_command
