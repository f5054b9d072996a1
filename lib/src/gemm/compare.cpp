// validate --gemm: a user's GEMM output against every model, the classes of its differences and
// its error against `exact` beside the bound the closest model implies (docs/gemm.md).
#include "fp8kit/gemm/compare.hpp"

#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>

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
bool best_split(const GemmRequest& rq, const std::vector<std::uint32_t>& user, bool fast, AccumModel& best,
                std::vector<std::uint32_t>& best_out, std::size_t& best_miss) {
    if (rq.a.scale_kind == ScaleKind::block || rq.a.rows * rq.b.rows > kSplitSearchMaxOutputs) return false;
    bool found = false;
    for (const int size : split_sizes(rq.k, kSplitSearchMaxSplits)) {
        AccumModel m = split_model(fast, size);
        std::vector<std::uint32_t> out = gemm(rq, m);
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
    const auto ta = detail::decode_table(rq.a.format), tb = detail::decode_table(rq.b.format);
    const double rel = relative_bound(rq, m);
    const double tiny = rq.out == OutType::f32 ? std::ldexp(1.0, -149) : std::ldexp(1.0, -133);
    const std::size_t M = rq.a.rows, N = rq.b.rows, kblocks = (rq.k + 127) / 128;
    std::vector<double> bound(M * N);
    for (std::size_t i = 0; i < M; ++i)
        for (std::size_t j = 0; j < N; ++j) {
            double t =
                0;  // sum of |scale * product| in binary64 (relative error < K 2^-53, covered by the slack below)
            for (std::size_t k = 0; k < rq.k; ++k) {
                const double sa = rq.a.scales[detail::scale_index(rq.a, false, i, k / 128, kblocks)];
                const double sb = rq.b.scales[detail::scale_index(rq.b, true, j, k / 128, kblocks)];
                t += std::fabs(sa * sb * ta.code[rq.a.codes[i * rq.k + k]].value *
                               tb.code[rq.b.codes[j * rq.k + k]].value);
            }
            bound[i * N + j] = rel * t * (1 + std::ldexp(1.0, -40)) + 4 * tiny;
        }
    return bound;
}

GemmComparison compare(const GemmRequest& rq, const std::vector<std::uint32_t>& user) {
    const std::size_t n = rq.a.rows * rq.b.rows;
    if (user.size() != n)
        throw std::invalid_argument(
            fmt::format("output: {} elements for a {} x {} GEMM", user.size(), rq.a.rows, rq.b.rows));
    GemmComparison c;
    c.elements = n;
    // 1. Every named model, bit for bit.
    std::vector<std::vector<std::uint32_t>> ref;
    std::vector<AccumModel> models;
    for (const auto& m : named_models()) {
        try {
            ref.push_back(gemm(rq, m));
        } catch (const std::invalid_argument&) {
            continue;  // e.g. exact beyond its width: that model cannot be tried
        }
        models.push_back(m);
        c.models.push_back({m.name, count_mismatches(ref.back(), user)});
        // After sm90-fast: the split-K models, each with the split size that fits best.
        if (m.name != "sm90-fast") continue;
        for (const bool fast : {false, true}) {
            AccumModel split;
            std::vector<std::uint32_t> out;
            std::size_t miss = 0;
            if (!best_split(rq, user, fast, split, out, miss)) continue;
            ref.push_back(std::move(out));
            c.models.push_back({split.name, miss});
            models.push_back(std::move(split));
        }
    }
    if (c.models.empty()) throw std::invalid_argument("no model applies to this GEMM");
    std::size_t best = 0;
    for (std::size_t q = 0; q < c.models.size(); ++q) {
        if (c.models[q].mismatches == 0 && c.matched.empty()) c.matched = c.models[q].model;
        if (c.models[q].mismatches < c.models[best].mismatches) best = q;
    }
    c.closest = c.models[best].model;
    // 2. The differences from the closest model, by class.
    for (std::size_t e = 0; e < n; ++e) {
        const std::uint32_t r = ref[best][e], u = user[e];
        if (r == u) continue;
        const double rv = as_double(r, rq.out), uv = as_double(u, rq.out);
        DiffClass k;
        if (std::isnan(rv) || std::isnan(uv))
            k = DiffClass::nan_inf;
        else if (std::isinf(rv) != std::isinf(uv))
            k = DiffClass::overflow;
        else if (std::isinf(rv))
            k = DiffClass::nan_inf;
        else {
            bool other = false;
            for (std::size_t q = 0; q < ref.size() && !other; ++q) other = q != best && ref[q][e] == u;
            const std::int64_t d = std::llabs(ordinal(r, rq.out) - ordinal(u, rq.out));
            k = other    ? DiffClass::other_model
                : d <= 1 ? DiffClass::rounding
                : d <= 2 ? DiffClass::scale
                         : DiffClass::large;
        }
        ++c.counts[static_cast<int>(k)];
    }
    // 3. The error against `exact` (the exact value rounded once), and the closest model's bound
    // plus the half unit of that rounding.
    const std::vector<std::uint32_t> exact =
        models.front().kind == AccumKind::exact ? ref.front() : gemm(rq, parse_model("exact"));
    const std::vector<double> bound = error_bound(rq, models[best]);
    const double u_out = rq.out == OutType::f32 ? std::ldexp(1.0, -24) : std::ldexp(1.0, -8);
    for (std::size_t e = 0; e < n; ++e) {
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
        if (err > bound[e] + u_out * std::fabs(x)) c.bound_violations += 1;
    }
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
    s += fmt::format(
        "error against exact: max abs {:.6g}, max rel {:.6g} (finite elements); {} elements outside "
        "the {} bound{}\n",
        max_abs_error, max_rel_error, static_cast<std::size_t>(bound_violations), closest,
        nonfinite_violations ? fmt::format(" ({} of them Inf or NaN where exact is not, or finite where "
                                           "exact is not)",
                                           nonfinite_violations)
                             : std::string());
    return s;
}

std::string GemmComparison::json() const {
    nlohmann::ordered_json j;
    j["matched"] = matched.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(matched);
    j["closest"] = closest;
    j["elements"] = elements;
    for (const auto& m : models) j["mismatches"][m.model] = m.mismatches;
    for (int k = 0; k < kDiffClasses; ++k) j["differences"][name(static_cast<DiffClass>(k))] = counts[k];
    j["max_abs_error"] = max_abs_error;
    j["max_rel_error"] = max_rel_error;
    j["bound_violations"] = static_cast<std::size_t>(bound_violations);
    j["nonfinite_violations"] = nonfinite_violations;
    return j.dump();
}

}  // namespace fp8kit::gemm
