// fp8kit.calibrate / calibrate_scale: calibrate::run (as the JSON report) and calibrate::calibrate
// on in-memory batches (lib: fp8kit/calibrate.hpp).
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fp8kit/calibrate.hpp"

namespace fp8kit::py {
namespace {

calibrate::Method method_arg(const std::string& s) {
    if (auto why = calibrate::not_offered(s)) throw calibrate::CalibrateError(*why);
    auto m = calibrate::parse_method(s);
    if (!m) throw calibrate::CalibrateError("unknown calibration method '" + s + "'");
    return *m;
}

}  // namespace

void bind_calibrate(pyb::module_& m) {
    pyb::register_exception<calibrate::CalibrateError>(m, "CalibrateError", PyExc_ValueError);
    m.def(
        "calibrate_json",
        [](const std::vector<std::string>& files, const std::vector<std::string>& methods,
           const std::vector<std::string>& tensors, std::optional<std::string> holdout_steps,
           std::optional<double> holdout_tokens, const std::string& granularity) {
            calibrate::Options o;
            o.files = files;
            o.include = tensors;
            o.holdout_steps = holdout_steps;
            o.holdout_tokens = holdout_tokens;
            const auto g = calibrate::parse_granularity(granularity);
            if (!g)
                throw calibrate::CalibrateError("granularity '" + granularity + "': unknown (tensor, channel, head)");
            o.granularity = *g;
            for (const auto& s : methods) {
                if (s == "all")
                    o.methods = calibrate::all_methods();
                else
                    o.methods.push_back(method_arg(s));
            }
            calibrate::Report r;
            {
                pyb::gil_scoped_release release;
                r = calibrate::run(o);
            }
            return calibrate::to_json(r);
        },
        pyb::arg("files"), pyb::arg("methods"), pyb::arg("tensors"), pyb::arg("holdout_steps") = pyb::none(),
        pyb::arg("holdout_tokens") = pyb::none(), pyb::arg("granularity") = "tensor",
        "calibrate::run as the JSON document `fp8kit calibrate --json` prints");
    m.def(
        "calibrate_scale",
        [](const std::string& method, const std::vector<std::vector<float>>& batches, bool bf16) {
            const auto s = calibrate::calibrate(method_arg(method), batches,
                                                bf16 ? calibrate::DType::bf16 : calibrate::DType::f32);
            return pyb::make_tuple(s.value, s.dtype, s.amax, s.candidate);
        },
        pyb::arg("method"), pyb::arg("batches"), pyb::arg("bf16"),
        "calibrate::calibrate on float32 batches: (scale, dtype, amax, candidate)");
    m.def(
        "nvfp4_scale_sweep",
        [](const std::vector<float>& w, std::size_t cols) {
            calibrate::Nvfp4Sweep r;
            {
                pyb::gil_scoped_release release;
                r = calibrate::nvfp4_scale_sweep(w, cols);
            }
            return pyb::make_tuple(r.weight_scale, r.weight_scale_2, r.global_amax, r.amax, r.candidate);
        },
        pyb::arg("weight"), pyb::arg("cols"),
        "calibrate::nvfp4_scale_sweep on a row-major float32 weight: (weight_scale codes, weight_scale_2, "
        "global_amax, amax, candidate)");
}

}  // namespace fp8kit::py
