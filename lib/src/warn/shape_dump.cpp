// Shape signals over the tensors of dump files, and the warnings they support.
#include <cmath>
#include <cstring>
#include <unordered_map>

#include <fmt/format.h>

#include "fp8kit/warn/shape.hpp"
#include "fp8kit/warn/sources.hpp"

namespace fp8kit::warn {
namespace {

float half_to_float(std::uint16_t h) {
    const int e = (h >> 10) & 31, m = h & 1023;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    if (e == 31) return m ? NAN : sign * INFINITY;
    if (e == 0) return sign * std::ldexp(static_cast<float>(m), -24);
    return sign * std::ldexp(static_cast<float>(m | 1024), e - 25);
}

// The tensor as float32 (float64 rounded to nearest, float16/bfloat16 exactly).
std::vector<float> read_f32(dump::Dump& d, std::size_t i) {
    std::vector<float> out(d.tensors()[i].numel);
    d.read(i, [&](const dump::Chunk& c) {
        float* dst = out.data() + c.first;
        for (std::size_t k = 0; k < c.count; ++k) {
            switch (c.wide) {
                case Wide::f64: {
                    double v;
                    std::memcpy(&v, static_cast<const char*>(c.bits) + 8 * k, 8);
                    dst[k] = static_cast<float>(v);
                    break;
                }
                case Wide::f32: std::memcpy(dst + k, static_cast<const char*>(c.bits) + 4 * k, 4); break;
                case Wide::f16: {
                    std::uint16_t h;
                    std::memcpy(&h, static_cast<const char*>(c.bits) + 2 * k, 2);
                    dst[k] = half_to_float(h);
                    break;
                }
                case Wide::bf16: {
                    std::uint16_t h;
                    std::memcpy(&h, static_cast<const char*>(c.bits) + 2 * k, 2);
                    const std::uint32_t b = std::uint32_t(h) << 16;
                    std::memcpy(dst + k, &b, 4);
                    break;
                }
            }
        }
    });
    return out;
}

Warning base(const std::string& signal, const std::string& file, const std::string& tensor, std::int64_t step) {
    Warning w;
    w.signal = signal;
    w.file = file;
    w.tensor = tensor;
    w.step = step;
    return w;
}

void stats_warnings(const ShapeStats& s, Role role, const ShapeConfig& cfg, std::vector<Warning>& out) {
    // Outlier channels of gradients are not the Fishman signature (the logits' gradient, say, is
    // tiny for every token the batch lacks): their per-channel amax is reported, not warned about.
    if (!s.outlier_channels.empty() && role != Role::gradient) {
        Warning w = base("outlier-channels", s.file, s.tensor, s.step);
        const double ratio = s.max_channel_amax / s.median_channel_amax;
        w.severity = 1 + std::log2(ratio / cfg.outlier_k);
        std::string list;
        for (std::size_t i = 0; i < s.outlier_channels.size() && i < 8; ++i)
            list += fmt::format("{}{}", i ? ", " : "", s.outlier_channels[i]);
        w.evidence = fmt::format(
            "{} of {} channels have amax > {:g} x the median channel amax {:.6g} (channels {}{}); largest {:.6g} = "
            "{:.3g} x median",
            s.outlier_channels.size(), s.channels, cfg.outlier_k, s.median_channel_amax, list,
            s.outlier_channels.size() > 8 ? ", ..." : "", s.max_channel_amax, ratio);
        w.numbers = {{"channels", s.outlier_channels},
                     {"median_channel_amax", s.median_channel_amax},
                     {"max_channel_amax", s.max_channel_amax},
                     {"ratio", ratio}};
        w.resembles = kCaseOutliers;
        w.advice =
            "one tensor scale is set by these channels and crushes the rest: per-channel or block scaling "
            "(e.g. Smooth-SwiGLU-style per-channel scales), or keep the layer in BF16";
        out.push_back(std::move(w));
    }
    if (std::isfinite(s.kurtosis) && s.kurtosis > cfg.kurtosis_max) {
        Warning w = base("kurtosis", s.file, s.tensor, s.step);
        w.severity = 1 + std::log2(s.kurtosis / cfg.kurtosis_max);
        w.evidence =
            fmt::format("Pearson kurtosis {:.4g} > {:g} (a normal distribution has 3)", s.kurtosis, cfg.kurtosis_max);
        w.numbers = {{"kurtosis", s.kurtosis}, {"threshold", cfg.kurtosis_max}};
        w.resembles = kCaseKurtosis;
        w.advice = "heavy tails: watch this layer across steps; finer scaling blocks or BF16 for it";
        out.push_back(std::move(w));
    }
    if (s.has_blocks && (s.underflow > cfg.underflow_max || s.saturation > cfg.saturation_max)) {
        Warning w = base("block-scales", s.file, s.tensor, s.step);
        w.severity = 1 + std::max(s.underflow / std::max(cfg.underflow_max, 1e-12),
                                  s.saturation > cfg.saturation_max ? 2.0 : 0.0);
        w.evidence = fmt::format(
            "under {}: {:.4g}% of elements flush to zero, {:.4g}% saturate; block scales spread {:.3g} binades "
            "(std {:.3g}) over {} blocks",
            cfg.block_recipe->name, 100 * s.underflow, 100 * s.saturation, s.scale_log2_range, s.scale_log2_std,
            s.blocks);
        w.numbers = s.to_json()["blocks"];
        w.resembles = kCaseBlocks;
        w.advice =
            "saturation: use the round-up scale rule (mx-roundup, not the OCP floor); underflow: smaller blocks or a "
            "format with more range";
        out.push_back(std::move(w));
    }
}

// A linear layer's input (tokens x in) and output gradient (tokens x out) as siblings: names
// ending "input" and "grad_output" after the same '/' or '.' prefix, same file, same token count.
void layer_of(dump::Dump& d, std::size_t i, const std::unordered_map<std::string, std::size_t>& by_name,
              const GradientConfig& cfg, std::vector<LayerGradient>& out) {
    const auto& t = d.tensors()[i];
    const auto cut = t.name.find_last_of("/.");
    if (cut == std::string::npos || t.name.compare(cut + 1, std::string::npos, "input") != 0 || t.shape.size() < 2)
        return;
    const std::string prefix = t.name.substr(0, cut);
    const auto it = by_name.find(t.file + '\0' + prefix + t.name[cut] + "grad_output");
    if (it == by_name.end()) return;
    const auto& g = d.tensors()[it->second];
    const std::uint64_t in = t.shape.back(), out_f = g.shape.empty() ? 0 : g.shape.back();
    if (in == 0 || out_f == 0 || t.numel / in != g.numel / out_f || t.numel / in == 0) return;
    const std::vector<float> x = read_f32(d, i), dy = read_f32(d, it->second);
    LayerGradient L = layer_gradient(x.data(), dy.data(), t.numel / in, in, out_f, cfg);
    L.file = t.file;
    L.layer = prefix;
    L.step = t.step.value_or(-1);
    out.push_back(std::move(L));
}

}  // namespace

ShapeResult shape_signals(const std::vector<std::string>& files, const ShapeConfig& cfg,
                          const dump::ReadOptions& read) {
    ShapeResult res;
    dump::Dump d(files, {}, read);
    if (!d.errors().empty()) {
        const auto& p = d.errors().front();
        throw dump::DumpError(p.file, p.name, p.message);
    }
    res.skipped = dump::skipped(d.notes());
    std::unordered_map<std::string, std::size_t> by_name;
    for (std::size_t i = 0; i < d.tensors().size(); ++i)
        by_name.emplace(d.tensors()[i].file + '\0' + d.tensors()[i].name, i);
    for (std::size_t i = 0; i < d.tensors().size(); ++i) {
        const auto& t = d.tensors()[i];
        if (t.numel && t.role != Role::optimizer_state && t.role != Role::gradient && cfg.grad.norm_recipe &&
            is_norm_weight(t.name)) {
            const std::vector<float> w = read_f32(d, i);
            NormBias b = norm_bias(w.data(), t.numel, *cfg.grad.norm_recipe);
            b.file = t.file;
            b.tensor = t.name;
            b.step = t.step.value_or(-1);
            res.norms.push_back(std::move(b));
        }
        if (!cfg.grad.recipes.empty()) layer_of(d, i, by_name, cfg.grad, res.gradients);
        if (t.shape.size() < 2 || t.numel == 0 || t.role == Role::optimizer_state) continue;
        const std::vector<float> x = read_f32(d, i);
        const std::uint64_t cols = t.shape.back();
        ShapeStats s = shape_of(x.data(), t.numel / cols, cols, t.role, cfg);
        s.file = t.file;
        s.tensor = t.name;
        s.step = t.step.value_or(-1);
        stats_warnings(s, t.role, cfg, res.warnings);
        res.tensors.push_back(std::move(s));
        // SwiGLU: a gate weight with an up weight of the same shape in the same file (weights
        // only: the weight gradients of gate and up share their input and align by construction).
        const std::string up = swiglu_up_name(t.name);
        if (up.empty() || t.shape.size() != 2 || t.role != Role::weight) continue;
        const auto it = by_name.find(t.file + '\0' + up);
        if (it == by_name.end() || d.tensors()[it->second].shape != t.shape) continue;
        const std::vector<float> u = read_f32(d, it->second);
        SwigluAlignment a = swiglu_alignment(x.data(), u.data(), t.shape[0], t.shape[1], cfg.swiglu_cos);
        a.file = t.file;
        a.gate = t.name;
        a.up = up;
        a.step = s.step;
        if (!a.aligned.empty()) {
            Warning w = base("swiglu-alignment", t.file, t.name, a.step);
            const double top = std::fabs(a.cos[a.aligned.front()]);
            w.severity = 2 + std::log2(static_cast<double>(a.aligned.size())) + top;
            std::string list;
            for (std::size_t k = 0; k < a.aligned.size() && k < 8; ++k)
                list += fmt::format("{}{} ({:.3f})", k ? ", " : "", a.aligned[k], a.cos[a.aligned[k]]);
            w.evidence =
                fmt::format("{} of {} channels of {} and {} are aligned, |cos| >= {:g}: {}{}", a.aligned.size(),
                            a.cos.size(), t.name, up, cfg.swiglu_cos, list, a.aligned.size() > 8 ? ", ..." : "");
            w.numbers = {
                {"gate", t.name}, {"up", up}, {"channels", a.aligned}, {"top_cos", top}, {"threshold", cfg.swiglu_cos}};
            w.resembles = kCaseSwiglu;
            w.advice =
                "Smooth-SwiGLU: scale the SwiGLU output per channel before the FP8 cast of the down projection (arXiv "
                "2409.12517), "
                "or keep this layer's down projection input in BF16";
            res.warnings.push_back(std::move(w));
        }
        res.swiglu.push_back(std::move(a));
    }
    for (auto& w : gradient_warnings(res.gradients, cfg.grad)) res.warnings.push_back(std::move(w));
    for (auto& w : norm_warnings(res.norms, cfg.grad)) res.warnings.push_back(std::move(w));
    res.bf16 = bf16_choice(res.gradients, cfg.grad.bf16_fraction);
    rank(res.warnings);
    return res;
}

}  // namespace fp8kit::warn
