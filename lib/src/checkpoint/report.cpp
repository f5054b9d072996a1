// checkpoint check's report as JSON and CSV (the terminal text is the CLI's).
#include <cmath>
#include "fp8kit/io/json_number.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "fp8kit/checkpoint.hpp"
#include "fp8kit/io/printable.hpp"

namespace fp8kit::checkpoint {
namespace {

// JSON has no inf: an exact match's SQNR is written as null.
nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}

// JSON keys of the three engines (kKvEngines): vllm, sglang, tensorrt_llm.
const char* engine_key(int i) { return i == 0 ? "vllm" : i == 1 ? "sglang" : "tensorrt_llm"; }

}  // namespace

std::string to_json(const Report& r) {
    nlohmann::json j;
    j["dir"] = r.dir;
    j["producer"] = name(r.producer);
    j["failed"] = r.failed();
    for (const auto& L : r.layers) {
        nlohmann::json l{{"module", L.module},     {"scheme", name(L.scheme)},
                         {"excluded", L.excluded}, {"weight", L.weight},
                         {"scale", L.scale},       {"scale_convention", name(L.scale_convention)}};
        if (!L.global_scale.empty())
            l["global_scale"] = {{"name", L.global_scale}, {"convention", name(L.global_convention)}};
        if (!L.input_scale.empty()) l["input_scale"] = L.input_scale;
        if (!L.pre_quant_scale.empty()) l["pre_quant_scale"] = L.pre_quant_scale;
        if (L.experts) l["experts"] = L.experts;           // a stacked [experts, rows, cols] weight
        if (!L.sources.empty()) l["sources"] = L.sources;  // TensorRT-LLM: the Hugging Face modules
        j["layers"].push_back(l);
    }
    j["findings"] = nlohmann::json::array();
    for (const auto& f : r.findings)
        j["findings"].push_back(
            {{"tensor", f.tensor}, {"check", f.check}, {"message", f.message}, {"failed", f.failed}});
    j["kv_scales"] = nlohmann::json::array();
    for (const auto& k : r.kv) {
        nlohmann::json e = nlohmann::json::object();
        for (int i = 0; i < 3; ++i)
            e[engine_key(i)] = {{"fate", name(k.engines[i].fate)}, {"detail", k.engines[i].detail}};
        j["kv_scales"].push_back({{"name", k.name},
                                  {"present", k.present},
                                  {"dtype", k.dtype},
                                  {"shape", k.shape},
                                  {"vllm", k.vllm},
                                  {"dropped", k.dropped},
                                  {"engines", e}});
    }
    j["comparisons"] = nlohmann::json::array();
    for (const auto& c : r.comparisons)
        j["comparisons"].push_back({{"module", c.module},
                                    {"verdict", c.verdict},
                                    {"elements", c.elements},
                                    {"code_mismatches", c.code_mismatches},
                                    {"scale_mismatches", c.scale_mismatches},
                                    {"sqnr_db", num(c.sqnr_db)},
                                    {"max_rel_error", num(c.max_rel_error)},
                                    {"variant", c.variant},
                                    {"ranks", c.ranks}});
    return j.dump(2);
}

void write_text(const Report& r, std::FILE* out) {
    fmt::print(out, "checkpoint {} (producer {})\n", io::printable(r.dir), name(r.producer));
    std::size_t quantised = 0, excluded = 0;
    for (const auto& L : r.layers) {
        quantised += L.scheme != Scheme::none;
        excluded += L.excluded;
    }
    fmt::print(out, "layers: {} quantised, {} excluded, {} listed\n", quantised, excluded, r.layers.size());
    for (const auto& L : r.layers)
        if (L.scheme != Scheme::none)
            fmt::print(out, "  {:<48} {:<16} scale {}{}{}\n", io::printable(L.module), name(L.scheme),
                       name(L.scale_convention),
                       L.global_scale.empty() ? "" : fmt::format(", global {}", name(L.global_convention)),
                       L.sources.empty()
                           ? ""
                           : fmt::format("  <- {}", io::printable(fmt::format("{}", fmt::join(L.sources, ", ")))));
    if (!r.kv.empty()) {
        fmt::print(out, "KV / attention scales (what each engine does with the name):\n");
        for (const auto& k : r.kv) {
            fmt::print(out, "  {}{}\n", io::printable(k.name),
                       k.present ? fmt::format("  {} [{}]", k.dtype, fmt::join(k.shape, ", ")) : "  (missing)");
            for (int i = 0; i < 3; ++i)
                fmt::print(out, "    {:<13} {:<12} {}\n", std::string(kKvEngines[i]) + ":", name(k.engines[i].fate),
                           io::printable(k.engines[i].detail));
        }
    }
    if (!r.comparisons.empty()) {
        fmt::print(out, "against the original:\n");
        for (const auto& c : r.comparisons)
            fmt::print(
                out,
                "  {:<48} {:<26} codes differing {:>8}/{:<8} scales differing {:>6}  SQNR {:.2f} dB  max rel {:.3g}  "
                "[{}]{}\n",
                io::printable(c.module), c.verdict, c.code_mismatches, c.elements, c.scale_mismatches, c.sqnr_db,
                c.max_rel_error, c.variant,
                c.ranks.empty() ? std::string()
                                : fmt::format("  in rank{}.safetensors", fmt::join(c.ranks, ".safetensors, rank")));
    }
    for (const auto& f : r.findings)
        fmt::print(out, "{} [{}] {}: {}\n", f.failed ? "FAIL" : "note", f.check, io::printable(f.tensor), f.message);
    fmt::print(out, "{}\n", summary(r));
}

std::string to_csv(const Report& r) {
    // Layers first, then one row per KV / attention scale (scheme "kv", its module the name less
    // the last component) with the kv_* columns and each engine's "fate: detail"; names whole.
    std::string o =
        "module,scheme,excluded,scale_convention,verdict,code_mismatches,scale_mismatches,sqnr_db,max_rel_error,"
        "findings,"
        "kv_name,kv_present,kv_dtype,vllm,sglang,tensorrt_llm,variant\n";
    for (const auto& L : r.layers) {
        const Comparison* c = nullptr;
        for (const auto& k : r.comparisons)
            if (k.module == L.module) c = &k;
        std::string fs;
        for (const auto& f : r.findings)
            if (f.tensor.rfind(L.module + ".", 0) == 0 && f.failed) fs += (fs.empty() ? "" : "; ") + f.check;
        o += fmt::format("{},{},{},{},{},{},{},{},{},{},,,,,,,{}\n", csv_field(L.module), name(L.scheme),
                         L.excluded ? 1 : 0, csv_field(name(L.scale_convention)), c ? c->verdict : "",
                         c ? std::to_string(c->code_mismatches) : "", c ? std::to_string(c->scale_mismatches) : "",
                         c ? fmt::format("{:.6g}", c->sqnr_db) : "", c ? fmt::format("{:.6g}", c->max_rel_error) : "",
                         csv_field(fs), c ? csv_field(c->variant) : "");
    }
    for (const auto& k : r.kv) {
        std::string fs;
        for (const auto& f : r.findings)
            if (f.tensor == k.name) fs += (fs.empty() ? "" : "; ") + std::string(f.failed ? "" : "note: ") + f.check;
        std::string eng;
        for (const auto& e : k.engines) eng += "," + csv_field(std::string(name(e.fate)) + ": " + e.detail);
        o += fmt::format("{},kv,,,,,,,,{},{},{},{}{},\n", csv_field(k.name.substr(0, k.name.rfind('.'))), csv_field(fs),
                         csv_field(k.name), k.present ? 1 : 0, k.dtype, eng);
    }
    return o;
}

}  // namespace fp8kit::checkpoint
