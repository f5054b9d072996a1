// `fp8kit sweep`: many recipes over the same amax series and dumped tensors, aggregated per
// tensor and per tensor class, with a ranked recommendation. The trace side replays every
// candidate (replay.hpp); the dump side reads each dumped tensor once into a
// MagnitudeHistogram and evaluates every candidate's scale at that step from it.
#pragma once

#include <array>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/stats/magnitude_histogram.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "fp8kit/io/report_fields.hpp"
#include "fp8kit/io/trace.hpp"

namespace fp8kit::sweep {

struct Candidate {
    std::string label;  // "history 16, max, margin 1, hybrid"
    RecipeSpec recipe;
    std::optional<Format> forced;  // nullopt: the recipe's format per class (hybrid)
    bool grid = false;             // a point of the delayed-scaling grid (ranked)
    bool blockwise = false;        // needs the data (dumps only)
};

// Histories 1, 2, 4, ..., 1024 with algo max, and most_recent once (its scale depends on the
// last amax only, so every history gives the same scales), each with margins 0..4 and each
// format choice; then the tensorwise reference presets (te-current, torchao-tensorwise, msamp).
std::vector<Candidate> default_candidates(const std::vector<std::optional<Format>>& formats);
// Block presets (te-block, mxfp8, mx-ocp, deepseek-v3, torchao-rowwise): dumps only.
std::vector<Candidate> block_candidates();

// Totals of one candidate over one tensor or one class.
struct Outcome {
    std::size_t tensors = 0, steps = 0, overflow_steps = 0;
    double worst_headroom = 0;  // largest headroom over steps (Inf when an amax was Inf)
    std::int64_t worst_step = -1;
    std::string worst_tensor;
    // Overflowing steps that are a series' first step: a delayed recipe casts it with the initial
    // scale 1, before any amax is known, so no margin changes them.
    std::size_t first_step_overflows = 0;
    std::size_t min_series_steps = 0, max_series_steps = 0;  // steps per series (tensors > 0)
    double sum_log2_headroom = 0;                            // over steps with finite positive headroom
    std::size_t headroom_steps = 0;
    // Dumped steps.
    std::size_t dumped = 0, lossless = 0;  // lossless: zero error (SQNR +Inf), kept out of the mean
    std::uint64_t nonzero = 0, underflow = 0, subnormal = 0, overflow_elems = 0;
    std::uint64_t underflow_uncertain = 0, subnormal_uncertain = 0, ambiguous = 0;
    double sum_sqnr_db = 0, sum_sqnr_db_lo = 0, sum_sqnr_db_hi = 0;
    std::size_t sqnr_count = 0;

    double mean_log2_headroom() const;  // NaN when no step had a positive headroom
    double underflow_share() const;     // of nonzero finite dumped elements; NaN when none
    double subnormal_share() const;
    double mean_sqnr_db() const;  // mean over dumped (tensor, step) of SQNR dB; NaN when none
    double mean_sqnr_db_lo() const, mean_sqnr_db_hi() const;  // from the histogram's bounds
    void add_trace(const replay::SeriesResult& r);
    void add_dump(const MagnitudeHistogram::Result& r);
    void add_dump(const numerics::StatsScalars& s);  // a block preset's totals (QuantStats too)
    void merge(const Outcome& o);
};

// One outcome as a report row, with its candidate's smallest safe margin (Sweep::min_safe_margin:
// -1 when no margin in 0..4 is safe; nullopt for a candidate outside the grid, which has none).
struct OutcomeRow {
    const Outcome& outcome;
    std::optional<int> min_safe_margin;
};
// The field table of an outcome (sweep_fields.cpp): the keys of `fp8kit sweep --json`'s outcomes,
// the outcome columns of `--csv` and the outcome keys of fp8kit.sweep's rows, in that order.
const io::FieldTable<OutcomeRow>& outcome_fields();

// A candidate under one class (its format is the class's under the candidate's format choice).
struct CandidateRow {
    const Candidate& candidate;
    Role cls;
};
// The field table of a candidate's row: the columns before the outcome in `--csv` and the same keys
// in fp8kit.sweep's rows (class, candidate, kind, history, algo, margin, format, grid, blockwise).
const io::FieldTable<CandidateRow>& candidate_fields();

// One dumped tensor at one step, already reduced to its sufficient statistics.
struct Dumped {
    std::size_t series;  // index into Sweep::series()
    std::int64_t step;
    std::shared_ptr<const MagnitudeHistogram> hist;
    float amax;  // TE's amax of the data (NaN ignored, Inf if any Inf)
    // Per block_candidates() entry, when computed: the totals' scalars only (QuantStats's
    // exp_hist, 10 presets x 2.4 KB, made 10^5 dumped tensors cost 4.6 GB). An empty entry: that
    // preset cannot take this tensor (nvfp4's column-wise RHT on a row count not a multiple of 16).
    std::vector<std::optional<numerics::StatsScalars>> block;
};

// How Sweep::run visits its groups of series (Sweep::kSeriesGroup series each, in series order):
// given the group count and each group's weight (its steps and dumped entries: the work), call
// make(g) for groups this process evaluates and use(g, bytes) for every group in order with the
// bytes make(g) returned wherever it ran. Empty: make and use every group here, in order
// (cluster/sweep.hpp splits the groups over MPI ranks, and every rank uses every group).
using GroupOver = std::function<void(std::size_t groups, const std::vector<std::uint64_t>& weight,
                                     const std::function<std::string(std::size_t)>& make,
                                     const std::function<void(std::size_t, const std::string&)>& use)>;

class Sweep {
public:
    // run() adds the series' outcomes per class in groups of this many series, each group's
    // total from zero in series order, then the groups in order: a grouping fixed by the series
    // alone, so the binary64 sums are the same however the groups are split over processes.
    static constexpr std::size_t kSeriesGroup = 64;
    Sweep(std::vector<Candidate> candidates, std::vector<trace::Series> series);
    // Adds the series a dump alone defines (amax per dumped step) and returns its index.
    std::size_t add_series(trace::Series s);
    const std::vector<trace::Series>& series() const { return series_; }
    const std::vector<Candidate>& candidates() const { return cands_; }

    // Replays every candidate on every series and evaluates every dumped entry, one series at a
    // time, keeping only the per-class totals: time and memory are linear in tensors x steps
    // (docs/performance.md). Messages about the inputs (steps missing from a trace, trace amax
    // != dump amax) go to `notes`.
    // `over`: where the groups of series are evaluated (empty: here, in order).
    void run(const std::vector<Dumped>& dumped, std::vector<std::string>& notes, const GroupOver& over = {});

    // Every candidate's outcome on one series ([candidate]), computed again on demand (the same
    // numbers as run() added to its class): per-tensor output streams with this, so no table
    // of candidates x tensors is ever held.
    std::vector<Outcome> tensor_outcomes(std::size_t series) const;
    // Only the candidates with wanted[c] (the others are left default): the text table needs two
    // candidates and their margin siblings, not all of them.
    std::vector<Outcome> tensor_outcomes(std::size_t series, const std::vector<bool>& wanted) const;
    // The candidates min_safe_margin(c, ...) reads: the grid siblings of c (margins 0..4).
    std::vector<std::size_t> margin_siblings(std::size_t candidate) const;
    // [candidate] per class (Role::activation, weight, gradient)
    Outcome per_class(std::size_t candidate, Role cls) const;
    // Smallest margin in 0..4 whose sibling candidate (same history, algo, format) has no
    // overflowing step on `series` (or the whole class when series < 0); -1 when none.
    int min_safe_margin(std::size_t candidate, long series, Role cls) const;
    // The same on one series, from its tensor_outcomes().
    int min_safe_margin(std::size_t candidate, const std::vector<Outcome>& series_outcomes) const;
    // The report row of candidate c's outcome oc on a class (series_outcomes null) or on one series.
    OutcomeRow row(std::size_t candidate, Role cls, const Outcome& oc,
                   const std::vector<Outcome>* series_outcomes = nullptr) const;
    // Grid candidates of a class, best first: fewest overflowing steps, then (with dumps)
    // higher mean SQNR or (without) higher mean log2 headroom, then longer history, then
    // smaller margin.
    std::vector<std::size_t> ranked(Role cls) const;
    bool has_class(Role cls) const;
    bool has_dumps() const { return has_dumps_; }
    // The plain-words recommendation for a class, compared with TE's default
    // (history 1024, max, margin 0) of the same format choice.
    std::string recommendation(Role cls) const;
    // Index of the grid candidate with (history, algo, margin, format choice), or npos.
    std::size_t find(int history, AmaxAlgo algo, int margin, std::optional<Format> forced) const;

private:
    std::vector<Candidate> cands_;
    std::vector<trace::Series> series_;
    std::string one_step_caveat(Role cls, const std::string& who, const Outcome& b, std::optional<Format> forced) const;
    // One series' outcomes; notes only when `notes` is given (the first pass).
    std::vector<Outcome> evaluate(std::size_t series, std::vector<std::string>* notes, std::size_t* amax_differs,
                                  std::string* first_difference, const std::vector<bool>* wanted = nullptr) const;
    // [candidate][margin 0..4]: the grid candidate with the same history, algo and format
    // choice and that margin (npos when none), so that min_safe_margin does not search.
    std::vector<std::array<std::size_t, 5>> siblings_;
    // One group of series [first, last) as bytes: its per-class totals from zero, the notes its
    // series wrote, its amax differences; add_group merges them in group order.
    std::string group_bytes(std::size_t first, std::size_t last) const;
    void add_group(const std::string& bytes, std::vector<std::string>& notes, std::size_t& amax_differs,
                   std::string& first_difference);
    std::vector<std::array<Outcome, 3>> per_class_;  // [candidate][input, weight, grad]
    std::vector<Dumped> dumped_;
    std::vector<std::vector<std::size_t>> dumped_of_;  // [series] -> indices into dumped_
    bool has_dumps_ = false;
};

// "step_000100/model.layers.0.mlp.up_proj/input" -> "model.layers.0.mlp.up_proj.input": path
// components that name a step are dropped, the rest joined with '.' (the trace's spelling).
std::string series_name_of_dump(const std::string& dataset);

}  // namespace fp8kit::sweep
