// validate(): a kernel's FP8 output against the reference, with the mismatch classes.
#include <fmt/format.h>

#include <stdexcept>

#include "bindings.hpp"
#include "comm.hpp"
#include "fp8kit/cluster/validate.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit::py {

BlockLayout parse_block_layout(const std::string& s) {
    return parse_named([](const std::string& b) { return fp8kit::parse_block_layout(b); }, s, "layout");
}

ScaleMode parse_scale_mode(const std::string& s) {
    if (s == "none") return ScaleMode::none;
    if (s == "scale") return ScaleMode::scale;
    if (s == "scale_inv") return ScaleMode::scale_inv;
    throw std::invalid_argument(fmt::format("scaling: unknown mode '{}'", s));
}

namespace {

// Returns (report JSON text, summary text, consistency line); with a communicator (comm not None),
// each rank compares its share of the blocks (cluster::validate, as `mpirun fp8kit validate`) and
// rank 0 returns the tuple, the others None.
pyb::object validate_bits(const pyb::array& input, const std::string& wide, const pyb::array& codes,
                          const std::string& format, const OptStr& profile, const OptStr& rounding,
                          const OptStr& overflow, const OptStr& nan, const std::string& mode, double value,
                          const std::string& layout, const std::optional<pyb::array>& blocks, std::size_t examples,
                          bool detect_policies, const pyb::object& comm) {
    ValidateRequest req;
    req.from = require_wide(wide, "dtype");
    req.to = require_format(format, "format");
    req.policy = resolve_policy(req.to, req.from, profile, rounding, overflow, nan);
    req.input = contiguous_data(input, wide_size(req.from), "input");
    req.codes = static_cast<const std::uint8_t*>(contiguous_data(codes, 1, "output"));
    req.n = static_cast<std::size_t>(input.size());
    if (static_cast<std::size_t>(codes.size()) != req.n)
        throw std::invalid_argument(fmt::format("output: {} codes for {} input elements", codes.size(), req.n));
    req.scaling.mode = parse_scale_mode(mode);
    req.scaling.layout = parse_block_layout(layout);
    req.scaling.value = static_cast<float>(value);
    req.scaling.cols = input.ndim() == 0 ? 1 : static_cast<std::size_t>(input.shape(input.ndim() - 1));
    req.scaling.rows = req.scaling.cols == 0 ? 0 : req.n / req.scaling.cols;
    if (req.scaling.layout != BlockLayout::tensor) {
        if (!blocks)
            throw std::invalid_argument(fmt::format("block_scales: layout {} needs one scale per block", layout));
        req.scaling.blocks = static_cast<const float*>(contiguous_data(*blocks, 4, "block_scales"));
        req.scaling.block_count = static_cast<std::size_t>(blocks->size());
    }
    ValidateOptions opts;
    opts.examples = examples;
    opts.detect_policies = detect_policies;
    std::optional<PyComm> pc;
    if (!comm.is_none()) pc.emplace(comm);
    std::optional<ValidateReport> r;
    {
        pyb::gil_scoped_release nogil;
        if (pc)
            r = cluster::validate(*pc, req, opts);
        else
            r = validate(req, opts);
    }
    if (!r) return pyb::none();
    return pyb::make_tuple(r->json(), r->summary(), describe_consistency(*r));
}

// Stored block scales (f32, E8M0 or E4M3 with a global scale; row-major, padded or swizzled) to
// the row-major float32 scales validate reads (lib's block_scale_values).
pyb::array_t<float> stored_scale_values(const pyb::array& scales, const std::string& type, const std::string& order,
                                        double global, const std::string& layout, std::size_t rows, std::size_t cols,
                                        const std::string& mode) {
    StoredScales st;
    st.type = parse_named(parse_scale_type, type, "scales_dtype");
    st.order = parse_named(parse_scale_order, order, "scales_layout");
    st.data = contiguous_data(scales, st.type == ScaleType::f32 ? 4 : 1, "block_scales");
    st.count = static_cast<std::size_t>(scales.size());
    st.global = static_cast<float>(global);
    const std::vector<float> v = block_scale_values(st, parse_block_layout(layout), rows, cols, parse_scale_mode(mode));
    return pyb::array_t<float>(static_cast<pyb::ssize_t>(v.size()), v.data());
}

pyb::array_t<std::uint8_t> unpack_fp4(const pyb::array& packed, std::size_t rows, std::size_t cols) {
    const auto* p = static_cast<const std::uint8_t*>(contiguous_data(packed, 1, "output"));
    const std::vector<std::uint8_t> c = unpack_fp4_codes(p, static_cast<std::size_t>(packed.size()), rows, cols);
    return pyb::array_t<std::uint8_t>(static_cast<pyb::ssize_t>(c.size()), c.data());
}

// A TransformerEngine DumpTensors file: (name, format, scale_inv, report JSON, summary, {kind, layout,
// swizzled, scale_blocks, scale_mismatches[, amax_matches]}), or None.
pyb::object check_te_file(const std::string& path) {
    std::optional<TeQuantizedCheck> c;
    {
        pyb::gil_scoped_release nogil;
        c = check_te_quantized(path);
    }
    if (!c) return pyb::none();
    pyb::dict extra;
    extra["kind"] = c->kind;
    extra["layout"] = std::string(name(c->layout));
    extra["swizzled"] = c->swizzled;
    extra["scale_blocks"] = c->scale_blocks;
    extra["scale_mismatches"] = c->scale_mismatches;
    if (c->kind == "NVFP4Tensor") extra["amax_matches"] = c->amax_matches;
    return pyb::make_tuple(c->name, std::string(name(c->format)), c->scale_inv, c->report.json(), c->report.summary(),
                           extra);
}

}  // namespace

void bind_validate(pyb::module_& m) {
    using namespace pyb::literals;
    m.def("validate", &validate_bits, "input"_a, "wide"_a, "output"_a, "format"_a, "profile"_a, "rounding"_a,
          "overflow"_a, "nan"_a, "mode"_a, "value"_a, "layout"_a, "block_scales"_a, "examples"_a, "detect_policies"_a,
          "comm"_a = pyb::none());
    m.def("check_te_quantized", &check_te_file, "path"_a);
    m.def("stored_scale_values", &stored_scale_values, "scales"_a, "type"_a, "order"_a, "global_scale"_a, "layout"_a,
          "rows"_a, "cols"_a, "mode"_a);
    m.def("unpack_fp4_codes", &unpack_fp4, "packed"_a, "rows"_a, "cols"_a);
}

}  // namespace fp8kit::py
