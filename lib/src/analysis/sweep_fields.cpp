// The field tables of sweep's results: every key its JSON, its CSV and fp8kit.sweep's rows carry,
// written once (docs/replay.md defines each field).
#include "fp8kit/analysis/sweep.hpp"

namespace fp8kit::sweep {

using io::FieldValue;

const io::FieldTable<OutcomeRow>& outcome_fields() {
    using R = const OutcomeRow&;
    static const io::FieldTable<OutcomeRow> t = {
        {"steps", [](R r) -> FieldValue { return std::uint64_t(r.outcome.steps); }},
        {"overflow_steps", [](R r) -> FieldValue { return std::uint64_t(r.outcome.overflow_steps); }},
        {"first_step_overflows", [](R r) -> FieldValue { return std::uint64_t(r.outcome.first_step_overflows); }},
        {"worst_headroom", [](R r) -> FieldValue { return r.outcome.worst_headroom; }},
        {"worst_step", [](R r) -> FieldValue { return std::int64_t(r.outcome.worst_step); }},
        {"mean_log2_headroom", [](R r) -> FieldValue { return r.outcome.mean_log2_headroom(); }},
        {"min_safe_margin",
         [](R r) -> FieldValue {
             if (!r.min_safe_margin) return std::monostate{};
             return std::int64_t(*r.min_safe_margin);
         }},
        {"tensors", [](R r) -> FieldValue { return std::uint64_t(r.outcome.tensors); }},
        {"dumped", [](R r) -> FieldValue { return std::uint64_t(r.outcome.dumped); }},
        {"lossless", [](R r) -> FieldValue { return std::uint64_t(r.outcome.lossless); }},
        {"underflow_share", [](R r) -> FieldValue { return r.outcome.underflow_share(); }},
        {"subnormal_share", [](R r) -> FieldValue { return r.outcome.subnormal_share(); }},
        {"underflow_uncertain", [](R r) -> FieldValue { return std::uint64_t(r.outcome.underflow_uncertain); }},
        {"subnormal_uncertain", [](R r) -> FieldValue { return std::uint64_t(r.outcome.subnormal_uncertain); }},
        {"sqnr_db", [](R r) -> FieldValue { return r.outcome.mean_sqnr_db(); }},
        {"sqnr_db_lo", [](R r) -> FieldValue { return r.outcome.mean_sqnr_db_lo(); }},
        {"sqnr_db_hi", [](R r) -> FieldValue { return r.outcome.mean_sqnr_db_hi(); }},
    };
    return t;
}

const io::FieldTable<CandidateRow>& candidate_fields() {
    using R = const CandidateRow&;
    static const io::FieldTable<CandidateRow> t = {
        {"class", [](R r) -> FieldValue { return name(r.cls); }},
        {"candidate", [](R r) -> FieldValue { return std::string_view(r.candidate.label); }},
        {"kind", [](R r) -> FieldValue { return name(r.candidate.recipe.kind); }},
        {"history", [](R r) -> FieldValue { return std::int64_t(r.candidate.recipe.history_len); }},
        {"algo", [](R r) -> FieldValue { return name(r.candidate.recipe.algo); }},
        {"margin", [](R r) -> FieldValue { return std::int64_t(r.candidate.recipe.margin); }},
        // Block presets: their class's format (E4M3 for every class).
        {"format",
         [](R r) -> FieldValue { return name(replay::role_format(r.candidate.recipe, r.cls, r.candidate.forced)); }},
        {"grid", [](R r) -> FieldValue { return r.candidate.grid; }},
        {"blockwise", [](R r) -> FieldValue { return r.candidate.blockwise; }},
    };
    return t;
}

OutcomeRow Sweep::row(std::size_t c, Role cls, const Outcome& oc, const std::vector<Outcome>* series_outcomes) const {
    if (!cands_.at(c).grid) return {oc, std::nullopt};
    return {oc, series_outcomes ? min_safe_margin(c, *series_outcomes) : min_safe_margin(c, -1, cls)};
}

}  // namespace fp8kit::sweep
