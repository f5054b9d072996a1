// Early warnings (warn/watch.hpp, warn/trend.hpp): watch files, and a Watcher a training monitor
// feeds per step and polls per interval. Settings and results cross as JSON text; the package
// (python/fp8kit/_watch.py) turns them into dicts.
#include <nlohmann/json.hpp>

#include "bindings.hpp"
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
        .def("warnings", [](const warn::Watcher& w) { return warnings_json(w.warnings()); })
        .def("poll", [](warn::Watcher& w) { return warnings_json(w.poll()); });
}

}  // namespace fp8kit::py
