// fp8kit.kv: kv::run as the JSON report `fp8kit kv --json` prints (lib: fp8kit/kv.hpp).
#include <string>
#include <vector>

#include "bindings.hpp"
#include "fp8kit/kv.hpp"

namespace fp8kit::py {

void bind_kv(pyb::module_& m) {
    pyb::register_exception<kv::KvError>(m, "KvError", PyExc_ValueError);
    m.def(
        "kv_json",
        [](const std::vector<std::string>& files, const std::vector<std::string>& formats,
           const std::vector<std::string>& policies, std::size_t bucket, bool attention) {
            kv::Options o;
            o.files = files;
            o.bucket = bucket;
            o.attention = attention;
            try {  // fp8kit.KvError, as every bad input of kv()
                for (const auto& s : formats) o.formats.push_back(kv::parse_format(s));
                for (const auto& s : policies) o.policies.push_back(kv::parse_policy(s));
            } catch (const std::invalid_argument& e) {
                throw kv::KvError(e.what());
            }
            kv::Report r;
            {
                pyb::gil_scoped_release release;
                r = kv::run(o);
            }
            return kv::to_json(r);
        },
        pyb::arg("files"), pyb::arg("formats"), pyb::arg("policies"), pyb::arg("bucket"), pyb::arg("attention"),
        "kv::run as the JSON document `fp8kit kv --json` prints");
    // The names kv() accepts (lib's tables), for fp8kit.kv.FORMATS and POLICIES.
    m.def("kv_format_names", [] {
        std::vector<std::string> out;
        for (auto f : kv::all_formats()) out.push_back(kv::name(f));
        return out;
    });
    m.def("kv_policy_names", [] {
        std::vector<std::string> out;
        for (auto p : kv::all_policies()) out.push_back(kv::name(p));
        return out;
    });
}

}  // namespace fp8kit::py
