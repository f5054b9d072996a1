// `fp8kit calibrate DUMPS`: group the dump's tensors by name across steps (each step one
// calibration batch, in step order), hold out steps, run each method, and measure the held-out
// E4M3 cast under the resulting scale.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "fp8kit/calibrate.hpp"
#include "fp8kit/convert/names.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/emu/formats.hpp"
#include "fp8kit/io/dump.hpp"
#include "convert/float_bits.hpp"

namespace fp8kit::calibrate {
namespace {

struct MethodName {
    Method m;
    const char* name;
    const char* alias;  // the library's own name
};
constexpr MethodName kMethods[] = {
    {Method::modelopt_max, "modelopt_max", "max"},
    {Method::modelopt_mse, "modelopt_mse", "mse"},
    {Method::modelopt_percentile, "modelopt_percentile", "percentile"},
    {Method::llmc_memoryless_minmax, "llmc_memoryless_minmax", "memoryless_minmax"},
    {Method::llmc_static_minmax, "llmc_static_minmax", "static_minmax"},
    {Method::llmc_minmax, "llmc_minmax", "minmax"},
    {Method::llmc_mse, "llmc_mse", "llmc-mse"},
    {Method::modelopt_nvfp4_sweep, "modelopt_nvfp4_sweep", "nvfp4_sweep"},
};

// The tensor's name without the path component that names its step ("step_000100/m/input" ->
// "m/input"); unchanged when no component carries a step.
std::string strip_step(const std::string& name) {
    std::size_t start = 0;
    while (start <= name.size()) {
        const std::size_t end = std::min(name.find('/', start), name.size());
        if (dump::guess_step(name.substr(start, end - start))) {
            std::string out = name.substr(0, start) + (end < name.size() ? name.substr(end + 1) : "");
            if (!out.empty() && out.back() == '/') out.pop_back();
            return out;
        }
        start = end + 1;
    }
    return name;
}

// "<module>/input" -> "<module>.input_scale", "<module>/output" -> "<module>.output_scale"
// (compressed-tensors' names for static input and output activation scales; ModelOpt's exported
// input_scale has the same name); any other tensor keeps its name, '/' -> '.', + ".input_scale".
std::string checkpoint_name(const std::string& tensor) {
    // Q/K/V as the attention kernel receives them (`<layer>.q/.k/.v`, fp8kit.torch.Monitor): the
    // KV-cache scale names compressed-tensors writes and vLLM loads (`self_attn.k_scale`, ...).
    if (tensor.size() > 2 && tensor[tensor.size() - 2] == '.' &&
        std::string("qkv").find(tensor.back()) != std::string::npos)
        return tensor.substr(0, tensor.size() - 2) + "." + tensor.back() + "_scale";
    for (const char* role : {"input", "output"}) {
        const std::string suffix = std::string("/") + role;
        if (tensor.size() > suffix.size() && tensor.compare(tensor.size() - suffix.size(), suffix.size(), suffix) == 0)
            return tensor.substr(0, tensor.size() - suffix.size()) + "." + role + "_scale";
    }
    std::string n = tensor;
    std::replace(n.begin(), n.end(), '/', '.');
    return n + ".input_scale";
}

// "<module>/weight" -> "<module>.weight_scale" (ModelOpt's NVFP4 export; weight_scale_2 beside it).
std::string weight_scale_name(const std::string& tensor) {
    const std::string suffix = "/weight";
    std::string n =
        tensor.size() > suffix.size() && tensor.compare(tensor.size() - suffix.size(), suffix.size(), suffix) == 0
            ? tensor.substr(0, tensor.size() - suffix.size()) + "/weight_scale"
            : tensor + "/weight_scale";
    std::replace(n.begin(), n.end(), '/', '.');
    return n;
}

struct Group {
    std::vector<std::size_t> index;  // into the dump's tensors, by step
    std::vector<std::int64_t> steps;
    bool bf16 = true;
};

Batch read_batch(dump::Dump& d, std::size_t i) {
    const auto& t = d.tensors()[i];
    Batch b(t.numel);
    d.read(i, [&](const dump::Chunk& c) {
        for (std::size_t k = 0; k < c.count; ++k) {
            float v;
            if (c.wide == Wide::f32) {
                std::memcpy(&v, static_cast<const char*>(c.bits) + 4 * k, 4);
            } else {  // bfloat16: the high half of a float32, exactly
                std::uint16_t h;
                std::memcpy(&h, static_cast<const char*>(c.bits) + 2 * k, 2);
                const std::uint32_t w = static_cast<std::uint32_t>(h) << 16;
                std::memcpy(&v, &w, 4);
            }
            b[c.first + k] = v;
        }
    });
    return b;
}

// The slices of one tensor's batches: per channel (element i in channel i % width) or per head
// (element i of a [batch, heads, positions, dim] tensor in head (i / (positions * dim)) % heads).
std::vector<std::vector<Batch>> slices(const std::vector<Batch>& batches, Granularity g,
                                       const std::vector<std::uint64_t>& shape) {
    const std::size_t width = shape.empty() || shape.back() == 0 ? 1 : shape.back();
    const std::size_t n = g == Granularity::channel ? width : shape[1];
    const std::size_t inner = g == Granularity::channel ? 1 : shape[2] * shape[3];
    std::vector<std::vector<Batch>> out(n, std::vector<Batch>(batches.size()));
    for (std::size_t b = 0; b < batches.size(); ++b)
        for (std::size_t i = 0; i < batches[b].size(); ++i) {
            const std::size_t k = g == Granularity::channel ? i % width : (i / inner) % n;
            out[k][b].push_back(batches[b][i]);
        }
    return out;
}

void check_shape(const std::string& key, const std::vector<std::uint64_t>& shape, Granularity g) {
    if (g == Granularity::head && shape.size() != 4)
        throw CalibrateError(key +
                             ": per head needs a [batch, heads, positions, head_dim] tensor (Q/K/V as "
                             "fp8kit.torch.Monitor(attention=True) dumps them); it has " +
                             std::to_string(shape.size()) + " dimensions");
    if (g == Granularity::channel && shape.empty())
        throw CalibrateError(key + ": per channel needs a tensor with a last dimension");
}

}  // namespace

const char* name(Granularity g) {
    return g == Granularity::tensor ? "tensor" : g == Granularity::channel ? "channel" : "head";
}
std::optional<Granularity> parse_granularity(std::string_view s) {
    if (s == "tensor") return Granularity::tensor;
    if (s == "channel") return Granularity::channel;
    if (s == "head" || s == "attn_head") return Granularity::head;
    return std::nullopt;
}
void require_granularity(Method m, Granularity g) {
    if (g == Granularity::tensor) return;
    if (m == Method::modelopt_nvfp4_sweep)
        throw CalibrateError("modelopt_nvfp4_sweep: per tensor only (its scales are per block of 16 already)");
    const bool llmc = std::string(tool(m)) == "llm-compressor";
    if (g == Granularity::channel && llmc)
        throw CalibrateError(std::string(name(m)) +
                             " per channel: llm-compressor refuses a channel strategy for activations "
                             "(observers/helpers.py _flatten_activation)");
    if (m == Method::modelopt_percentile)  // ModelOpt itself refuses (the golden script records its exception)
        throw CalibrateError(
            "modelopt_percentile: per tensor only: ModelOpt 0.47.0's HistogramCalibrator raises "
            "NotImplementedError for any axis (calib/histogram.py HistogramCalibrator.__init__: "
            "\"Calibrator histogram collection only supports per tensor scaling\")");
}

std::optional<std::string> not_offered(std::string_view method) {
    // ModelOpt 0.47.0 calib/histogram.py HistogramCalibrator.compute_amax: both raise TypeError for
    // FP8's num_bits=(4, 3) (scripts/fixtures/make_calibration_golden.py records the exceptions).
    if (method == "modelopt_entropy" || method == "entropy")
        return std::string(method) +
               ": not defined for FP8 in ModelOpt 0.47.0: HistogramCalibrator.compute_amax(\"entropy\") "
               "(calib/histogram.py _compute_amax_entropy) computes nbins = 1 << (num_bits - 1 + int(unsigned)), which "
               "raises "
               "TypeError for FP8's num_bits=(4, 3): a KL-divergence search over 128 INT8 levels";
    if (method == "modelopt_hist_mse" || method == "hist_mse" || method == "histogram_mse")
        return std::string(method) +
               ": not defined for FP8 in ModelOpt 0.47.0: HistogramCalibrator.compute_amax(\"mse\") "
               "(calib/histogram.py _compute_amax_mse) calls scaled_e4m3(centers, amax, 4, 3), which binds 4 and 3 to "
               "ScaledE4M3Function.forward's bias and E and raises TypeError (missing M) (tensor_quant.py)";
    return std::nullopt;
}

const char* name(Method m) {
    for (const auto& e : kMethods)
        if (e.m == m) return e.name;
    return "?";
}
std::optional<Method> parse_method(std::string_view s) {
    for (const auto& e : kMethods)
        if (s == e.name || s == e.alias) return e.m;
    return std::nullopt;
}
std::vector<Method> all_methods() {
    std::vector<Method> v;
    for (const auto& e : kMethods)
        if (e.m != Method::modelopt_nvfp4_sweep) v.push_back(e.m);  // a weight method, named on its own
    return v;
}
const char* tool(Method m) {
    return (m == Method::modelopt_max || m == Method::modelopt_mse || m == Method::modelopt_percentile ||
            m == Method::modelopt_nvfp4_sweep)
               ? "modelopt"
               : "llm-compressor";
}

HoldoutStats holdout_stats(const std::vector<Batch>& batches, float scale) {
    HoldoutStats h;
    double sig = 0, err = 0;
    const Policy rne{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
    for (const auto& b : batches)
        for (float x : b) {
            ++h.elements;
            if (x == 0.0f || std::isnan(x)) continue;
            ++h.nonzero;
            const double v = static_cast<double>(x) / scale;
            h.clipped += std::fabs(v) > 448.0;
            const double q = detail::round_trip_f64(Format::e4m3, v, rne);
            h.underflow += q == 0.0;
            const double deq = q * scale;
            sig += static_cast<double>(x) * x;
            err += (deq - x) * (deq - x);
        }
    h.sqnr_db = err == 0 ? HUGE_VAL : 10.0 * std::log10(sig / err);
    return h;
}

namespace {

// Which steps are held out: the parsed --holdout-steps, "none", or (neither) each tensor's last.
struct HoldoutRule {
    std::vector<dump::StepRange> steps;
    bool given = false, none = false;
    std::optional<double> tokens;  // by sample instead
    bool holds(std::int64_t s, bool last, std::size_t n) const {
        if (tokens || none) return false;
        if (given)
            return std::any_of(steps.begin(), steps.end(),
                               [&](const dump::StepRange& x) { return x.lo <= s && s <= x.hi; });
        return n >= 2 && last;
    }
};

HoldoutRule parse_holdout(const Options& o) {
    HoldoutRule h;
    if (o.holdout_tokens && o.holdout_steps)
        throw CalibrateError("--holdout-tokens and --holdout-steps exclude each other");
    if (o.holdout_tokens && !(*o.holdout_tokens > 0.0 && *o.holdout_tokens < 1.0))
        throw CalibrateError("--holdout-tokens: a fraction between 0 and 1 (exclusive)");
    h.tokens = o.holdout_tokens;
    h.given = o.holdout_steps.has_value();
    if (h.given && *o.holdout_steps == "none") {
        h.none = true;
    } else if (h.given) {
        try {
            h.steps = dump::parse_steps(*o.holdout_steps);
        } catch (const std::invalid_argument& e) {
            throw CalibrateError(std::string("--holdout-steps: ") + e.what());
        }
    }
    return h;
}

// The selected tensors by name without their step (role activation unless --tensors names them).
std::map<std::string, Group> group_tensors(const dump::Dump& d, const Options& o, Report& r) {
    std::map<std::string, Group> groups;
    for (std::size_t i = 0; i < d.tensors().size(); ++i) {
        const auto& t = d.tensors()[i];
        if (o.include.empty() && t.role != dump::Role::activation) continue;
        if (t.dtype != dump::DType::bf16 && t.dtype != dump::DType::f32) {
            r.notes.push_back(t.name + ": stored as " + std::string(dump::name(t.dtype)) +
                              "; calibration reads bfloat16 or float32 activations: skipped");
            continue;
        }
        auto& g = groups[strip_step(t.name)];
        g.index.push_back(i);
        g.steps.push_back(t.step ? *t.step : static_cast<std::int64_t>(g.steps.size()));
        g.bf16 = g.bf16 && t.dtype == dump::DType::bf16;
    }
    if (groups.empty())
        throw CalibrateError(o.include.empty() ? "no activation tensor in " + io::quoted_list(o.files) +
                                                     " (role 'activation'; name others with --tensors)"
                                               : "no tensor of " + io::quoted_list(o.files) + " matches --tensors");
    return groups;
}

// One tensor's steps read, in step order, and divided into calibration and held-out batches.
struct Split {
    std::vector<Batch> calib, held;
    std::vector<std::int64_t> csteps, hsteps;
};

Split split_group(dump::Dump& d, const std::string& key, const Group& g, const HoldoutRule& rule) {
    std::vector<std::size_t> order(g.index.size());
    for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return g.steps[a] < g.steps[b]; });
    Split sp;
    for (std::size_t k : order) {
        const std::int64_t s = g.steps[k];
        Batch b = read_batch(d, g.index[k]);
        if (rule.tokens) {  // by sample: the last tokens (rows of [-1, last dim]) of every step
            const auto& shape = d.tensors()[g.index[k]].shape;
            const std::size_t width = shape.empty() || shape.back() == 0 ? 1 : shape.back();
            const std::size_t rows = b.size() / width;
            const auto h = static_cast<std::size_t>(std::ceil(*rule.tokens * static_cast<double>(rows)));
            if (h == 0 || h >= rows)
                throw CalibrateError(key + ": --holdout-tokens leaves no token to " +
                                     (h == 0 ? "hold out" : "calibrate on") + " (" + std::to_string(rows) +
                                     " tokens a step)");
            sp.held.emplace_back(b.begin() + static_cast<std::ptrdiff_t>((rows - h) * width), b.end());
            b.resize((rows - h) * width);
            sp.calib.push_back(std::move(b));
            sp.csteps.push_back(s);
            sp.hsteps.push_back(s);
            continue;
        }
        const bool hold = rule.holds(s, k == order.back(), order.size());
        (hold ? sp.held : sp.calib).push_back(std::move(b));
        (hold ? sp.hsteps : sp.csteps).push_back(s);
    }
    return sp;
}

// modelopt_nvfp4_sweep on one tensor: NVFP4MSECalibrator is one-shot (calib/mse.py collect raises
// on a second call), so the tensor must have exactly one calibration step; its last dimension
// is the block dimension. Reported: weight_scale_2 as the scale, the global amax, the block
// scales, and the NVFP4 SQNR under them and under the max rule's scales.
Row sweep_row(const std::string& key, const Split& sp, const std::vector<std::uint64_t>& shape) {
    if (sp.calib.size() != 1)
        throw CalibrateError(key +
                             ": modelopt_nvfp4_sweep takes one step of a weight (NVFP4MSECalibrator is one-shot: "
                             "calib/mse.py collect raises on a second call); it has " +
                             std::to_string(sp.calib.size()) +
                             " calibration steps: select one with --tensors 'step_000299/*/weight'");
    const std::size_t cols = shape.empty() ? 0 : static_cast<std::size_t>(shape.back());
    Nvfp4Sweep s;
    try {
        s = nvfp4_scale_sweep(sp.calib.front(), cols);
    } catch (const CalibrateError& e) {
        throw CalibrateError(key + ": " + e.what());
    }
    Row row;
    row.tensor = key;
    row.checkpoint_name = weight_scale_name(key);
    row.method = Method::modelopt_nvfp4_sweep;
    row.scale.value = s.weight_scale_2;
    row.scale.dtype = "float32";
    row.scale.amax = s.global_amax;
    row.calib_batches = 1;
    row.calib_steps = sp.csteps;
    SweepRow w;
    w.shape = {sp.calib.front().size() / cols, cols / 16};
    w.weight_scale = s.weight_scale;
    w.blocks = s.weight_scale.size();
    const auto by_max = nvfp4_max_scales(sp.calib.front(), s.weight_scale_2);
    for (std::size_t b = 0; b < by_max.size(); ++b) w.blocks_changed += by_max[b] != s.weight_scale[b];
    w.sqnr_db = nvfp4_sqnr(sp.calib.front(), s.weight_scale, s.weight_scale_2);
    w.sqnr_max_db = nvfp4_sqnr(sp.calib.front(), by_max, s.weight_scale_2);
    row.sweep = std::move(w);
    return row;
}

}  // namespace

Report run(const Options& o) {
    if (o.methods.empty()) throw CalibrateError("no --method given");
    const HoldoutRule rule = parse_holdout(o);
    std::vector<dump::Problem> problems;
    const auto files = dump::expand_inputs(o.files, problems);
    if (!problems.empty()) throw CalibrateError(problems.front().describe());
    if (files.empty()) throw CalibrateError("no dump file given");
    dump::Selection sel;
    sel.include = o.include;
    for (Method m : o.methods) require_granularity(m, o.granularity);
    if (o.granularity == Granularity::head && o.holdout_tokens)
        throw CalibrateError("--holdout-tokens: per tensor or per channel only (a token cut splits the heads' layout)");
    dump::Dump d(files, sel);
    if (!d.errors().empty()) throw CalibrateError(d.errors().front().describe());
    Report r;
    r.granularity = o.granularity;
    r.skipped = dump::skipped(d.notes());
    for (const auto& [key, g] : group_tensors(d, o, r)) {
        const Split sp = split_group(d, key, g, rule);
        if (sp.calib.empty()) {
            r.notes.push_back(key + ": every step is held out: no calibration batch, skipped");
            continue;
        }
        const auto& shape = d.tensors()[g.index.front()].shape;
        std::vector<std::vector<Batch>> calib{sp.calib}, held{sp.held};
        if (o.granularity != Granularity::tensor) {
            check_shape(key, shape, o.granularity);
            calib = slices(sp.calib, o.granularity, shape);
            held = slices(sp.held, o.granularity, shape);
        }
        for (Method m : o.methods) {
            if (m == Method::modelopt_nvfp4_sweep) {
                if (!sp.held.empty() || rule.tokens)
                    throw CalibrateError(
                        key +
                        ": modelopt_nvfp4_sweep calibrates a weight: no held-out data (use --holdout-steps none)");
                r.rows.push_back(sweep_row(key, sp, shape));
                continue;
            }
            const DType dt = g.bf16 ? DType::bf16 : DType::f32;
            const auto scales = o.granularity == Granularity::tensor
                                    ? std::vector<Scale>{calibrate(m, calib.front(), dt)}
                                    : calibrate_groups(m, calib, dt);
            for (std::size_t k = 0; k < calib.size(); ++k) {
                Row row;
                row.tensor = key;
                row.checkpoint_name = checkpoint_name(key);
                row.method = m;
                row.index = o.granularity == Granularity::tensor ? -1 : static_cast<std::int64_t>(k);
                row.scale = scales[k];
                row.calib_batches = sp.calib.size();
                row.holdout_batches = sp.held.size();
                row.calib_steps = sp.csteps;
                row.holdout_steps = sp.hsteps;
                row.calib = holdout_stats(calib[k], row.scale.value);
                if (!sp.held.empty()) row.holdout = holdout_stats(held[k], row.scale.value);
                const std::size_t width = o.granularity == Granularity::tensor && !shape.empty() ? shape.back() : 1;
                row.nvfp4 = nvfp4_headroom(sp.held.empty() ? calib[k] : held[k], row.scale.amax,
                                           o.granularity == Granularity::channel ? 1 : width);
                r.rows.push_back(std::move(row));
            }
        }
    }
    if (r.rows.empty()) throw CalibrateError("nothing calibrated: " + r.notes.front());
    return r;
}

}  // namespace fp8kit::calibrate
