// Validation of a GEMM output against the models: which model it equals bit for bit, how the
// differences from the closest model fall into classes, and its error against `exact` next to
// the bound the closest model implies (docs/gemm.md, "Validation").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "fp8kit/gemm/device.hpp"
#include "fp8kit/gemm/gemm.hpp"

namespace fp8kit::gemm {

struct ModelMatch {
    std::string model;
    std::size_t mismatches = 0;  // elements whose bits differ
};

// Classes of an element that differs from the closest model.
enum class DiffClass {
    nan_inf,      // one side is NaN or Inf and the other is not (or a different one)
    overflow,     // the model overflows to Inf (or the user saturates) where the other is finite
    other_model,  // equals what another named model gives there (accumulation order/promotion)
    rounding,     // within one unit in the last place of the output type (alignment/rounding)
    scale,        // off by more, but within the error a float32 scale multiply or output cast could add
    large,        // anything else
};
inline constexpr int kDiffClasses = 6;
const char* name(DiffClass c);

struct GemmComparison {
    std::string device = "cpu";             // where the models ran: "cpu" or the GPU engine's name
    std::vector<ModelMatch> models;         // every named model, tried in named_models() order
    std::string matched;                    // first model with no mismatch; empty if none
    std::string closest;                    // the model with the fewest mismatches
    std::size_t counts[kDiffClasses] = {};  // differences from `closest`, by class
    double max_abs_error = 0;               // |user - exact| over finite elements (binary64)
    double max_rel_error = 0;               // relative to |exact| where exact != 0
    // Elements where |user - exact| exceeds the closest model's bound. A non-finite element counts
    // unless it equals exact's (the same infinity, or NaN where exact is NaN): Inf or NaN where
    // exact is finite, a finite value where exact is not, or the opposite infinity.
    double bound_violations = 0;
    std::size_t nonfinite_violations = 0;  // the non-finite ones among bound_violations
    std::size_t elements = 0;
    std::vector<std::pair<std::string, std::string>> not_run;  // (model, why) of models left out
    // What `exact` is in the error: "exact" (the exact model's output) or "binary64" (the binary64
    // sum rounded once, where the exact model did not run; every bound allows its order error).
    std::string exact_from = "exact";
    // The split size cuBLASLt 13.1 on sm90 would choose for this shape (predicted_split_k; 0: no
    // split, -1: not predicted), beside the one the search found.
    int predicted_split_k = 0;
    std::string summary() const;
    std::string json() const;
};

// `user`: the output's bits (float32, or bfloat16 in the low 16), M x N. `dev`: where the models
// run (gemm/device.hpp): the GPU computes each model it has with the same bits as the CPU.
GemmComparison compare(const GemmRequest& rq, const std::vector<std::uint32_t>& user, const GemmDevice& dev = {});

// The bound on |D - exact| that model `m` implies for each element (binary64), docs/gemm.md,
// from the magnitude sums T of binary64_sums (computed here when not given).
std::vector<double> error_bound(const GemmRequest& rq, const AccumModel& m);
std::vector<double> error_bound(const GemmRequest& rq, const AccumModel& m, const std::vector<double>& magnitude);

// The relative error a binary64 sum of K terms may carry from its order: K 2^-53 / (1 - K 2^-53).
double binary64_order_error(std::size_t k);

}  // namespace fp8kit::gemm
