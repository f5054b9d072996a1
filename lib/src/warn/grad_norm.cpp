// The gradient-norm verdict: warn/grad_norm.hpp.
#include "fp8kit/warn/grad_norm.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/printable.hpp"

namespace fp8kit::warn {

namespace {

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const std::size_t n = v.size();
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

GradNormVerdict::GradNormVerdict(GradNormConfig c) : cfg_(std::move(c)), lows_(cfg_.rules.size()) {
    if (cfg_.median_of == 0) throw std::invalid_argument("grad-norm verdict: median_of must be at least 1");
    for (const auto& r : cfg_.rules)
        if (r.span < 0 || !(r.growth > 1))
            throw std::invalid_argument(fmt::format(
                "grad-norm verdict: a rule needs span >= 0 and growth > 1 (span {}, growth {})", r.span, r.growth));
}

void GradNormVerdict::observe(std::int64_t step, double norm) {
    if (seen_ > 0 && step <= last_)
        throw std::invalid_argument(
            fmt::format("gradient norm: step {} after step {} (steps must increase)", step, last_));
    last_ = step;
    ++seen_;
    if (!std::isfinite(norm)) {
        growth_ = std::numeric_limits<double>::infinity();
        if (!flag_ && step >= cfg_.start) flag_ = GradNormFlag{step, growth_, norm, 0, -1, 0};
        return;
    }
    recent_.push_back(norm);
    if (recent_.size() > cfg_.median_of) recent_.pop_front();
    if (recent_.size() < cfg_.median_of) return;
    const double g = median({recent_.begin(), recent_.end()});
    growth_ = 0;
    for (std::size_t i = 0; i < cfg_.rules.size(); ++i) {
        auto& q = lows_[i];
        while (!q.empty() && q.back().second >= g) q.pop_back();
        q.emplace_back(step, g);
        while (q.front().first < step - cfg_.rules[i].span) q.pop_front();
        const double lowest = q.front().second;
        const double r = lowest > 0 ? g / lowest : (g > 0 ? std::numeric_limits<double>::infinity() : 1.0);
        growth_ = std::max(growth_, r);
        if (!flag_ && step >= cfg_.start && r >= cfg_.rules[i].growth)
            flag_ = GradNormFlag{step, r, g, lowest, q.front().first, cfg_.rules[i].span};
    }
}

std::optional<Warning> GradNormVerdict::warning(const std::string& file) const {
    if (!flag_) return std::nullopt;
    const GradNormFlag& f = *flag_;
    Warning w;
    w.signal = "grad-norm-growth";
    w.file = file;
    w.tensor = "gradient norm";
    w.step = w.step_end = f.step;
    if (!std::isfinite(f.growth)) {
        w.severity = 8;
        w.evidence = fmt::format("the gradient norm is not finite at step {}", f.step);
    } else {
        w.severity = 1 + std::log2(f.growth / 3);
        w.evidence = fmt::format(
            "the gradient norm (median of the last {}) grew {:.2f}x in {} steps: {:.4g} at step {} against {:.4g} at "
            "step {}",
            cfg_.median_of, f.growth, f.step - f.lowest_step, f.median, f.step, f.lowest, f.lowest_step);
    }
    w.numbers = {{"growth", f.growth},           {"median", f.median}, {"lowest", f.lowest},
                 {"lowest_step", f.lowest_step}, {"span", f.span},     {"median_of", cfg_.median_of}};
    w.resembles =
        "the divergence benchmark (docs/early-warning.md): the gradient norm rose before the loss in the runs that "
        "diverged, and not in their controls";
    w.advice =
        "the run is likely to diverge: lower the learning rate, turn the recipe's safeguards on (stochastic rounding "
        "of gradients, the round-up scale rule, the random Hadamard transform, BF16 for the sensitive layers), or "
        "restart from an earlier checkpoint";
    return w;
}

void read_grad_norms(const std::string& path, GradNormVerdict& v) {
    auto f = io::open_input_stream(path);
    std::string line;
    std::size_t n = 0;
    auto fail = [&](const std::string& why) {
        throw std::invalid_argument(fmt::format("{}: line {}: {}", io::quoted(path), n, why));
    };
    auto next_line = [&]() {
        line.clear();
        int c;
        while ((c = std::fgetc(f.get())) != EOF && c != '\n') line.push_back(static_cast<char>(c));
        if (!line.empty() && line.back() == '\r') line.pop_back();
        ++n;
        return c != EOF || !line.empty();
    };
    auto cells = [&]() {
        std::vector<std::string> out(1);
        for (char c : line) {
            if (c == ',')
                out.emplace_back();
            else
                out.back().push_back(c);
        }
        return out;
    };
    if (!next_line()) fail("empty: a header naming columns step and grad_norm is expected");
    const auto head = cells();
    const auto col = [&](const char* name) {
        const auto it = std::find(head.begin(), head.end(), name);
        if (it == head.end())
            fail(fmt::format("the header has no column '{}' (columns step and grad_norm are read)", name));
        return static_cast<std::size_t>(it - head.begin());
    };
    const std::size_t cs = col("step"), cg = col("grad_norm");
    while (next_line()) {
        if (line.empty()) continue;
        const auto row = cells();
        if (row.size() <= std::max(cs, cg)) fail(fmt::format("{} cells, fewer than the header's", row.size()));
        std::int64_t step = 0;
        double g = 0;
        try {
            std::size_t used = 0;
            step = std::stoll(row[cs], &used);
            if (used != row[cs].size()) throw std::invalid_argument("");
            g = std::stod(row[cg], &used);
            if (used != row[cg].size()) throw std::invalid_argument("");
        } catch (const std::exception&) {
            fail(fmt::format("not a step and a number: {}", io::quoted(line)));
        }
        try {
            v.observe(step, g);
        } catch (const std::invalid_argument& e) {
            fail(e.what());
        }
    }
}

}  // namespace fp8kit::warn
