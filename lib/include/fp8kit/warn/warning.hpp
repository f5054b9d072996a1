// One early warning (docs/early-warning.md): the tensor, the evidence (numbers and steps), the
// published case it resembles and what to change. Ranked by severity, written as text, JSON, CSV.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace fp8kit::warn {

struct Warning {
    std::string signal;  // "spike", "growth", "overflow", "overflow-forecast", "fixed-scale",
                         // "outlier-channels", "swiglu-alignment", "kurtosis", "block-scales"
    std::string file;    // the trace or dump it came from
    std::string tensor;
    std::int64_t step = -1;      // the step the evidence points at (first detection); -1: none
    std::int64_t step_end = -1;  // the last step of the evidence window; -1: none
    double severity = 0;         // ranking key, in binades (log2) past the signal's threshold + 1
    std::string evidence;        // numbers and steps, in words
    nlohmann::json numbers;      // the same numbers, for programs
    std::string resembles;       // the published case (arXiv id)
    std::string advice;          // what to change
    // "warning": top-level, actionable; "info": folded into the report's info section, with
    // `note` saying why (an early-training transient, absorbed by the recipe, folded into
    // another warning of the same tensor).
    std::string level = "warning";
    std::string note;
};

// Top-level warnings before info; then highest severity first; ties by file, tensor, signal, step.

// (A total order: same output for any thread count.)
void rank(std::vector<Warning>& w);

nlohmann::json to_json(const Warning& w);
// CSV header and rows: signal,severity,file,tensor,step,step_end,evidence,resembles,advice,level,note.
std::string csv_header();
std::string to_csv_row(const Warning& w);
// Plain text, one paragraph per warning.
std::string to_text(const Warning& w);
// The info section: the info-level warnings folded, one line per (signal, note) with the count
// and the first tensors named.
std::string info_text(const std::vector<Warning>& w);
// Steps as runs "1-9, 14, 20-22" (runs of [first, last]).
std::string step_runs(const std::vector<std::pair<std::int64_t, std::int64_t>>& runs);

// An extra margin as JSON: the number, or null for -1 (no margin removes the overflows).
nlohmann::json margin_json(int extra);
// The overflow advice: "margin M (+d) removes ..." for the extra margins that remove the
// overflows after warm-up and all of them (-1: none does), under the recipe's margin.
std::string margin_advice(int margin, int after_warmup, int all);

// Overflows that share one cause are one top-level warning (docs/early-warning.md, "Grouped
// overflows"): the top-level `overflow` warnings of one file under one recipe and margin, when
// there are two or more, become one `overflow-group` warning that lists every tensor with every
// overflowing step (numbers.members) and the margin that removes them all; each tensor's own
// warning stays, as info whose note names the group.
void group_overflows(std::vector<Warning>& w);
// An overflow-group's evidence: the summary, this marker, then group_member_line of each member
// joined by "; " (the text report prints one member per line).
inline constexpr const char* kGroupListMarker =
    "; every overflowing step per tensor (format, steps after warm-up of all): ";
// "tensor (e4m3, 13 of 38 after warm-up): 2-9, 11-14, ..." for one entry of numbers.members.
std::string group_member_line(const nlohmann::json& member);

}  // namespace fp8kit::warn
