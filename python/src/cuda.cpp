// The CUDA kernels (cuda/include/fp8kit/cuda/kernels.hpp) on device pointers the Python side takes
// from an array's __cuda_array_interface__ / DLPack capsule (python/fp8kit/_device.py). Pointers and
// the stream (a cudaStream_t) cross as integers; every call is asynchronous on that stream except
// cuda_stats (the kernel API returns host values). cuda_stats_async queues the statistics of a
// recipe's cast with the scale taken from a device amax into a device record (statistics_async.hpp);
// cuda_stats_rows reads records copied to the host. Built only when the module is configured with
// the kernels (FP8KIT_PY_CUDA); otherwise cuda_available() says why and the rest is absent.
#include <fmt/format.h>

#include <cstdint>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <tuple>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "fp8kit/stats/device.hpp"

#ifdef FP8KIT_PY_CUDA
#include "fp8kit/cuda/blocks.hpp"
#include "fp8kit/cuda/fake_quantize.hpp"
#include "fp8kit/cuda/engine.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/cuda/statistics_async.hpp"
#include "fp8kit/cuda/validate.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/recipes/scale_params.hpp"
#include "fp8kit/stats/statistics.hpp"
#endif

namespace fp8kit::py {
namespace {

#ifdef FP8KIT_PY_CUDA
using Ptr = std::uintptr_t;
void* vp(Ptr p) { return reinterpret_cast<void*>(p); }
std::uint8_t* u8(Ptr p) { return reinterpret_cast<std::uint8_t*>(p); }
float* fp(Ptr p) { return reinterpret_cast<float*>(p); }

// The kernels take f32, f16 and bf16 inputs (kernels.hpp); f64 gets this message, not the kernel's.
Wide kernel_wide(const std::string& s, const char* arg) {
    const Wide w = require_wide(s, arg);
    if (w == Wide::f64)
        throw std::invalid_argument(
            fmt::format("{}: float64 device arrays are not supported by the CUDA "
                        "kernels (float32, float16, bfloat16)",
                        arg));
    return w;
}

Format kernel_format(const std::string& s, bool cast_only) {
    const Format f = require_format(s, "format");
    const bool ok = cast_only ? cuda::has_cast_kernels(f) : cuda::has_kernels(f);
    if (!ok) throw std::invalid_argument(fmt::format("format: no CUDA kernel for {} in this call", s));
    return f;
}

void quantize(Ptr in, const std::string& wide, Ptr out, std::size_t n, const std::string& format, const OptStr& profile,
              const OptStr& rounding, const OptStr& overflow, const OptStr& nan, double scale, std::uint64_t seed,
              std::uint64_t first, Ptr stream) {
    const Wide w = kernel_wide(wide, "x");
    const Format f = kernel_format(format, true);
    const Policy p = resolve_policy(f, w, profile, rounding, overflow, nan);
    pyb::gil_scoped_release nogil;
    cuda::quantize(f, w, vp(in), u8(out), n, p, static_cast<float>(scale), seed, first, vp(stream));
}

void dequantize(Ptr in, const std::string& format, Ptr out, const std::string& wide, std::size_t n, double scale_inv,
                Ptr stream) {
    const Format f = kernel_format(format, true);
    const Wide w = kernel_wide(wide, "dtype");
    pyb::gil_scoped_release nogil;
    cuda::dequantize(f, w, u8(in), vp(out), n, static_cast<float>(scale_inv), vp(stream));
}

void amax(Ptr in, const std::string& wide, std::size_t n, Ptr out, Ptr stream) {
    const Wide w = kernel_wide(wide, "x");
    pyb::gil_scoped_release nogil;
    cuda::amax(w, vp(in), n, fp(out), vp(stream));
}

// Block quantisers: kind "1x128", "128x128" (TE Float8BlockScaling, scale_inv per block) or
// "mx-floor" / "mx-roundup" (E8M0 scale codes per 32 elements of a row).
void quantize_block(const std::string& kind, Ptr in, const std::string& wide, Ptr out, std::size_t rows,
                    std::size_t cols, const std::string& format, const OptStr& profile, const OptStr& rounding,
                    const OptStr& overflow, const OptStr& nan, Ptr scales, bool pow2, double epsilon,
                    std::uint64_t seed, Ptr stream) {
    const Wide w = kernel_wide(wide, "x");
    const Format f = kernel_format(format, false);
    const Policy p = resolve_policy(f, w, profile, rounding, overflow, nan);
    const cuda::ScaleOptions o{pow2, static_cast<float>(epsilon)};
    pyb::gil_scoped_release nogil;
    if (kind == "1x128")
        cuda::quantize_block_1x128(f, w, vp(in), u8(out), rows, cols, p, fp(scales), o, seed, 0, vp(stream));
    else if (kind == "128x128")
        cuda::quantize_block_128x128(f, w, vp(in), u8(out), rows, cols, p, fp(scales), o, seed, 0, vp(stream));
    else if (kind == "mx-floor" || kind == "mx-roundup")
        cuda::quantize_mx(f, w, vp(in), u8(out), rows, cols, p,
                          kind == "mx-floor" ? cuda::MxRule::ocp_floor : cuda::MxRule::round_up, u8(scales), seed, 0,
                          vp(stream));
    else
        throw std::invalid_argument(fmt::format("kind: unknown block kind '{}'", kind));
}

// Any block recipe's cast of one role (lib's block_recipe, as quantize_blocks on the host):
// cuda_block_layout gives the outputs' shapes for a rows x cols input, cuda_quantize_blocks fills
// them (cuda/blocks.hpp quantize_blocks, the global amax included; asynchronous on `stream`).
BlockRecipe block_recipe_of(const std::string& recipe, bool is_json, const std::string& role, std::size_t cols) {
    return block_recipe(recipe_of(recipe, is_json), parse_recipe_slot(role), cols);
}

pyb::dict block_layout(const std::string& recipe, bool is_json, const std::string& role, std::size_t rows,
                       std::size_t cols) {
    const BlockRecipe br = block_recipe_of(recipe, is_json, role, cols);
    // With columnwise_rht the codes are of TE's column-wise copy, cols x rows.
    const std::size_t qr = br.columnwise_rht ? cols : rows, qc = br.columnwise_rht ? rows : cols;
    const std::size_t tr = br.block_rows == 0 ? (qr > 0 ? qr : 1) : static_cast<std::size_t>(br.block_rows);
    const std::size_t tc = br.block_cols == 0 ? (qc > 0 ? qc : 1) : static_cast<std::size_t>(br.block_cols);
    pyb::dict d;
    d["shape"] = pyb::make_tuple(qr, qc);
    d["block_shape"] = pyb::make_tuple(tr, tc);
    d["grid"] = pyb::make_tuple((qr + tr - 1) / tr, (qc + tc - 1) / tc);
    d["columnwise_rht"] = br.columnwise_rht;
    d["format"] = std::string(name(br.format));
    return d;
}

void quantize_recipe_blocks(const std::string& recipe, bool is_json, const std::string& role, Ptr in,
                            const std::string& wide, std::size_t rows, std::size_t cols, Ptr codes, bool packed,
                            Ptr scale_codes, Ptr scale, Ptr scale_inv, Ptr global_amax, std::uint64_t seed,
                            Ptr stream) {
    const Wide w = kernel_wide(wide, "x");
    const BlockRecipe br = block_recipe_of(recipe, is_json, role, cols);
    if (!cuda::has_cast_kernels(br.format))
        throw std::invalid_argument(fmt::format("recipe: no CUDA kernel for its format {}", name(br.format)));
    const cuda::BlockSpec spec{br.format,  br.rule, br.block_rows,    br.block_cols,    br.policy,
                               br.epsilon, br.pow2, br.value_for_inf, br.columnwise_rht};
    pyb::gil_scoped_release nogil;
    cuda::quantize_blocks(spec, w, vp(in), rows, cols, u8(codes), packed, u8(scale_codes), fp(scale), fp(scale_inv),
                          fp(global_amax), seed, vp(stream));
}

// Fake quantisation of a block recipe's role (cuda/fake_quantize.hpp fake_quantize_blocks): the spec is
// resolved once (cuda_fake_quant_spec; the recipe text is parsed there, not per call).
cuda::BlockSpec fake_quant_spec(const std::string& recipe, bool is_json, const std::string& role, std::size_t cols) {
    const BlockRecipe br = block_recipe_of(recipe, is_json, role, cols);
    if (!cuda::has_cast_kernels(br.format))
        throw std::invalid_argument(fmt::format("recipe: no CUDA kernel for its format {}", name(br.format)));
    return cuda::BlockSpec{br.format,  br.rule, br.block_rows,    br.block_cols,    br.policy,
                           br.epsilon, br.pow2, br.value_for_inf, br.columnwise_rht};
}

void fake_quantize_recipe_blocks(const cuda::BlockSpec& spec, Ptr in, const std::string& wide, std::size_t rows,
                                 std::size_t cols, Ptr out, const std::string& out_wide, Ptr tensor_factor,
                                 std::uint64_t seed, Ptr stream) {
    const Wide w = kernel_wide(wide, "x"), to = kernel_wide(out_wide, "out");
    pyb::gil_scoped_release nogil;
    cuda::fake_quantize_blocks(spec, w, vp(in), rows, cols, to, vp(out), fp(tensor_factor), seed, vp(stream));
}

// The same for the transpose of x (rows x cols) read in place (fake_quantize_blocks_transposed): out
// is rows x cols bf16, the transpose of fake_quantize_blocks of x^T.
void fake_quantize_recipe_blocks_transposed(const cuda::BlockSpec& spec, Ptr in, const std::string& wide,
                                            std::size_t rows, std::size_t cols, Ptr out, const std::string& out_wide,
                                            Ptr tensor_factor, std::uint64_t seed, Ptr stream) {
    const Wide w = kernel_wide(wide, "x"), to = kernel_wide(out_wide, "out");
    pyb::gil_scoped_release nogil;
    cuda::fake_quantize_blocks_transposed(spec, w, vp(in), rows, cols, to, vp(out), fp(tensor_factor), seed,
                                          vp(stream));
}

// out (bf16, n) = the float32 GEMM result c times the two tensor factors (device floats), rounded
// as torch's (c * (fa * fb)).to(bfloat16) (cuda::times_tensor_factors_bf16).
void times_tensor_factors_bf16(Ptr c, std::size_t n, Ptr factor_a, Ptr factor_b, Ptr out, Ptr stream) {
    pyb::gil_scoped_release nogil;
    cuda::times_tensor_factors_bf16(fp(c), n, fp(factor_a), fp(factor_b), vp(out), vp(stream));
}

pyb::dict stats(Ptr in, const std::string& wide, std::size_t n, const std::string& format, const OptStr& profile,
                const OptStr& rounding, const OptStr& overflow, const OptStr& nan, double scale, double scale_inv,
                std::uint64_t seed, Ptr stream) {
    const Wide w = kernel_wide(wide, "x");
    const Format f = kernel_format(format, true);  // the statistics kernel takes every cast format (issue 16)
    const Policy p = resolve_policy(f, w, profile, rounding, overflow, nan);
    QuantStats s;
    {
        pyb::gil_scoped_release nogil;
        s = cuda::statistics(f, w, vp(in), n, p, static_cast<float>(scale), static_cast<float>(scale_inv), seed, 0,
                             vp(stream));
    }
    return stats_dict(s);
}

// A recipe's tensorwise cast of one role, resolved once (the monitor makes one per recipe, role
// and input type): the format and policy fp8kit.stats would take, and the recipe's scale rule.
using StatsPlan = cuda::StatsPlan;

StatsPlan stats_plan(const std::string& recipe, bool is_json, const std::string& role, const std::string& wide,
                     const std::string& format, const OptStr& rounding, const OptStr& overflow, const OptStr& nan) {
    const RecipeSpec r = recipe_of(recipe, is_json);
    const Wide w = kernel_wide(wide, "x");
    const Format f = kernel_format(format, false);
    const numerics::ScaleParams rule = recipe_scale_params(r, parse_recipe_slot(role));
    if (rule.format != f)
        throw std::invalid_argument(fmt::format("format: {} is not the recipe's format for role {}", format, role));
    return {f, w, resolve_policy(f, w, std::nullopt, rounding, overflow, nan), rule};
}

// A block recipe's cast of one role on a tensor of `cols` columns (lib's block_recipe), NVFP4's
// global amax and TE's column-wise RHT copy included, or None when the GPU does not serve it
// (cuda::block_stats_plan: a format without kernels, a delayed recipe): the monitor then computes
// it on a host copy.
pyb::object block_stats_plan(const std::string& recipe, bool is_json, const std::string& role, const std::string& wide,
                             std::size_t cols) {
    const RecipeSpec r = recipe_of(recipe, is_json);
    const Wide w = kernel_wide(wide, "x");
    BlockRecipe br;
    try {
        br = block_recipe(r, parse_recipe_slot(role), cols);
    } catch (const std::invalid_argument&) {
        return pyb::none();
    }
    const auto p = cuda::block_stats_plan(br, w);
    return p ? pyb::cast(*p) : pyb::none();
}

// compute_block_stats' total of a rows x cols device tensor into the zeroed record at `record`,
// each tile's scale_inv at `scale_inv` and extremes at tile_amax / tile_min (0: not written);
// global_amax: one device float for NVFP4's rules (0 otherwise).
void block_stats_async(const cuda::BlockStatsPlan& p, Ptr in, std::size_t rows, std::size_t cols, Ptr record,
                       Ptr scale_inv, Ptr workspace, std::uint64_t seed, Ptr stream, Ptr tile_amax, Ptr tile_min,
                       Ptr global_amax) {
    pyb::gil_scoped_release nogil;
    cuda::block_statistics_async(p, vp(in), rows, cols, reinterpret_cast<cuda::StatsRecord*>(record), fp(scale_inv),
                                 vp(workspace), seed, vp(stream), fp(tile_amax), fp(tile_min), fp(global_amax));
}

// fp8kit.stats(device array, recipe=<block recipe>): cuda::block_stats (the CLI's --device cuda
// runs the same), each tile's scale_inv into the caller's device array at `scale_inv`
// (grid_rows x grid_cols float32). The dict of block_stats_dict, without 'scale_inv'.
pyb::dict block_stats_sync(const cuda::BlockStatsPlan& p, Ptr in, std::size_t rows, std::size_t cols, Ptr scale_inv,
                           std::uint64_t seed, Ptr stream) {
    BlockStats b;
    {
        pyb::gil_scoped_release nogil;
        b = cuda::block_stats(p, vp(in), rows, cols, fp(scale_inv), seed, vp(stream));
    }
    return block_stats_dict(b, p.to);
}

// The statistics of one tensor under several plans (one record each), one call from Python.
void stats_async(const std::vector<StatsPlan>& plans, Ptr in, std::size_t n, Ptr amax, const std::vector<Ptr>& records,
                 Ptr workspace, std::uint32_t sample, std::uint64_t seed, Ptr stream) {
    if (plans.size() != records.size()) throw std::invalid_argument("records: one record per plan");
    pyb::gil_scoped_release nogil;
    for (std::size_t i = 0; i < plans.size(); ++i)
        cuda::statistics_async(plans[i].to, plans[i].from, vp(in), n, plans[i].policy, plans[i].rule, fp(amax),
                               reinterpret_cast<cuda::StatsRecord*>(records[i]), vp(workspace), sample, seed, 0,
                               vp(stream));
}

// One monitored tensor in one call (the monitor's hot path): its amax into the device slot `amax`
// (unless compute_amax is false: the slot already holds it, e.g. reduced across ranks), then the
// statistics of every plan of `group` into the contiguous zeroed records at `records`
// (cuda::watch_async: one read of a 16-bit tensor for all plans; the workspace is
// cuda_watch_workspace_bytes() zeroed bytes, left zeroed).
// A group is the plans of one role and input type, built once (cuda_stats_group).
struct StatsGroup {
    std::vector<StatsPlan> plans;
};
StatsGroup stats_group(const std::vector<StatsPlan>& plans) { return {plans}; }

void watch(const StatsGroup& g, Ptr in, const std::string& wide, std::size_t n, Ptr amax, Ptr records, Ptr workspace,
           std::uint32_t sample, std::uint64_t seed, Ptr stream, bool compute_amax) {
    const Wide w = kernel_wide(wide, "x");
    const std::vector<StatsPlan>& group = g.plans;
    for (const auto& p : group)
        if (p.from != w) throw std::invalid_argument("x: the plans were made for another input type");
    pyb::gil_scoped_release nogil;
    if (group.empty()) {
        if (compute_amax) cuda::amax(w, vp(in), n, fp(amax), vp(stream));
        return;
    }
    cuda::watch_async(group.data(), group.size(), vp(in), n, fp(amax), compute_amax,
                      reinterpret_cast<cuda::StatsRecord*>(records), vp(workspace), sample, seed, 0, vp(stream));
}

// The monitor's batch of one stream (cuda::WatchBatch): watch()'s arguments per tensor, the
// evaluation of all of them at flush() (the end of a step).
struct WatchBatch {
    std::unique_ptr<cuda::WatchBatch> batch;
    Ptr stream;
};
WatchBatch watch_batch(Ptr stream) { return {std::make_unique<cuda::WatchBatch>(vp(stream)), stream}; }

void watch_batch_add(WatchBatch& b, const StatsGroup& g, Ptr in, const std::string& wide, std::size_t n, Ptr amax,
                     Ptr records, std::uint32_t sample, std::uint64_t seed, bool compute_amax) {
    const Wide w = kernel_wide(wide, "x");
    const std::vector<StatsPlan>& group = g.plans;
    for (const auto& p : group)
        if (p.from != w) throw std::invalid_argument("x: the plans were made for another input type");
    pyb::gil_scoped_release nogil;
    if (group.empty()) {  // a role whose recipes are all block recipes: the amax alone
        if (compute_amax) cuda::amax(w, vp(in), n, fp(amax), vp(b.stream));
        return;
    }
    b.batch->add(group.data(), group.size(), vp(in), n, fp(amax), compute_amax,
                 reinterpret_cast<cuda::StatsRecord*>(records), sample, seed, 0);
}

// The columns of stats_rows, in the monitor's order.
const char* const kRowColumns[] = {
    "numel",     "amax",     "min_nonzero",  "zeros",       "nan", "inf",     "underflow",
    "subnormal", "overflow", "te_underflow", "te_overflow", "mse", "sqnr_db", "dynamic_range_binades",
    "sample"};

// Records copied to host memory at `host` as one tuple each (kRowColumns): what a monitor row
// keeps, without the histogram.
pyb::list stats_rows(Ptr host, std::size_t count) {
    const auto* r = reinterpret_cast<const cuda::StatsRecord*>(host);
    pyb::list out;
    for (std::size_t i = 0; i < count; ++i) {
        const QuantStats q = cuda::stats_of_record(r[i]);
        out.append(pyb::make_tuple(q.numel, q.amax, q.min_nonzero, q.zeros, q.nan, q.inf, q.underflow, q.subnormal,
                                   q.overflow, q.te_underflow, q.te_overflow, q.mse(), q.sqnr_db(),
                                   q.dynamic_range_binades(), r[i].sample));
    }
    return out;
}

// fp8kit.validate(device input, device codes): cuda::validate_scan on `stream` (the caller's
// current stream), then lib's validate_mismatches for the report: (report JSON, summary,
// consistency line), what the host path returns. Block scales come as a device pointer with
// their count (device_blocks != 0) or as a host float32 array.
pyb::tuple validate(Ptr in, const std::string& wide, Ptr codes, std::size_t n, std::size_t rows, std::size_t cols,
                    const std::string& format, const OptStr& profile, const OptStr& rounding, const OptStr& overflow,
                    const OptStr& nan, const std::string& mode, double value, const std::string& layout,
                    const std::optional<pyb::array>& host_blocks, Ptr device_blocks, std::size_t device_block_count,
                    std::size_t examples, bool detect_policies, Ptr stream) {
    ValidateRequest req;
    req.from = kernel_wide(wide, "input");
    req.to = kernel_format(format, true);
    req.policy = resolve_policy(req.to, req.from, profile, rounding, overflow, nan);
    req.n = n;
    req.scaling.mode = parse_scale_mode(mode);
    req.scaling.layout = parse_block_layout(layout);
    req.scaling.value = static_cast<float>(value);
    req.scaling.rows = rows;
    req.scaling.cols = cols;
    cuda::ValidateScaling sc;
    sc.mode = req.scaling.mode;
    sc.layout = req.scaling.layout;
    sc.value = req.scaling.value;
    sc.rows = rows;
    sc.cols = cols;
    if (req.scaling.layout != BlockLayout::tensor) {
        if (device_blocks) {
            sc.scales = fp(device_blocks);
            sc.block_count = device_block_count;
            sc.scales_on_device = true;
        } else if (host_blocks) {
            sc.scales = static_cast<const float*>(contiguous_data(*host_blocks, 4, "block_scales"));
            sc.block_count = static_cast<std::size_t>(host_blocks->size());
        } else {
            throw std::invalid_argument(fmt::format("block_scales: layout {} needs one scale per block", layout));
        }
        const std::size_t want = block_scale_count(sc.layout, rows, cols);
        if (cols == 0 || rows * cols != n || sc.block_count != want)
            throw std::invalid_argument(fmt::format("validate: {} blocks of a {} x {} input need {} scales, got {}",
                                                    layout, rows, cols, want, sc.block_count));
    }
    ValidateOptions opts;
    opts.examples = examples;
    opts.detect_policies = detect_policies;
    ValidateReport r;
    {
        pyb::gil_scoped_release nogil;
        cuda::ValidateScan s =
            cuda::validate_scan(req.to, req.from, vp(in), u8(codes), n, req.policy, sc, detect_policies, vp(stream));
        req.scaling.blocks = s.scales.data();  // the S the scan used, on the host
        req.scaling.block_count = s.scales.size();
        MismatchScan m;
        m.n = s.n;
        m.indices = std::move(s.indices);
        m.input_bits = std::move(s.input_bits);
        m.codes = std::move(s.codes);
        m.policies = s.policies;
        r = validate_mismatches(req, m, opts);
    }
    return pyb::make_tuple(r.json(), r.summary(), describe_consistency(r));
}

#endif

pyb::tuple cuda_available() {
#ifdef FP8KIT_PY_CUDA
    std::string why;
    const int n = cuda::device_count(&why);
    if (n > 0) return pyb::make_tuple(true, std::string());
    return pyb::make_tuple(false, fmt::format("no CUDA device: {}", why));
#else
    return pyb::make_tuple(false, fp8kit::built_without_cuda());
#endif
}

}  // namespace

void bind_cuda(pyb::module_& m) {
    using namespace pybind11::literals;
    m.def("cuda_available", &cuda_available);
#ifdef FP8KIT_PY_CUDA
    cuda::use_gpu();  // lib's device='cuda' paths (fp8kit.gemm, validate_gemm) reach the GPU through it
    m.def("cuda_quantize", &quantize, "x"_a, "wide"_a, "out"_a, "n"_a, "format"_a, "profile"_a, "rounding"_a,
          "overflow"_a, "nan"_a, "scale"_a, "seed"_a, "index_offset"_a, "stream"_a);
    m.def("cuda_dequantize", &dequantize, "codes"_a, "format"_a, "out"_a, "wide"_a, "n"_a, "scale_inv"_a, "stream"_a);
    m.def("cuda_amax", &amax, "x"_a, "wide"_a, "n"_a, "out"_a, "stream"_a);
    m.def("cuda_quantize_block", &quantize_block, "kind"_a, "x"_a, "wide"_a, "out"_a, "rows"_a, "cols"_a, "format"_a,
          "profile"_a, "rounding"_a, "overflow"_a, "nan"_a, "scales"_a, "pow2"_a, "epsilon"_a, "seed"_a, "stream"_a);
    m.def("cuda_block_layout", &block_layout, "recipe"_a, "is_json"_a, "role"_a, "rows"_a, "cols"_a);
    m.def("cuda_quantize_blocks", &quantize_recipe_blocks, "recipe"_a, "is_json"_a, "role"_a, "x"_a, "wide"_a, "rows"_a,
          "cols"_a, "codes"_a, "packed"_a, "scale_codes"_a, "scale"_a, "scale_inv"_a, "global_amax"_a, "seed"_a,
          "stream"_a);
    pyb::class_<cuda::BlockSpec>(m, "CudaBlockSpec")
        .def_property_readonly("format", [](const cuda::BlockSpec& b) { return std::string(name(b.format)); })
        .def_property_readonly("block_shape",
                               [](const cuda::BlockSpec& b) { return pyb::make_tuple(b.block_rows, b.block_cols); })
        .def_property_readonly("columnwise_rht", [](const cuda::BlockSpec& b) { return b.columnwise_rht; });
    m.def("cuda_fake_quant_spec", &fake_quant_spec, "recipe"_a, "is_json"_a, "role"_a, "cols"_a);
    m.def("cuda_fake_quantize_blocks", &fake_quantize_recipe_blocks, "spec"_a, "x"_a, "wide"_a, "rows"_a, "cols"_a,
          "out"_a, "out_wide"_a, "tensor_factor"_a, "seed"_a, "stream"_a);
    m.def("cuda_fake_quantize_blocks_transposed", &fake_quantize_recipe_blocks_transposed, "spec"_a, "x"_a, "wide"_a,
          "rows"_a, "cols"_a, "out"_a, "out_wide"_a, "tensor_factor"_a, "seed"_a, "stream"_a);
    m.def("cuda_times_tensor_factors_bf16", &times_tensor_factors_bf16, "c"_a, "n"_a, "factor_a"_a, "factor_b"_a,
          "out"_a, "stream"_a);
    m.def("cuda_stats", &stats, "x"_a, "wide"_a, "n"_a, "format"_a, "profile"_a, "rounding"_a, "overflow"_a, "nan"_a,
          "scale"_a, "scale_inv"_a, "seed"_a, "stream"_a);
    pyb::class_<StatsPlan>(m, "CudaStatsPlan");
    m.def("cuda_stats_plan", &stats_plan, "recipe"_a, "is_json"_a, "role"_a, "wide"_a, "format"_a, "rounding"_a,
          "overflow"_a, "nan"_a);
    m.def("cuda_stats_async", &stats_async, "plans"_a, "x"_a, "n"_a, "amax"_a, "records"_a, "workspace"_a, "sample"_a,
          "seed"_a, "stream"_a);
    m.def("cuda_stats_rows", &stats_rows, "host"_a, "count"_a);
    pyb::class_<cuda::BlockStatsPlan>(m, "CudaBlockStatsPlan")
        .def_property_readonly(
            "block_shape", [](const cuda::BlockStatsPlan& p) { return pyb::make_tuple(p.block_rows, p.block_cols); })
        .def_property_readonly("columnwise_rht", [](const cuda::BlockStatsPlan& p) { return p.columnwise_rht; })
        .def_property_readonly(
            "global_amax", [](const cuda::BlockStatsPlan& p) { return numerics::rule_uses_global_amax(p.rule.rule); });
    m.def("cuda_block_stats_plan", &block_stats_plan, "recipe"_a, "is_json"_a, "role"_a, "wide"_a, "cols"_a);
    m.def("cuda_block_stats", &block_stats_sync, "plan"_a, "x"_a, "rows"_a, "cols"_a, "scale_inv"_a, "seed"_a,
          "stream"_a);
    m.def("cuda_block_stats_async", &block_stats_async, "plan"_a, "x"_a, "rows"_a, "cols"_a, "record"_a, "scale_inv"_a,
          "workspace"_a, "seed"_a, "stream"_a, "tile_amax"_a = Ptr{0}, "tile_min"_a = Ptr{0}, "global_amax"_a = Ptr{0});
    m.def("cuda_block_grid", &cuda::block_grid, "plan"_a, "rows"_a, "cols"_a);
    pyb::class_<StatsGroup>(m, "CudaStatsGroup").def_property_readonly("size", [](const StatsGroup& g) {
        return g.plans.size();
    });
    m.def("cuda_stats_group", &stats_group, "plans"_a);
    m.def("cuda_watch", &watch, "group"_a, "x"_a, "wide"_a, "n"_a, "amax"_a, "records"_a, "workspace"_a, "sample"_a,
          "seed"_a, "stream"_a, "compute_amax"_a = true);
    pyb::tuple cols(std::size(kRowColumns));
    for (std::size_t i = 0; i < std::size(kRowColumns); ++i) cols[i] = pyb::str(kRowColumns[i]);
    m.attr("cuda_stats_columns") = cols;
    m.attr("cuda_stats_record_bytes") = sizeof(cuda::StatsRecord);
    m.def("cuda_stats_workspace_bytes", &cuda::statistics_workspace_bytes);
    m.def("cuda_watch_workspace_bytes", &cuda::watch_workspace_bytes);
    pyb::class_<WatchBatch>(m, "CudaWatchBatch")
        .def("add", &watch_batch_add, "group"_a, "x"_a, "wide"_a, "n"_a, "amax"_a, "records"_a, "sample"_a, "seed"_a,
             "compute_amax"_a = true)
        .def("flush", [](WatchBatch& b) { b.batch->flush(); })
        .def_property_readonly("pending", [](const WatchBatch& b) { return b.batch->pending(); });
    m.def("cuda_watch_batch", &watch_batch, "stream"_a);
    m.def("cuda_validate", &validate, "x"_a, "wide"_a, "codes"_a, "n"_a, "rows"_a, "cols"_a, "format"_a, "profile"_a,
          "rounding"_a, "overflow"_a, "nan"_a, "mode"_a, "value"_a, "layout"_a, "host_blocks"_a, "device_blocks"_a,
          "device_block_count"_a, "examples"_a, "detect_policies"_a, "stream"_a);
#endif
}

}  // namespace fp8kit::py
