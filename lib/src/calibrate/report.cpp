// calibrate's report as JSON and CSV, and the scales as a safetensors file under the tool's
// checkpoint names (the terminal text is the CLI's).
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "convert/float_bits.hpp"
#include "fp8kit/calibrate.hpp"
#include "fp8kit/io/json_number.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"

namespace fp8kit::calibrate {
namespace {

nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp
using fp8kit::detail::bits_of;
std::string hex(float f) { return fmt::format("0x{:08x}", bits_of(f)); }
double share(std::uint64_t n, std::uint64_t d) { return d ? static_cast<double>(n) / d : 0.0; }

nlohmann::json stats_json(const HoldoutStats& h) {
    return {{"elements", h.elements},
            {"nonzero", h.nonzero},
            {"clipped", h.clipped},
            {"underflow", h.underflow},
            {"clipped_share", share(h.clipped, h.nonzero)},
            {"underflow_share", share(h.underflow, h.nonzero)},
            {"sqnr_db", num(h.sqnr_db)}};
}
std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string o = "\"";
    for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
    return o + "\"";
}
std::string steps(const std::vector<std::int64_t>& v) {
    std::string s;
    for (auto x : v) s += (s.empty() ? "" : " ") + std::to_string(x);
    return s;
}

// A share in percent, as the text prints it (the JSON and CSV hold the fraction: share()).
double percent(std::uint64_t n, std::uint64_t d) { return d ? 100.0 * static_cast<double>(n) / d : 0.0; }

bool ends_with(const std::string& s, const std::string& tail) {
    return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// A linear layer's input, per tensor, under a method --scheme nvfp4 takes: the NVFP4 activation
// scale its producer stores, under the producer's name (lib/src/calibrate/nvfp4_input.cpp).
void add_nvfp4_input_json(nlohmann::json& o, const Row& row) {
    if (row.index >= 0 || !ends_with(row.checkpoint_name, ".input_scale")) return;
    if (row.method == Method::modelopt_max) {
        if (const auto s = modelopt_nvfp4_input_scale(row.scale.amax)) o["input_scale"] = *s;
    } else if (row.method == Method::llmc_static_minmax || row.method == Method::llmc_memoryless_minmax) {
        o["input_global_scale"] =
            llmc_nvfp4_input_global_scale(row.scale.amax, row.scale.dtype == "bfloat16" ? DType::bf16 : DType::f32);
    }
}

}  // namespace

std::string to_json(const Report& r) {
    nlohmann::json j;
    j["format"] = "e4m3";
    j["granularity"] = name(r.granularity);
    j["rows"] = nlohmann::json::array();
    for (const auto& row : r.rows) {
        nlohmann::json o{{"tensor", row.tensor},
                         {"checkpoint_name", row.checkpoint_name},
                         {"method", name(row.method)},
                         {"tool", tool(row.method)},
                         {"scale", row.scale.value},
                         {"scale_bits_f32", hex(row.scale.value)},
                         {"scale_dtype", row.scale.dtype},
                         {"amax", row.scale.amax},
                         {"calibration_steps", row.calib_steps},
                         {"holdout_steps", row.holdout_steps},
                         {"calibration", stats_json(row.calib)}};
        if (row.scale.candidate >= 0) o["candidate"] = row.scale.candidate;
        if (row.index >= 0) o["index"] = row.index;
        o["nvfp4"] = {{"global_scale", row.nvfp4.global_scale},
                      {"data_amax", row.nvfp4.data_amax},
                      {"headroom_binades", num(row.nvfp4.headroom_binades)},
                      {"blocks", row.nvfp4.blocks},
                      {"blocks_over", row.nvfp4.blocks_over},
                      {"blocks_under", row.nvfp4.blocks_under}};
        add_nvfp4_input_json(o["nvfp4"], row);
        o["holdout"] = row.holdout_batches ? stats_json(row.holdout) : nlohmann::json(nullptr);
        if (row.sweep) {  // the scale is weight_scale_2; the E4M3 statistics above do not apply
            const auto& w = *row.sweep;
            o.erase("calibration");
            o.erase("nvfp4");
            o["nvfp4_sweep"] = {{"weight_scale_name", row.checkpoint_name},
                                {"weight_scale_2_name", row.checkpoint_name + "_2"},
                                {"weight_scale_shape", w.shape},
                                {"weight_scale_e4m3", w.weight_scale},
                                {"blocks", w.blocks},
                                {"blocks_changed_from_max", w.blocks_changed},
                                {"sqnr_db", num(w.sqnr_db)},
                                {"sqnr_max_rule_db", num(w.sqnr_max_db)}};
        }
        j["rows"].push_back(o);
    }
    j["notes"] = r.notes;
    j["skipped"] = r.skipped;
    return j.dump(1);
}

void write_text(const Report& r, std::FILE* out) {
    fmt::print(out, "{:<44} {:<22} {:>13} {:<8} {:>9} {:>8} {:>9}\n", "tensor", "method", "scale", "dtype", "clipped%",
               "under%", "SQNR dB");
    std::string last;
    for (const auto& row : r.rows) {
        if (row.tensor != last && !last.empty()) fmt::print(out, "\n");
        last = row.tensor;
        const bool h = row.holdout_batches != 0;
        const auto& s = h ? row.holdout : row.calib;
        const std::string t = row.index < 0 ? row.tensor : fmt::format("{}[{}]", row.tensor, row.index);
        if (row.sweep) {  // scale: weight_scale_2; SQNR: NVFP4 under the chosen block scales
            fmt::print(out, "{:<44} {:<22} {:>13.7g} {:<8} {:>9} {:>8} {:>9}\n", io::printable(t), name(row.method),
                       row.scale.value, row.scale.dtype, "-", "-", io::fixed_number(row.sweep->sqnr_db, 2));
            fmt::print(out,
                       "{:<44}   NVFP4: {} of {} block scales differ from the max rule's (SQNR {:.2f} dB with those)\n",
                       "", row.sweep->blocks_changed, row.sweep->blocks, row.sweep->sqnr_max_db);
            continue;
        }
        fmt::print(out, "{:<44} {:<22} {:>13.7g} {:<8} {:>9.4f} {:>8.4f} {:>9}\n", io::printable(t), name(row.method),
                   row.scale.value, row.scale.dtype, percent(s.clipped, s.nonzero), percent(s.underflow, s.nonzero),
                   io::fixed_number(s.sqnr_db, 2));
    }
    if (!r.rows.empty() && r.rows.front().sweep) {
        fmt::print(
            out, "\n{} rows; scale = weight_scale_2; SQNR: NVFP4 on the weight under the sweep's E4M3 block scales.\n",
            r.rows.size());
        for (const auto& n : r.skipped) fmt::print(out, "note: skipped {}\n", io::printable(n.describe()));
        for (const auto& n : r.notes) fmt::print(out, "note: {}\n", io::printable(n));
        return;
    }
    const bool any_holdout = !r.rows.empty() && r.rows.front().holdout_batches != 0;
    const bool by_token = any_holdout && r.rows.front().calib_steps == r.rows.front().holdout_steps;
    fmt::print(out, "\n{} rows; clipping, underflow and SQNR are on the {} (E4M3, x / scale, round to nearest even).\n",
               r.rows.size(),
               !any_holdout ? "calibration steps (nothing held out)"
               : by_token   ? "held-out tokens"
                            : "held-out steps");
    for (const auto& n : r.skipped) fmt::print(out, "note: skipped {}\n", io::printable(n.describe()));
    for (const auto& n : r.notes) fmt::print(out, "note: {}\n", io::printable(n));
}

std::string to_csv(const Report& r) {
    std::string s =
        "tensor,checkpoint_name,method,tool,scale,scale_bits_f32,scale_dtype,amax,calibration_steps,holdout_steps,"
        "holdout_elements,holdout_clipped_share,holdout_underflow_share,holdout_sqnr_db,index,nvfp4_global_scale,nvfp4_"
        "headroom_binades,nvfp4_blocks_over_share\n";
    for (const auto& row : r.rows) {
        const bool h = row.holdout_batches != 0;
        s += fmt::format(
            "{},{},{},{},{:.9g},{},{},{:.9g},{},{},{},{},{},{},{},{},{},{}\n", csv_field(row.tensor),
            csv_field(row.checkpoint_name), name(row.method), tool(row.method), row.scale.value, hex(row.scale.value),
            row.scale.dtype, row.scale.amax, steps(row.calib_steps), steps(row.holdout_steps),
            h ? std::to_string(row.holdout.elements) : "",
            h ? fmt::format("{:.6g}", share(row.holdout.clipped, row.holdout.nonzero)) : "",
            h ? fmt::format("{:.6g}", share(row.holdout.underflow, row.holdout.nonzero)) : "",
            h ? io::fixed_number(row.holdout.sqnr_db, 4) : "", row.index >= 0 ? std::to_string(row.index) : "",
            // the sweep's row: its scale is weight_scale_2 already; no activation headroom
            row.sweep ? std::string() : fmt::format("{:.9g}", row.nvfp4.global_scale),
            row.sweep ? std::string() : io::fixed_number(row.nvfp4.headroom_binades, 4),
            row.sweep ? std::string() : fmt::format("{:.6g}", share(row.nvfp4.blocks_over, row.nvfp4.blocks)));
    }
    return s;
}

// The name a tool writes a scale under. checkpoint_name gives compressed-tensors' names (KV scales
// on the attention: `<attn>.k_scale`, compressed-tensors lifecycle/initialize.py
// _initialize_attn_scales); ModelOpt's HF export puts them on the projection
// (modelopt/torch/export/quant_utils.py _KV_CACHE_REPLACEMENTS: k_bmm_quantizer -> `k_proj.k_scale`,
// v_bmm_quantizer -> `v_proj.v_scale`), as data/checkpoints/modelopt_fp8 holds them.
static std::string saved_name(const std::string& name, bool modelopt) {
    if (!modelopt) return name;
    for (const char c : {'k', 'v'}) {
        const std::string tail = fmt::format(".self_attn.{}_scale", c);
        if (name.size() > tail.size() && name.compare(name.size() - tail.size(), tail.size(), tail) == 0)
            return name.substr(0, name.size() - tail.size()) + fmt::format(".self_attn.{}_proj.{}_scale", c, c);
    }
    return name;
}

// One tensor of the file: its header entry and its bytes.
static void add_tensor(nlohmann::json& header, std::string& data, const std::string& name, const char* dtype,
                       nlohmann::json shape, const void* bytes, std::size_t n) {
    const std::size_t begin = data.size();
    data.append(static_cast<const char*>(bytes), n);
    header[name] = {{"dtype", dtype}, {"shape", std::move(shape)}, {"data_offsets", {begin, data.size()}}};
}

// An NVFP4 layer's input scale as its producer stores it (lib/src/calibrate/nvfp4_input.cpp):
// ModelOpt `<module>.input_scale` F32 [] (data/checkpoints/modelopt_nvfp4); llm-compressor
// `<module>.input_global_scale` F32 [1] (data/checkpoints/llmc_nvfp4, which has no input_scale).
static void add_nvfp4_input(nlohmann::json& header, std::string& data, const Row& row, bool modelopt) {
    const std::string suffix = "input_scale";
    const std::string module = row.checkpoint_name.substr(0, row.checkpoint_name.size() - suffix.size());
    if (modelopt) {
        const auto s = modelopt_nvfp4_input_scale(row.scale.amax);
        if (!s)
            throw CalibrateError(fmt::format(
                "--save --scheme nvfp4: {}: amax {:.9g} / 2688 underflows to zero in float32; ModelOpt's export "
                "asserts the scale is positive (qtensor/nvfp4_tensor.py get_activation_scaling_factor)",
                row.tensor, row.scale.amax));
        const std::uint32_t b = bits_of(*s);
        add_tensor(header, data, row.checkpoint_name, "F32", nlohmann::json::array(), &b, 4);
        return;
    }
    const DType d = row.scale.dtype == "bfloat16" ? DType::bf16 : DType::f32;
    const std::uint32_t b = bits_of(llmc_nvfp4_input_global_scale(row.scale.amax, d));
    add_tensor(header, data, module + "input_global_scale", "F32", nlohmann::json::array({1}), &b, 4);
}

// safetensors: 8-byte little-endian header length, the JSON header, then the data. ModelOpt's
// exported input_scale is F32 of shape [] (data/checkpoints/modelopt_fp8); compressed-tensors'
// is the activation dtype (BF16) of shape [1] (data/checkpoints/ct_fp8). Under --scheme nvfp4
// the `<module>.input_scale` rows take the NVFP4 forms above; KV and output scales stay FP8.
void write_safetensors(const Report& r, Method m, const std::string& path, Scheme scheme) {
    if (r.granularity != Granularity::tensor)
        throw CalibrateError(
            "--save: per-tensor scales only (per channel / per head scales are reported, not written)");
    require_scheme(m, scheme);
    const bool modelopt = std::string(tool(m)) == "modelopt";
    nlohmann::json header = nlohmann::json::object();
    std::string data;
    for (const auto& row : r.rows) {
        if (row.method != m) continue;
        if (row.sweep) {  // ModelOpt's NVFP4 export: weight_scale F8_E4M3 [rows, cols/16], weight_scale_2 F32 []
            add_tensor(header, data, row.checkpoint_name, "F8_E4M3", row.sweep->shape, row.sweep->weight_scale.data(),
                       row.sweep->weight_scale.size());
            const std::uint32_t b2 = bits_of(row.scale.value);
            add_tensor(header, data, row.checkpoint_name + "_2", "F32", nlohmann::json::array(), &b2, 4);
            continue;
        }
        if (scheme == Scheme::nvfp4 && ends_with(row.checkpoint_name, ".input_scale")) {
            add_nvfp4_input(header, data, row, modelopt);
            continue;
        }
        const bool bf16 = row.scale.dtype == "bfloat16";
        const std::uint32_t b = bits_of(row.scale.value);
        const std::uint16_t h = static_cast<std::uint16_t>(b >> 16);  // exact: the value is a bfloat16
        add_tensor(header, data, saved_name(row.checkpoint_name, modelopt), bf16 ? "BF16" : "F32",
                   modelopt ? nlohmann::json::array() : nlohmann::json::array({1}),
                   bf16 ? static_cast<const void*>(&h) : &b, bf16 ? 2 : 4);
    }
    if (header.empty()) throw CalibrateError(fmt::format("--save: no scale computed by method {}", name(m)));
    header["__metadata__"] = {
        {"producer", "fp8kit calibrate"}, {"method", name(m)}, {"tool", tool(m)}, {"scheme", name(scheme)}};
    std::string h = header.dump();
    while ((h.size() + 8) % 8) h += ' ';
    const std::uint64_t n = h.size();
    io::OutputFile f(path, "--save");  // io/sink.hpp: unique temporary, checked close, rename
    f.write(&n, 8);
    f.write(h);
    f.write(data);
    f.commit();
}

}  // namespace fp8kit::calibrate
