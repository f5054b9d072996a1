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
            for (const auto& s : formats) {
                auto f = kv::parse_format(s);
                if (!f) throw kv::KvError("format '" + s + "': unknown (e4m3, e5m2, e4m3fnuz, nvfp4)");
                o.formats.push_back(*f);
            }
            for (const auto& s : policies) {
                auto p = kv::parse_policy(s);
                if (!p)
                    throw kv::KvError("policy '" + s +
                                      "': unknown (one, vllm_first_batch, tensor, modelopt, head, token_head)");
                o.policies.push_back(*p);
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
}

}  // namespace fp8kit::py
