// validate --gemm: a user's GEMM output against every model, the classes of its differences and
// its error against `exact` beside the bound the closest model implies (docs/gemm.md).
#include "fp8kit/gemm/compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

#include "fp8kit/gemm/device.hpp"
#include "fp8kit/io/json_number.hpp"
#include "operands.hpp"

namespace fp8kit::gemm {
namespace {

double as_double(std::uint32_t bits, OutType out) {
    if (out == OutType::bf16) bits <<= 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
}

// Distance in units in the last place: positions on the ordered line of the output's encodings.
std::int64_t ordinal(std::uint32_t bits, OutType out) {
    const int width = out == OutType::f32 ? 32 : 16;
    const std::uint32_t sign = 1u << (width - 1);
    const std::int64_t mag = bits & (sign - 1);
    return (bits & sign) ? -mag : mag;
}

// |D| bounds per element as a multiple of T = sum_k |scale * a_k * b_k| (see docs/gemm.md).
double relative_bound(const GemmRequest& rq, const AccumModel& m) {
    const double u = std::ldexp(1.0, -24), u_out = rq.out == OutType::f32 ? u : std::ldexp(1.0, -8);
    const bool blocks = rq.a.scale_kind == ScaleKind::block;
    const double k = static_cast<double>(rq.k);
    switch (m.kind) {
        case AccumKind::exact: return u_out;
        case AccumKind::fp32: {
            const double nblocks = blocks ? std::ceil(k / 128) : 1;
            return std::pow(1 + u, k + 2 + 2 * nblocks) * (1 + u_out) - 1;
        }
        case AccumKind::aligned: {
            double chunk = m.promote > 0 ? m.promote : std::max(k, 1.0);
            if (blocks) chunk = std::min(chunk, 128.0);
            const double steps = std::ceil(std::min(chunk, std::max(k, 1.0)) / m.group), chunks = std::ceil(k / chunk);
            // A product's nominal exponent can be 2 below its magnitude's (significand in [1, 4)).
            const double eps = (m.group + 1) * std::ldexp(m.nominal_exponent ? 4.0 : 1.0, 1 - m.align_bits) +
                               (m.sum_bits > 0 ? std::ldexp(1.0, 1 - m.sum_bits) : 0.0) +
                               (m.step_round == StepRound::toward_zero ? 2 * u : u);
            // Split-K adds one float32 addition per split (the reduction); its splits have fewer steps
            // than `steps` counts, so the bound stays an upper bound.
            const double splits = m.split_k > 0 ? std::ceil(k / m.split_k) : 1;
            return std::pow(1 + eps, steps) * std::pow(1 + u, chunks + splits + 3) * (1 + u_out) - 1;
        }
    }
    return 0;
}

std::size_t count_mismatches(const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
    std::size_t miss = 0;
    for (std::size_t e = 0; e < a.size(); ++e) miss += a[e] != b[e];
    return miss;
}

// Split-K kernels serve small outputs (cuBLASLt 13.1 on sm90 split 16 x 16 to 128 x 128 outputs
// with K >= 6144; docs/gemm.md "Split-K"); larger ones are not searched, which also bounds the
// search's cost (at most 2 x 63 GEMMs of M x N x K).
constexpr std::size_t kSplitSearchMaxOutputs = 128 * 128;
constexpr int kSplitSearchMaxSplits = 64;

// The split-K model of one base (sm90, or sm90-fast) whose split size gives the fewest
// mismatches; the first exact one ends the search. False when none applies.
bool best_split(const GemmRequest& rq, const std::vector<std::uint32_t>& user, const GemmDevice& dev, bool fast,
                AccumModel& best, std::vector<std::uint32_t>& best_out, std::size_t& best_miss) {
    if (rq.a.scale_kind == ScaleKind::block || rq.a.rows * rq.b.rows > kSplitSearchMaxOutputs) return false;
    bool found = false;
    for (const int size : split_sizes(rq.k, kSplitSearchMaxSplits)) {
        AccumModel m = split_model(fast, size);
        std::vector<std::uint32_t> out = dev.run(rq, m);
        const std::size_t miss = count_mismatches(out, user);
        if (!found || miss < best_miss) {
            best = std::move(m);
            best_out = std::move(out);
            best_miss = miss;
            found = true;
        }
        if (miss == 0) break;
    }
    return found;
}

}  // namespace

const char* name(DiffClass c) {
    static const char* names[kDiffClasses] = {"nan_inf", "overflow", "other_model", "rounding", "scale", "large"};
    return names[static_cast<int>(c)];
}

std::vector<double> error_bound(const GemmRequest& rq, const AccumModel& m) {
    return error_bound(rq, m, binary64_sums(rq).magnitude);
}

std::vector<double> error_bound(const GemmRequest& rq, const AccumModel& m, const std::vector<double>& magnitude) {
    const double rel = relative_bound(rq, m);
    const double tiny = rq.out == OutType::f32 ? std::ldexp(1.0, -149) : std::ldexp(1.0, -133);
    // T, the magnitude sum, is itself a binary64 sum: its relative error K 2^-53 is below the
    // slack 2^-40 up to K = 8192 and is added beyond.
    const double slack = std::max(std::ldexp(1.0, -40), binary64_order_error(rq.k));
    std::vector<double> bound(magnitude.size());
    for (std::size_t e = 0; e < bound.size(); ++e) bound[e] = rel * magnitude[e] * (1 + slack) + 4 * tiny;
    return bound;
}

double binary64_order_error(std::size_t k) {
    const double g = static_cast<double>(k) * std::ldexp(1.0, -53);
    return g / (1 - g);
}

namespace {

// The bits of every model that applies, in named_models() order with the split-K searches after
// sm90-fast, and each one's mismatches in c.models (or its reason in c.not_run).
struct ModelOutputs {
    std::vector<std::vector<std::uint32_t>> bits;
    std::vector<AccumModel> models;
};

ModelOutputs run_models(const GemmRequest& rq, const std::vector<std::uint32_t>& user, const GemmDevice& dev,
                        GemmComparison& c) {
    ModelOutputs r;
    const double work = static_cast<double>(rq.a.rows) * static_cast<double>(rq.b.rows) * static_cast<double>(rq.k);
    for (const auto& m : named_models()) {
        if (dev.gpu && !dev.on_gpu(m) && work > dev.cpu_model_work_limit) {
            c.not_run.push_back({m.name, fmt::format("M x N x K = {:.4g}: the {} model runs on the CPU only, "
                                                     "and the GPU path runs it up to {:.4g}",
                                                     work, m.name, dev.cpu_model_work_limit)});
            continue;
        }
        try {
            r.bits.push_back(dev.run(rq, m));
        } catch (const std::invalid_argument& e) {
            c.not_run.push_back({m.name, e.what()});  // e.g. exact beyond its width
            continue;
        }
        r.models.push_back(m);
        c.models.push_back({m.name, count_mismatches(r.bits.back(), user)});
        // After sm90-fast: the split-K models, each with the split size that fits best.
        if (m.name != "sm90-fast") continue;
        for (const bool fast : {false, true}) {
            AccumModel split;
            std::vector<std::uint32_t> out;
            std::size_t miss = 0;
            if (!best_split(rq, user, dev, fast, split, out, miss)) continue;
            r.bits.push_back(std::move(out));
            c.models.push_back({split.name, miss});
            r.models.push_back(std::move(split));
        }
    }
    return r;
}

DiffClass classify(std::uint32_t r, std::uint32_t u, std::size_t e, std::size_t best, const ModelOutputs& outs,
                   OutType out) {
    const double rv = as_double(r, out), uv = as_double(u, out);
    if (std::isnan(rv) || std::isnan(uv)) return DiffClass::nan_inf;
    if (std::isinf(rv) != std::isinf(uv)) return DiffClass::overflow;
    if (std::isinf(rv)) return DiffClass::nan_inf;
    for (std::size_t q = 0; q < outs.bits.size(); ++q)
        if (q != best && outs.bits[q][e] == u) return DiffClass::other_model;
    const std::int64_t d = std::llabs(ordinal(r, out) - ordinal(u, out));
    return d <= 1 ? DiffClass::rounding : d <= 2 ? DiffClass::scale : DiffClass::large;
}

// The error against `exact` and the closest model's bound. `exact` is the exact model's output
// (the exact value rounded once) where that model ran; otherwise (on the GPU path above
// cpu_model_work_limit, or beyond the exact model's width) the binary64 sum rounded once, which
// is within binary64_order_error(K) of the magnitude sum of exact: every bound then allows that.
void error_against_exact(const GemmRequest& rq, const std::vector<std::uint32_t>& user, const GemmDevice& dev,
                         const ModelOutputs& outs, const AccumModel& closest, GemmComparison& c) {
    const Binary64Sums sums = dev.sums(rq);
    std::vector<std::uint32_t> exact;
    double allowance = 0;
    if (outs.models.front().kind == AccumKind::exact) {
        exact = outs.bits.front();
        c.exact_from = "exact";
    } else {
        exact.resize(sums.sum.size());
        for (std::size_t e = 0; e < exact.size(); ++e) exact[e] = detail::round_output(sums.sum[e], rq.out);
        allowance = binary64_order_error(rq.k);
        c.exact_from = "binary64";
    }
    const std::vector<double> bound = error_bound(rq, closest, sums.magnitude);
    const double u_out = rq.out == OutType::f32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -8);
    for (std::size_t e = 0; e < exact.size(); ++e) {
        const double x = as_double(exact[e], rq.out), v = as_double(user[e], rq.out);
        if (!std::isfinite(x) || !std::isfinite(v)) {
            // No finite error to measure: equal non-finite values agree, anything else is outside
            // every bound (an infinite error).
            const bool agree = (std::isnan(x) && std::isnan(v)) || (std::isinf(x) && x == v);
            if (!agree) {
                c.bound_violations += 1;
                ++c.nonfinite_violations;
            }
            continue;
        }
        const double err = std::fabs(v - x);
        c.max_abs_error = std::max(c.max_abs_error, err);
        if (x != 0) c.max_rel_error = std::max(c.max_rel_error, err / std::fabs(x));
        if (err > bound[e] + u_out * std::fabs(x) + allowance * sums.magnitude[e]) c.bound_violations += 1;
    }
}

}  // namespace

GemmComparison compare(const GemmRequest& rq, const std::vector<std::uint32_t>& user, const GemmDevice& dev) {
    const std::size_t n = rq.a.rows * rq.b.rows;
    if (user.size() != n)
        throw std::invalid_argument(
            fmt::format("output: {} elements for a {} x {} GEMM", user.size(), rq.a.rows, rq.b.rows));
    GemmComparison c;
    c.elements = n;
    c.device = dev.gpu ? dev.gpu->name : "cpu";
    c.predicted_split_k = predicted_split_k(rq.a.rows, rq.b.rows, rq.k, rq.a.scale_kind);
    // 1. Every named model, bit for bit.
    const ModelOutputs outs = run_models(rq, user, dev, c);
    if (c.models.empty()) throw std::invalid_argument("no model applies to this GEMM");
    std::size_t best = 0;
    for (std::size_t q = 0; q < c.models.size(); ++q) {
        if (c.models[q].mismatches == 0 && c.matched.empty()) c.matched = c.models[q].model;
        if (c.models[q].mismatches < c.models[best].mismatches) best = q;
    }
    c.closest = c.models[best].model;
    // 2. The differences from the closest model, by class.
    for (std::size_t e = 0; e < n; ++e)
        if (outs.bits[best][e] != user[e])
            ++c.counts[static_cast<int>(classify(outs.bits[best][e], user[e], e, best, outs, rq.out))];
    // 3. The error against `exact`, and the closest model's bound plus the half unit of its rounding.
    error_against_exact(rq, user, dev, outs, outs.models[best], c);
    return c;
}

std::string GemmComparison::summary() const {
    std::string s =
        matched.empty() ? "matches no model bit for bit\n" : fmt::format("matches model {} bit for bit\n", matched);
    for (const auto& m : models)
        s += fmt::format("  {:<13} {} of {} elements differ\n", m.model, m.mismatches, elements);
    if (matched.empty()) {
        s += fmt::format("differences from the closest model ({}):", closest);
        for (int k = 0; k < kDiffClasses; ++k)
            if (counts[k]) s += fmt::format(" {} {}", name(static_cast<DiffClass>(k)), counts[k]);
        s += "\n";
    }
    for (const auto& [model, why] : not_run) s += fmt::format("  {:<13} not run: {}\n", model, why);
    if (predicted_split_k > 0)
        s += fmt::format(
            "cuBLASLt 13.1 on sm90 splits this shape into ranges of {} products (predicted; docs/gemm.md, "
            "\"Split-K: the prediction\")\n",
            predicted_split_k);
    if (predicted_split_k < 0)
        s += "cuBLASLt 13.1 on sm90 may cap its splits on this shape: the split size is not predicted (docs/gemm.md, "
             "\"Split-K: the prediction\")\n";
    s += fmt::format(
        "error against exact{}: max abs {:.6g}, max rel {:.6g} (finite elements); {} elements outside "
        "the {} bound{}\n",
        exact_from == "exact" ? "" : " (a binary64 sum rounded once)", max_abs_error, max_rel_error,
        static_cast<std::size_t>(bound_violations), closest,
        nonfinite_violations ? fmt::format(" ({} of them Inf or NaN where exact is not, or finite where "
                                           "exact is not)",
                                           nonfinite_violations)
                             : std::string());
    return s;
}

std::string GemmComparison::json() const {
    nlohmann::ordered_json j;
    j["device"] = device;
    j["matched"] = matched.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(matched);
    j["closest"] = closest;
    j["elements"] = elements;
    for (const auto& m : models) j["mismatches"][m.model] = m.mismatches;
    j["not_run"] = nlohmann::ordered_json::object();
    for (const auto& [model, why] : not_run) j["not_run"][model] = why;
    j["exact_from"] = exact_from;
    j["predicted_split_k"] =
        predicted_split_k < 0 ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(predicted_split_k);
    for (int k = 0; k < kDiffClasses; ++k) j["differences"][name(static_cast<DiffClass>(k))] = counts[k];
    j["max_abs_error"] = io::json_number<nlohmann::ordered_json>(max_abs_error);
    j["max_rel_error"] = io::json_number<nlohmann::ordered_json>(max_rel_error);
    j["bound_violations"] = static_cast<std::size_t>(bound_violations);
    j["nonfinite_violations"] = nonfinite_violations;
    return j.dump();
}

}  // namespace fp8kit::gemm
