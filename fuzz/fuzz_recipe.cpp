// User recipe files: JSON that parse_recipe reads from a path, and recipe_from_json on any JSON
// value. The documented errors are std::invalid_argument (bad values) and the JSON library's own
// exceptions (wrong types), which parse_recipe turns into invalid_argument.
#include <cstdint>
#include <stdexcept>

#include <nlohmann/json.hpp>

#include "fp8kit/recipes.hpp"
#include "fuzz_input_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    fp8kit::fuzz::InputFile file(data, size);
    try {
        const auto r = fp8kit::parse_recipe(file.path());
        (void)fp8kit::to_json(r);
        (void)fp8kit::recipe_scale(r, fp8kit::Role::activation, 1.0f);
    } catch (const std::invalid_argument&) {}
    const auto j = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return 0;
    try {
        (void)fp8kit::recipe_from_json(j, "fuzz");
    } catch (const std::invalid_argument&) {
    } catch (const nlohmann::json::exception&) {}
    return 0;
}
