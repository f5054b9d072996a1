// The recipe sweep over traces and dumped tensors.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <tuple>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/analysis/sweep.hpp"
#include "cluster/record.hpp"

namespace fp8kit::sweep {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::string format_choice(std::optional<Format> f) { return f ? std::string(name(*f)) : "hybrid"; }

}  // namespace

std::vector<Candidate> default_candidates(const std::vector<std::optional<Format>>& formats) {
    std::vector<Candidate> out;
    const RecipeSpec te = parse_recipe("te-delayed");
    for (const auto& f : formats) {
        for (int algo = 0; algo < 2; ++algo)
            for (int L = 1; L <= 1024; L *= 2) {
                if (algo == 1 && L > 1) break;  // most_recent: the history length changes nothing
                for (int m = 0; m <= 4; ++m) {
                    Candidate c;
                    c.recipe = te;
                    c.recipe.history_len = L;
                    c.recipe.algo = algo == 0 ? AmaxAlgo::max : AmaxAlgo::most_recent;
                    c.recipe.margin = m;
                    c.recipe.name = algo == 0 ? fmt::format("te-delayed-h{}-max-m{}", L, m)
                                              : fmt::format("te-delayed-most_recent-m{}", m);
                    c.forced = f;
                    c.grid = true;
                    c.label = algo == 0 ? fmt::format("history {}, max, margin {}, {}", L, m, format_choice(f))
                                        : fmt::format("most_recent, margin {}, {}", m, format_choice(f));
                    out.push_back(std::move(c));
                }
            }
        for (const char* p : {"te-current", "torchao-tensorwise", "msamp"}) {
            Candidate c;
            c.recipe = parse_recipe(p);
            c.forced = f;
            c.label = fmt::format("{}, {}", p, format_choice(f));
            out.push_back(std::move(c));
        }
    }
    return out;
}

std::vector<Candidate> block_candidates() {
    std::vector<Candidate> out;
    // FP8 block presets, then the FP4/FP6 ones, so that one sweep of a dump compares them.
    // nvfp4 measures inputs and gradients as TE's column-wise copy after its RHT, nvfp4-rowwise
    // the row-wise copy: both, so that the transform's effect is visible.
    for (const char* p : {"te-block", "mxfp8", "mx-ocp", "deepseek-v3", "torchao-rowwise", "nvfp4", "nvfp4-rowwise",
                          "nvfp4-torchao", "mxfp4", "mxfp6-e2m3", "mxfp6-e3m2"}) {
        Candidate c;
        c.recipe = parse_recipe(p);
        c.blockwise = true;
        c.label = fmt::format("{} (blockwise)", p);
        out.push_back(std::move(c));
    }
    return out;
}

double Outcome::mean_log2_headroom() const {
    return headroom_steps ? sum_log2_headroom / static_cast<double>(headroom_steps) : kNaN;
}
double Outcome::underflow_share() const {
    return nonzero ? static_cast<double>(underflow) / static_cast<double>(nonzero) : kNaN;
}
double Outcome::subnormal_share() const {
    return nonzero ? static_cast<double>(subnormal) / static_cast<double>(nonzero) : kNaN;
}
double Outcome::mean_sqnr_db() const { return sqnr_count ? sum_sqnr_db / static_cast<double>(sqnr_count) : kNaN; }
double Outcome::mean_sqnr_db_lo() const { return sqnr_count ? sum_sqnr_db_lo / static_cast<double>(sqnr_count) : kNaN; }
double Outcome::mean_sqnr_db_hi() const { return sqnr_count ? sum_sqnr_db_hi / static_cast<double>(sqnr_count) : kNaN; }

void Outcome::add_trace(const replay::SeriesResult& r) {
    const std::size_t n = r.steps.size();
    min_series_steps = tensors ? std::min(min_series_steps, n) : n;
    max_series_steps = std::max(max_series_steps, n);
    tensors += 1;
    steps += n;
    overflow_steps += r.overflow_steps;
    if (!r.overflow.empty() && r.overflow.front()) ++first_step_overflows;
    if (r.worst_step >= 0 && (worst_step < 0 || r.worst_headroom > worst_headroom)) {
        worst_headroom = r.worst_headroom;
        worst_step = r.worst_step;
        worst_tensor = r.tensor;
    }
    for (double h : r.headroom)
        if (h > 0 && std::isfinite(h)) {
            sum_log2_headroom += std::log2(h);
            ++headroom_steps;
        }
}

void Outcome::add_dump(const MagnitudeHistogram::Result& r) {
    ++dumped;
    nonzero += r.finite() - r.zeros;
    underflow += r.underflow;
    subnormal += r.subnormal;
    overflow_elems += r.overflow;
    underflow_uncertain += r.underflow_uncertain;
    subnormal_uncertain += r.subnormal_uncertain;
    ambiguous += r.ambiguous;
    const double db = r.sqnr_db();
    if (std::isinf(db) && db > 0) {
        ++lossless;
    } else if (!std::isnan(db)) {
        // The bounds are clamped to the estimate's side when a bound is infinite.
        const double lo = r.sqnr_db_lo(), hi = r.sqnr_db_hi();
        sum_sqnr_db += db;
        sum_sqnr_db_lo += std::isfinite(lo) ? lo : db;
        sum_sqnr_db_hi += std::isfinite(hi) ? hi : db;
        ++sqnr_count;
    }
}

void Outcome::add_dump(const numerics::StatsScalars& s) {
    ++dumped;
    nonzero += s.numel - s.nan - s.inf - s.zeros;  // QuantStats::finite() - zeros
    underflow += s.underflow;
    subnormal += s.subnormal;
    overflow_elems += s.overflow;
    // QuantStats::sqnr_db() (element_stats.hpp) on the same scalars.
    const double db = s.sum_err2 == 0.0 ? INFINITY
                      : s.sum_x2 == 0.0 ? -INFINITY
                                        : 10.0 * std::log10(s.sum_x2 / s.sum_err2);
    if (std::isinf(db) && db > 0) {
        ++lossless;
    } else if (!std::isnan(db)) {
        sum_sqnr_db += db;
        sum_sqnr_db_lo += db;
        sum_sqnr_db_hi += db;
        ++sqnr_count;
    }
}

void Outcome::merge(const Outcome& o) {
    if (o.tensors) {
        min_series_steps = tensors ? std::min(min_series_steps, o.min_series_steps) : o.min_series_steps;
        max_series_steps = std::max(max_series_steps, o.max_series_steps);
    }
    first_step_overflows += o.first_step_overflows;
    tensors += o.tensors;
    steps += o.steps;
    overflow_steps += o.overflow_steps;
    if (o.worst_step >= 0 && (worst_step < 0 || o.worst_headroom > worst_headroom)) {
        worst_headroom = o.worst_headroom;
        worst_step = o.worst_step;
        worst_tensor = o.worst_tensor;
    }
    sum_log2_headroom += o.sum_log2_headroom;
    headroom_steps += o.headroom_steps;
    dumped += o.dumped;
    lossless += o.lossless;
    nonzero += o.nonzero;
    underflow += o.underflow;
    subnormal += o.subnormal;
    overflow_elems += o.overflow_elems;
    underflow_uncertain += o.underflow_uncertain;
    subnormal_uncertain += o.subnormal_uncertain;
    ambiguous += o.ambiguous;
    sum_sqnr_db += o.sum_sqnr_db;
    sum_sqnr_db_lo += o.sum_sqnr_db_lo;
    sum_sqnr_db_hi += o.sum_sqnr_db_hi;
    sqnr_count += o.sqnr_count;
}

Sweep::Sweep(std::vector<Candidate> candidates, std::vector<trace::Series> series)
    : cands_(std::move(candidates)), series_(std::move(series)) {
    siblings_.resize(cands_.size());
    for (std::size_t c = 0; c < cands_.size(); ++c) {
        const auto& r = cands_[c].recipe;
        for (int m = 0; m <= 4; ++m)
            siblings_[c][static_cast<std::size_t>(m)] =
                cands_[c].grid ? find(r.history_len, r.algo, m, cands_[c].forced) : static_cast<std::size_t>(-1);
    }
}

std::vector<std::size_t> Sweep::margin_siblings(std::size_t candidate) const {
    std::vector<std::size_t> out;
    for (std::size_t c : siblings_.at(candidate))
        if (c != static_cast<std::size_t>(-1)) out.push_back(c);
    return out;
}

std::size_t Sweep::add_series(trace::Series s) {
    series_.push_back(std::move(s));
    return series_.size() - 1;
}

namespace {

std::size_t class_index(Role cls) { return cls == Role::weight ? 1 : cls == Role::gradient ? 2 : 0; }

}  // namespace

namespace {

using cluster::detail::put;
using cluster::detail::put_string;
using cluster::detail::Reader;

// Every field of an Outcome, in one order, for its bytes between processes (binary64 bit for bit).
template <class O, class F>
void each_field(O& o, F&& f) {
    f(o.tensors), f(o.steps), f(o.overflow_steps), f(o.worst_headroom), f(o.worst_step), f(o.worst_tensor);
    f(o.first_step_overflows), f(o.min_series_steps), f(o.max_series_steps), f(o.sum_log2_headroom);
    f(o.headroom_steps), f(o.dumped), f(o.lossless), f(o.nonzero), f(o.underflow), f(o.subnormal);
    f(o.overflow_elems), f(o.underflow_uncertain), f(o.subnormal_uncertain), f(o.ambiguous);
    f(o.sum_sqnr_db), f(o.sum_sqnr_db_lo), f(o.sum_sqnr_db_hi), f(o.sqnr_count);
}

struct PutField {
    std::string& out;
    void operator()(const std::string& v) const { put_string(out, v); }
    template <class T>
    void operator()(const T& v) const {
        put(out, v);
    }
};

struct GetField {
    Reader& in;
    void operator()(std::string& v) const { v = in.get_string(); }
    template <class T>
    void operator()(T& v) const {
        v = in.template get<T>();
    }
};

}  // namespace

std::string Sweep::group_bytes(std::size_t first, std::size_t last) const {
    const std::size_t C = cands_.size();
    std::vector<std::array<Outcome, 3>> totals(C);
    std::vector<std::string> notes;
    std::size_t amax_differs = 0;
    std::string first_difference;
    bool dumps = false;
    for (std::size_t s = first; s < last; ++s) {
        const auto oc = evaluate(s, &notes, &amax_differs, &first_difference);
        for (std::size_t c = 0; c < C; ++c) {
            totals[c][class_index(series_[s].role)].merge(oc[c]);
            dumps = dumps || oc[c].dumped > 0;
        }
    }
    std::string out;
    put<std::uint8_t>(out, dumps);
    put<std::uint64_t>(out, amax_differs);
    put_string(out, first_difference);
    put<std::uint64_t>(out, notes.size());
    for (const auto& n : notes) put_string(out, n);
    for (const auto& per : totals)
        for (const auto& o : per) each_field(o, PutField{out});
    return out;
}

void Sweep::add_group(const std::string& bytes, std::vector<std::string>& notes, std::size_t& amax_differs,
                      std::string& first_difference) {
    std::size_t pos = 0;
    Reader in{bytes, pos, "sweep group"};
    const bool dumps = in.get<std::uint8_t>() != 0;  // read whatever has_dumps_ is
    has_dumps_ = has_dumps_ || dumps;
    const auto differs = static_cast<std::size_t>(in.get<std::uint64_t>());
    std::string first = in.get_string();
    if (differs && amax_differs == 0) first_difference = std::move(first);
    amax_differs += differs;
    const auto n = in.get<std::uint64_t>();
    for (std::uint64_t k = 0; k < n; ++k) notes.push_back(in.get_string());
    for (auto& per : per_class_)
        for (auto& total : per) {
            Outcome o;
            each_field(o, GetField{in});
            total.merge(o);
        }
    if (pos != bytes.size()) throw std::runtime_error("fp8kit: malformed sweep group");
}

void Sweep::run(const std::vector<Dumped>& dumped, std::vector<std::string>& notes, const GroupOver& over) {
    const std::size_t C = cands_.size(), S = series_.size();
    dumped_ = dumped;
    dumped_of_.assign(S, {});
    for (std::size_t i = 0; i < dumped_.size(); ++i) dumped_of_.at(dumped_[i].series).push_back(i);
    per_class_.assign(C, {});
    has_dumps_ = false;
    std::size_t amax_differs = 0;
    std::string first_difference;
    // Groups of kSeriesGroup series: each group's totals from zero, then the groups in order (the
    // same grouping wherever the groups are evaluated: cluster/sweep.hpp).
    const std::size_t groups = (S + kSeriesGroup - 1) / kSeriesGroup;
    auto make = [&](std::size_t g) { return group_bytes(g * kSeriesGroup, std::min(S, (g + 1) * kSeriesGroup)); };
    auto use = [&](std::size_t, const std::string& b) { add_group(b, notes, amax_differs, first_difference); };
    if (over) {
        std::vector<std::uint64_t> weight(groups, 0);  // the work: replayed steps, evaluated dumps
        for (std::size_t s = 0; s < S; ++s)
            weight[s / kSeriesGroup] += series_[s].steps.size() + 1 + 64 * dumped_of_[s].size();
        over(groups, weight, make, use);
    } else {
        for (std::size_t g = 0; g < groups; ++g) use(g, make(g));
    }
    if (amax_differs)
        notes.push_back(
            fmt::format("{} dumped tensors have another amax than the trace at that step (first: {}); "
                        "delayed scales follow the trace, current scaling uses the dumped data",
                        amax_differs, first_difference));
}

std::vector<Outcome> Sweep::tensor_outcomes(std::size_t series) const {
    return evaluate(series, nullptr, nullptr, nullptr);
}

std::vector<Outcome> Sweep::tensor_outcomes(std::size_t series, const std::vector<bool>& wanted) const {
    return evaluate(series, nullptr, nullptr, nullptr, &wanted);
}

namespace {

// A delayed recipe with algo max and a history of at least the series' n steps sees every amax
// of the series in its window (roll k keeps rolls k - L + 1 .. k, and k < n <= L): its scales
// depend on the format and the margin only (DelayedScaling: scaled_max from both, the window's
// max, te_delayed_scale), so histories 16 .. 1024 on a 10-step series replay alike.
// Used bins from which a dumped tensor's candidates are evaluated in parallel (one evaluation
// costs tens of nanoseconds per bin; a parallel region, microseconds to start and join).
constexpr std::size_t kParallelBins = 1024;

bool whole_series_window(const RecipeSpec& r, std::size_t n) {
    return r.kind == RecipeKind::delayed && r.algo == AmaxAlgo::max && static_cast<std::size_t>(r.history_len) >= n;
}

}  // namespace

std::vector<Outcome> Sweep::evaluate(std::size_t si, std::vector<std::string>* notes, std::size_t* amax_differs,
                                     std::string* first_difference, const std::vector<bool>* wanted) const {
    const std::size_t C = cands_.size();
    const auto& ser = series_.at(si);
    std::vector<Outcome> out(C);
    // 1. Every trace candidate replayed on the series; the scales are kept for the dumped steps.
    std::vector<std::vector<float>> scales(C);
    const bool keep_scales = !dumped_of_.empty() && !dumped_of_[si].empty();
    replay::SeriesResult r;  // one for every candidate: its buffers are reused
    // (format, margin, candidate) of the whole-series-window replays done: the others copy them.
    std::vector<std::tuple<Format, int, std::size_t>> whole;
    for (std::size_t c = 0; c < C; ++c) {
        if (cands_[c].blockwise || (wanted && !(*wanted)[c])) continue;
        const auto& rec = cands_[c].recipe;
        if (whole_series_window(rec, ser.amax.size())) {
            replay::require_per_tensor(rec, ser.role);  // what replay_series would throw
            const Format f = replay::role_format(rec, ser.role, cands_[c].forced);
            const auto same = std::find_if(whole.begin(), whole.end(), [&](const auto& w) {
                return std::get<0>(w) == f && std::get<1>(w) == rec.margin;
            });
            if (same != whole.end()) {
                out[c] = out[std::get<2>(*same)];
                if (keep_scales) scales[c] = scales[std::get<2>(*same)];
                continue;
            }
            whole.emplace_back(f, rec.margin, c);
        }
        replay::replay_series(rec, ser, cands_[c].forced, r);
        out[c].add_trace(r);
        if (keep_scales) scales[c] = r.scale;
    }
    std::size_t block_index0 = C;
    for (std::size_t c = 0; c < C; ++c)
        if (cands_[c].blockwise) {
            block_index0 = c;
            break;
        }
    // 2. Each dumped step of the series, under every candidate.
    for (std::size_t di : dumped_of_.empty() ? std::vector<std::size_t>{} : dumped_of_[si]) {
        const auto& d = dumped_[di];
        const auto it = std::lower_bound(ser.steps.begin(), ser.steps.end(), d.step);
        if (it == ser.steps.end() || *it != d.step) {
            if (notes)
                notes->push_back(fmt::format("tensor '{}' step {} is dumped but not in its amax series: not evaluated",
                                             ser.tensor, d.step));
            continue;
        }
        const auto k = static_cast<std::size_t>(it - ser.steps.begin());
        const float ta = ser.amax[k];
        if (amax_differs && !(ta == d.amax || (std::isnan(ta) && std::isnan(d.amax))) && (*amax_differs)++ == 0)
            *first_difference = fmt::format("'{}' step {}: trace {:.9g}, dump {:.9g}", ser.tensor, d.step, ta, d.amax);
        // Recipes are independent: evaluate them in parallel, then add in candidate order (each
        // result is computed the same way on any thread, so the totals do not depend on threads).
        std::vector<MagnitudeHistogram::Result> res(C);
        std::vector<std::string> why(C);
        const long Cl = static_cast<long>(C);
        // In parallel only when a histogram has bins enough to pay for the threads: for 10^5
        // dumped tensors of a few elements each, starting a parallel region per tensor spent
        // most of the time (83% in libgomp on the 2-core VM) on threads waiting.
        const bool big = d.hist->used_bins() >= kParallelBins;
#pragma omp parallel for schedule(dynamic) if (big)
        for (long ci = 0; ci < Cl; ++ci) {
            const auto c = static_cast<std::size_t>(ci);
            const auto& cand = cands_[c];
            if (cand.blockwise || (wanted && !(*wanted)[c])) continue;
            try {
                const Format f = replay::role_format(cand.recipe, ser.role, cand.forced);
                const float scale = cand.recipe.kind == RecipeKind::current
                                        ? replay::scales(cand.recipe, ser.role, f, {d.amax}).front()
                                        : scales[c][k];
                if (!(scale > 0) || std::isinf(scale))
                    why[c] = fmt::format("scale {} cannot cast", scale);
                else
                    res[c] = d.hist->evaluate(f, scale, 1.0f / scale, cand.recipe.policy_for(ser.role));
            } catch (const std::exception& e) {
                why[c] = e.what();
            }
        }
        for (std::size_t c = 0; c < C; ++c) {
            if (wanted && !(*wanted)[c]) continue;
            if (cands_[c].blockwise) {
                const std::size_t b = c - block_index0;
                if (b < d.block.size() && d.block[b]) out[c].add_dump(*d.block[b]);
            } else if (!why[c].empty()) {
                if (notes)
                    notes->push_back(fmt::format("{} on '{}' step {}: {} (not evaluated)", cands_[c].label, ser.tensor,
                                                 d.step, why[c]));
            } else {
                out[c].add_dump(res[c]);
            }
        }
    }
    return out;
}

Outcome Sweep::per_class(std::size_t candidate, Role cls) const {
    if (per_class_.empty()) return Outcome{};
    return per_class_.at(candidate)[class_index(cls)];
}

bool Sweep::has_class(Role cls) const {
    return std::any_of(series_.begin(), series_.end(), [&](const trace::Series& s) { return s.role == cls; });
}

std::size_t Sweep::find(int history, AmaxAlgo algo, int margin, std::optional<Format> forced) const {
    for (std::size_t c = 0; c < cands_.size(); ++c) {
        const auto& r = cands_[c].recipe;
        if (cands_[c].grid && r.algo == algo && (algo == AmaxAlgo::most_recent || r.history_len == history) &&
            r.margin == margin && cands_[c].forced == forced)
            return c;
    }
    return static_cast<std::size_t>(-1);
}

int Sweep::min_safe_margin(std::size_t candidate, long series, Role cls) const {
    if (series >= 0) return min_safe_margin(candidate, tensor_outcomes(static_cast<std::size_t>(series)));
    if (!cands_.at(candidate).grid) return -1;
    for (int m = 0; m <= 4; ++m) {
        const std::size_t c = siblings_[candidate][static_cast<std::size_t>(m)];
        if (c != static_cast<std::size_t>(-1) && per_class(c, cls).overflow_steps == 0) return m;
    }
    return -1;
}

int Sweep::min_safe_margin(std::size_t candidate, const std::vector<Outcome>& oc) const {
    if (!cands_.at(candidate).grid) return -1;
    for (int m = 0; m <= 4; ++m) {
        const std::size_t c = siblings_[candidate][static_cast<std::size_t>(m)];
        if (c != static_cast<std::size_t>(-1) && oc.at(c).overflow_steps == 0) return m;
    }
    return -1;
}

std::vector<std::size_t> Sweep::ranked(Role cls) const {
    std::vector<std::size_t> idx;
    std::vector<Outcome> oc(cands_.size());
    for (std::size_t c = 0; c < cands_.size(); ++c)
        if (cands_[c].grid) {
            idx.push_back(c);
            oc[c] = per_class(c, cls);
        }
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
        const Outcome &x = oc[a], &y = oc[b];
        if (x.overflow_steps != y.overflow_steps) return x.overflow_steps < y.overflow_steps;
        const bool dump = x.sqnr_count > 0 && y.sqnr_count > 0;
        const double ka = dump ? x.mean_sqnr_db() : x.mean_log2_headroom();
        const double kb = dump ? y.mean_sqnr_db() : y.mean_log2_headroom();
        if (!std::isnan(ka) && !std::isnan(kb) && ka != kb) return ka > kb;
        const auto &ra = cands_[a].recipe, &rb = cands_[b].recipe;
        if (ra.history_len != rb.history_len) return ra.history_len > rb.history_len;
        return ra.margin < rb.margin;
    });
    return idx;
}

// Every series of the class has one step: each delayed recipe casts it with its initial scale 1,
// so the grid's points cannot differ, and "TE's default is the best" would mean nothing. Say
// so first, and compare with current scaling, which scales that one step from its own amax.
std::string Sweep::one_step_caveat(Role cls, const std::string& who, const Outcome& b,
                                   std::optional<Format> forced) const {
    std::string s = fmt::format(
        "{}: ONE STEP per tensor ({} tensors): every delayed recipe casts it with its initial "
        "scale 1, before any amax is known, so no history, algo or margin is better than "
        "another here",
        who, b.tensors);
    for (std::size_t c = 0; c < cands_.size(); ++c) {
        if (cands_[c].grid || cands_[c].blockwise || cands_[c].recipe.name != "te-current" ||
            cands_[c].forced != forced)
            continue;
        const Outcome cur = per_class(c, cls);
        s += fmt::format("; te-current (scale from the step's own amax): {} overflowing step{}", cur.overflow_steps,
                         cur.overflow_steps == 1 ? "" : "s");
        if (!std::isnan(cur.underflow_share()) && !std::isnan(b.underflow_share()))
            s += fmt::format(", underflow {:.3g}% vs {:.3g}% with scale 1", 100 * cur.underflow_share(),
                             100 * b.underflow_share());
    }
    return s + "; give a trace of several steps to choose a delayed recipe";
}

std::string Sweep::recommendation(Role cls) const {
    const auto order = ranked(cls);
    const std::string who = cls == Role::activation ? "activations" : cls == Role::weight ? "weights" : "gradients";
    if (order.empty() || !has_class(cls)) return who + ": no tensors of this class";
    const std::size_t best = order.front();
    const Outcome b = per_class(best, cls);
    const auto& cand = cands_[best];
    const std::size_t ref = find(1024, AmaxAlgo::max, 0, cand.forced);
    const Outcome r = per_class(ref, cls);
    const Format f = replay::role_format(cand.recipe, cls, cand.forced);
    if (b.max_series_steps <= 1) return one_step_caveat(cls, who, b, cand.forced);
    std::string s =
        fmt::format("{}: {} ({}) — ", who,
                    cand.recipe.algo == AmaxAlgo::max
                        ? fmt::format("history {}, max, margin {}", cand.recipe.history_len, cand.recipe.margin)
                        : fmt::format("most_recent, margin {}", cand.recipe.margin),
                    name(f));
    const std::string per_series = b.min_series_steps == b.max_series_steps
                                       ? fmt::format("{} each", b.max_series_steps)
                                       : fmt::format("{} to {} per tensor", b.min_series_steps, b.max_series_steps);
    if (b.overflow_steps == 0)
        s += fmt::format("no overflow in {} steps of {} tensors ({})", b.steps, b.tensors, per_series);
    else if (b.overflow_steps == b.first_step_overflows)
        s += fmt::format(
            "{} overflowing step{} remain{}, each a tensor's first step, cast with the initial scale 1 "
            "before any amax is known: no margin changes that (current scaling does not have it)",
            b.overflow_steps, b.overflow_steps == 1 ? "" : "s", b.overflow_steps == 1 ? "s" : "");
    else
        s +=
            fmt::format("{} overflowing step{} remain{} (no grid point removes all: use margin > 4 or current scaling)",
                        b.overflow_steps, b.overflow_steps == 1 ? "" : "s", b.overflow_steps == 1 ? "s" : "");
    if (best == ref) return s + "; TE's default (history 1024, max, margin 0) is already the best here";
    if (b.sqnr_count > 0 && r.sqnr_count > 0) {
        const double d = b.mean_sqnr_db() - r.mean_sqnr_db();
        s += fmt::format(
            ", {:.2g} dB {} SQNR than TE's default history 1024, max, margin 0 (mean {:.2f} vs {:.2f} dB on {} dumped "
            "tensors)",
            std::fabs(d), d >= 0 ? "better" : "worse", b.mean_sqnr_db(), r.mean_sqnr_db(), b.sqnr_count);
        if (!std::isnan(b.underflow_share()))
            s += fmt::format(", underflow {:.3g}% vs {:.3g}%", 100 * b.underflow_share(), 100 * r.underflow_share());
    } else {
        const double d = b.mean_log2_headroom() - r.mean_log2_headroom();
        s += fmt::format(
            ", uses {:.2f} binades {} of the range than TE's default history 1024, max, margin 0 (mean headroom "
            "2^{:.2f} vs 2^{:.2f})",
            std::fabs(d), d >= 0 ? "more" : "less", b.mean_log2_headroom(), r.mean_log2_headroom());
    }
    if (r.overflow_steps > 0) s += fmt::format("; history 1024 overflows {} steps", r.overflow_steps);
    return s;
}

std::string series_name_of_dump(const std::string& dataset) {
    std::string out;
    std::size_t start = 0;
    while (start <= dataset.size()) {
        const auto p = dataset.find('/', start);
        const std::string comp = dataset.substr(start, p == std::string::npos ? std::string::npos : p - start);
        if (!comp.empty() && !dump::guess_step(comp)) out += (out.empty() ? "" : ".") + comp;
        if (p == std::string::npos) break;
        start = p + 1;
    }
    return out;
}

}  // namespace fp8kit::sweep
