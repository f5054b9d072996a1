// fp8kit.checkpoint_check: checkpoint::check, returned as the JSON report (lib: fp8kit/checkpoint.hpp).
#include <optional>
#include <string>

#include "bindings.hpp"
#include "fp8kit/checkpoint.hpp"

namespace fp8kit::py {

void bind_checkpoint(pyb::module_& m) {
    pyb::register_exception<checkpoint::CheckpointError>(m, "CheckpointError", PyExc_ValueError);
    m.def(
        "checkpoint_check_json",
        [](const std::string& dir, std::optional<std::string> reference, const std::string& engine) {
            checkpoint::Report r;
            {
                pyb::gil_scoped_release release;
                r = checkpoint::check(dir, checkpoint::CheckOptions{reference, engine});
            }
            return checkpoint::to_json(r);
        },
        pyb::arg("dir"), pyb::arg("reference") = pyb::none(), pyb::arg("engine") = "",
        "checkpoint::check(dir, {reference, engine}) as the JSON document `fp8kit checkpoint check --json` prints");
}

}  // namespace fp8kit::py
