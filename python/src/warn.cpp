// Early warnings (warn/watch.hpp, warn/trend.hpp): watch files, and a Watcher a training monitor
// feeds per step and polls per interval. Settings and results cross as JSON text; the package
// (python/fp8kit/_watch.py) turns them into dicts.
#include <nlohmann/json.hpp>

#include "bindings.hpp"
#include <optional>
#include <utility>
#include <vector>

#include "fp8kit/warn/grad_norm.hpp"
#include "fp8kit/warn/watch.hpp"

namespace fp8kit::py {
namespace {

std::string warnings_json(const std::vector<warn::Warning>& ws) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& w : ws) j.push_back(warn::to_json(w));
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace

void bind_warn(pyb::module_& m) {
    using namespace pybind11::literals;
    m.def(
        "watch_files",
        [](const std::vector<std::string>& files, const std::string& options) {
            warn::WatchInputs in;
            in.files = files;
            warn::apply_options(in, nlohmann::json::parse(options));
            warn::WatchReport r;
            {
                pyb::gil_scoped_release nogil;
                r = warn::watch_files(in);
            }
            return r.to_json().dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
        },
        "files"_a, "options"_a);
    pyb::class_<warn::Watcher>(m, "_Watcher")
        .def(pyb::init([](const std::string& options, const std::string& name) {
                 warn::WatchInputs in;
                 warn::apply_options(in, nlohmann::json::parse(options));
                 return std::make_unique<warn::Watcher>(in.trend, name);
             }),
             "options"_a, "name"_a)
        .def(
            "observe_step",
            [](warn::Watcher& w, std::int64_t step, const std::vector<std::string>& names,
               pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast> amax) {
                if (static_cast<std::size_t>(amax.size()) != names.size())
                    throw std::invalid_argument("amax: one value per tensor name");
                std::vector<float> a(amax.data(), amax.data() + amax.size());
                w.observe_step(step, names, a);
            },
            "step"_a, "names"_a, "amax"_a)
        .def("observe_grad_norm", &warn::Watcher::observe_grad_norm, "step"_a, "norm"_a)
        .def("warnings", [](const warn::Watcher& w) { return warnings_json(w.warnings()); })
        .def("poll", [](warn::Watcher& w) { return warnings_json(w.poll()); });
    // The gradient-norm verdict alone, with any rules (scripts/bench/divergence_verdict.py fits them).
    pyb::class_<warn::GradNormVerdict>(m, "_GradNormVerdict")
        .def(pyb::init([](std::size_t median_of, std::int64_t start,
                          const std::vector<std::pair<std::int64_t, double>>& rules) {
                 warn::GradNormConfig c;
                 c.median_of = median_of;
                 c.start = start;
                 c.rules.clear();
                 for (const auto& [span, growth] : rules) c.rules.push_back({span, growth});
                 return std::make_unique<warn::GradNormVerdict>(c);
             }),
             "median_of"_a = 16, "start"_a = 20,
             "rules"_a = std::vector<std::pair<std::int64_t, double>>{{80, 3.0}, {200, 4.0}})
        .def("observe", &warn::GradNormVerdict::observe, "step"_a, "norm"_a)
        .def("growth", &warn::GradNormVerdict::growth)
        .def("flagged_at", [](const warn::GradNormVerdict& v) -> std::optional<std::int64_t> {
            if (v.flag()) return v.flag()->step;
            return std::nullopt;
        });
}

}  // namespace fp8kit::py
