// Scaling recipes: presets, recipe files, the frameworks' scale math and the stateful recipes.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/recipes.hpp"

namespace fp8kit::py {
RecipeSpec recipe_of(const std::string& text, bool is_json) {
    return is_json ? recipe_from_json(nlohmann::json::parse(text), "recipe") : parse_recipe(text);
}

namespace {

AmaxAlgo algo_of(const std::string& s) {
    if (s == "max") return AmaxAlgo::max;
    if (s == "most_recent" || s == "most-recent") return AmaxAlgo::most_recent;
    throw std::invalid_argument(fmt::format("algo: unknown amax algorithm '{}' (choose from max, most_recent)", s));
}

}  // namespace

void bind_recipes(pyb::module_& m) {
    using namespace pyb::literals;
    m.def("presets", [] { return recipe_presets(); });
    // The recipe slot ("input", "weight", "grad") of a role name (numerics/roles.hpp).
    m.def(
        "recipe_slot", [](const std::string& role) { return std::string(slot_name(parse_recipe_slot(role))); },
        "role"_a);
    // The recipe as JSON text (every field), from a preset name, a file path or JSON text.
    m.def(
        "recipe_json", [](const std::string& text, bool is_json) { return to_json(recipe_of(text, is_json)).dump(); },
        "recipe"_a, "is_json"_a);
    m.def(
        "recipe_scale",
        [](const std::string& text, bool is_json, const std::string& role, float amax) {
            const ScalePair p = recipe_scale(recipe_of(text, is_json), parse_recipe_slot(role), amax);
            return pyb::make_tuple(p.scale, p.scale_inv);
        },
        "recipe"_a, "is_json"_a, "role"_a, "amax"_a);
    // The policy a tensor of this role is cast with (RecipeSpec::policy_for: the recipe-wide policy
    // with the role's own rounding where it has one), as {"rounding", "overflow", "nan"}.
    m.def(
        "recipe_policy",
        [](const std::string& text, bool is_json, const std::string& role) {
            const Policy p = recipe_of(text, is_json).policy_for(parse_recipe_slot(role));
            pyb::dict d;
            d["rounding"] = std::string(name(p.rounding));
            d["overflow"] = std::string(name(p.overflow));
            d["nan"] = std::string(name(p.nan));
            return d;
        },
        "recipe"_a, "is_json"_a, "role"_a);
    m.def(
        "fp8_max", [](const std::string& f) { return fp8_max(require_format(f, "format")); }, "format"_a);
    m.def("te_scale", &te_scale, "amax"_a, "fmax"_a, "eps"_a, "pow2"_a, "value_for_inf"_a);
    m.def("torchao_scale", &torchao_scale, "amax"_a, "fmax"_a, "eps"_a, "pow2"_a);
    m.def("msamp_scale", &msamp_scale, "amax"_a, "previous_scale"_a, "fmax"_a, "margin"_a);
    m.def(
        "deepseek_scale",
        [](float amax, float fmax, float floor, bool ue8m0) {
            const ScalePair p = deepseek_scale(amax, fmax, floor, ue8m0);
            return pyb::make_tuple(p.scale, p.scale_inv);
        },
        "amax"_a, "fmax"_a, "amax_floor"_a, "ue8m0"_a);
    m.def(
        "mx_e8m0_scale_floor_ocp",
        [](float a, const std::string& f) { return mx_e8m0_scale_floor_ocp(a, require_format(f, "format")); },
        "block_amax"_a, "format"_a);
    m.def(
        "mx_e8m0_scale_roundup",
        [](float a, const std::string& f) { return mx_e8m0_scale_roundup(a, require_format(f, "format")); },
        "block_amax"_a, "format"_a);

    pyb::class_<DelayedScaling>(m, "DelayedScaling")
        .def(pyb::init([](float fmax, int history_len, const std::string& algo, int margin) {
                 return DelayedScaling(fmax, history_len, algo_of(algo), margin);
             }),
             "fmax"_a, "history_len"_a, "algo"_a, "margin"_a)
        .def_property_readonly("scale", &DelayedScaling::scale_for_step)
        .def_property_readonly("steps", &DelayedScaling::steps)
        .def_property_readonly("history",
                               [](const DelayedScaling& d) {
                                   const std::vector<float> h = d.history();
                                   return pyb::array_t<float>(h.size(), h.data());
                               })
        .def("record", &DelayedScaling::record, "amax"_a)
        // Scales of a whole amax trace: out[i] is the scale step i casts with.
        .def(
            "run",
            [](DelayedScaling& d, pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast> amax) {
                pyb::array_t<float> out(amax.size());
                const float* a = amax.data();
                float* o = out.mutable_data();
                const auto n = amax.size();
                pyb::gil_scoped_release nogil;
                for (pyb::ssize_t i = 0; i < n; ++i) {
                    o[i] = d.scale_for_step();
                    d.record(a[i]);
                }
                return out;
            },
            "amax"_a);

    pyb::class_<MsampScaling>(m, "MsampScaling")
        .def(pyb::init<float, int, int>(), "fmax"_a, "window"_a, "margin"_a)
        .def_property_readonly("in_time", &MsampScaling::in_time)
        .def_property_readonly("scale", &MsampScaling::scale)
        .def_property_readonly("counter", &MsampScaling::counter)
        .def_property_readonly(
            "window", [](const MsampScaling& s) { return pyb::array_t<float>(s.window().size(), s.window().data()); })
        .def("scale_for_step", &MsampScaling::scale_for_step, "current_amax"_a)
        .def("record", &MsampScaling::record, "amax"_a);
}

}  // namespace fp8kit::py
