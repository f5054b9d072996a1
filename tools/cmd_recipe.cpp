// fp8kit recipe show NAME: a preset (or a recipe file, checked) as the JSON a recipe file holds,
// to start a custom recipe from.
#include <memory>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/recipes.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::recipe_command {
namespace {

std::string preset_list() {
    std::string s;
    for (const auto& p : recipe_presets()) s += (s.empty() ? "" : ", ") + p;
    return s;
}

Register reg([](CLI::App& root) {
    auto* cmd = root.add_subcommand("recipe", "Scaling recipes: print a preset as a recipe file (JSON) to edit");
    cmd->require_subcommand(1);
    auto name = std::make_shared<std::string>();
    auto* show = cmd->add_subcommand(
        "show",
        "Print recipe NAME as JSON with every field a recipe file needs: save it, edit it, and pass the\n"
        "file to --recipe. NAME is a preset (" +
            preset_list() +
            ") or a recipe file (checked and\n"
            "printed in full).");
    show->add_option("NAME", *name, "Preset name or recipe file")->required();
    show->callback([name] {
        RecipeSpec r;
        try {
            r = parse_recipe(*name);
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("recipe show: {}", e.what()));
        }
        fmt::print("{}\n", to_json(r).dump(2));
    });
    auto* list = cmd->add_subcommand("list", "List the preset names");
    list->callback([] {
        for (const auto& p : recipe_presets()) fmt::print("{}\n", p);
    });
});

}  // namespace
}  // namespace fp8kit::cli::recipe_command
