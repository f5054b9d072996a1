// The run-level verdict from the gradient norm (docs/early-warning.md, "The divergence benchmark"):
// a run whose gradient norm grows fast over its own recent past is flagged as heading for
// divergence. Fitted on the benchmark's fitting seeds (scripts/bench/divergence_verdict.py): in
// the diverging runs of scripts/gpu/divergence_bench.py the gradient norm rose 3-10x within tens of
// steps before the loss did, while in their controls (the same recipes at a learning rate where
// they train, their safeguarded siblings, BF16) it fell after warm-up or crept up slowly.
//
// At each step s: g(s) = the median of the last `median_of` gradient norms (fewer at the start);
// for each rule, growth = g(s) / the smallest g(t) over t in [s - span, s] (t from the step where
// `median_of` norms first exist); the run is flagged at the first step s >= `start` where a rule's
// growth reaches its threshold, or where a gradient norm is not finite.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {

struct GradNormRule {
    std::int64_t span = 80;  // steps looked back for the lowest median
    double growth = 3;       // g(s) / that lowest median that flags the run
};

struct GradNormConfig {
    std::size_t median_of = 16;
    std::int64_t start = 20;  // no flag before this step (the first steps' norms move by orders)
    // Fitted on seeds 0 and 1 of the divergence benchmark (docs/early-warning.md).
    std::vector<GradNormRule> rules = {{80, 3.0}, {200, 4.0}};
};

struct GradNormFlag {
    std::int64_t step = -1;         // the step the run was flagged at
    double growth = 0;              // the rule's growth then (Inf when the norm was not finite)
    double median = 0, lowest = 0;  // g(step) and the lowest median it was compared with
    std::int64_t lowest_step = -1, span = 0;
};

class GradNormVerdict {
public:
    explicit GradNormVerdict(GradNormConfig c = {});
    // Steps must increase; throws std::invalid_argument otherwise.
    void observe(std::int64_t step, double norm);
    const std::optional<GradNormFlag>& flag() const { return flag_; }
    // The largest growth over the rules at the last step (0 before `median_of` norms).
    double growth() const { return growth_; }
    std::int64_t last_step() const { return last_; }
    // The flag as a top-level warning (signal "grad-norm-growth", tensor "gradient norm").
    std::optional<Warning> warning(const std::string& file) const;
    const GradNormConfig& config() const { return cfg_; }

private:
    GradNormConfig cfg_;
    std::deque<double> recent_;  // the last median_of norms
    std::int64_t last_ = -1, seen_ = 0;
    double growth_ = 0;
    // Per rule, the (step, median) pairs whose median can still be the window's lowest: a
    // monotonic queue, so each step costs O(1) amortised.
    std::vector<std::deque<std::pair<std::int64_t, double>>> lows_;
    std::optional<GradNormFlag> flag_;
};

// The gradient norms of a CSV file with a header naming columns `step` and `grad_norm` (the
// monitor's grad_norm.csv, divergence_run.py's loss.csv), in file order, fed to `v`. Opened through
// the input gate; a missing column, a bad number or a step that does not increase throws
// std::invalid_argument naming the file and line.
void read_grad_norms(const std::string& path, GradNormVerdict& v);

}  // namespace fp8kit::warn
