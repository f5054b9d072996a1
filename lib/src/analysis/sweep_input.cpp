// Loading a sweep's traces and dumps (sweep_input.hpp).
#include "fp8kit/analysis/sweep_input.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <stdexcept>

#include "dumped_blocks.hpp"
#include "fp8kit/analysis/trace_input.hpp"
#include "fp8kit/io/dump.hpp"

namespace fp8kit::sweep {
namespace {

bool selected(const std::vector<std::string>& patterns, const std::string& n) {
    if (patterns.empty()) return true;
    for (const auto& p : patterns)
        if (trace::matches(p, n)) return true;
    return false;
}

// A dumped tensor read, waiting for its series index.
struct Pending {
    std::string series;
    Role role;
    Dumped d;
};

// Trace series, each tensor given once over all trace files; by_name maps name -> index.
void load_traces(const Inputs& in, Loaded& L, std::vector<trace::Series>& series,
                 std::map<std::string, std::size_t>& by_name) {
    for (const auto& f : L.trace_files) {
        trace::Trace t = trace::read_trace(f);
        for (auto& s : t.series) {
            if (!selected(in.tensors, s.tensor)) continue;
            if (by_name.count(s.tensor))
                throw trace::TraceError(
                    fmt::format("{}: tensor '{}' is also in an earlier trace (give each tensor once)", f, s.tensor));
            by_name[s.tensor] = series.size();
            series.push_back(std::move(s));
        }
    }
}

// The block presets resolved for one tensor; empty (with a note) when a preset refuses it.
std::vector<BlockRecipe> block_recipes_for(const dump::TensorInfo& t, Role role, const std::vector<Candidate>& blocks,
                                           Loaded& L) {
    std::vector<BlockRecipe> out;
    for (const auto& b : blocks) {
        try {
            out.push_back(block_recipe(b.recipe, role, t.shape.back()));
        } catch (const std::invalid_argument& e) {
            L.notes.push_back(fmt::format("{}: {}: block recipes skipped: {}", t.file, t.name, e.what()));
            return {};
        }
    }
    return out;
}

// One dumped tensor at one step: its histogram, TE amax and (for 2-D or wider data) every block
// candidate's statistics. Read as runs: a fill-value run costs O(1) in the histogram and, when it
// covers the tensor, in the block statistics (DumpedBlocks bounds the memory of the rest).
// False (with a note) when the tensor is left out.
bool read_dumped(dump::Dump& dmp, std::size_t i, const std::vector<Candidate>& blocks, const Inputs& in,
                 Loaded& L, Pending& pd) {
    const auto& t = dmp.tensors()[i];
    if (!t.step) {  // counted, and noted once (a checkpoint has hundreds of such tensors)
        if (L.no_step++ == 0) L.first_no_step = fmt::format("{}: {}", t.file, t.name);
        return false;
    }
    if (t.wide == Wide::f64) {
        L.notes.push_back(fmt::format("{}: {}: f64 data is not evaluated (the one-pass histogram needs "
                                      "values float32 holds exactly)", t.file, t.name));
        return false;
    }
    pd.role = recipe_slot(t.role);  // the reader already guessed unknown roles from the name
    auto h = std::make_shared<MagnitudeHistogram>();
    std::optional<DumpedBlocks> blk;
    if (in.blocks && !t.shape.empty()) {
        auto recipes = block_recipes_for(t, pd.role, blocks, L);
        if (!recipes.empty()) blk.emplace(t, std::move(recipes), in.block_memory_bytes);
    }
    dmp.read_runs(i, [&](const dump::Chunk& c) {
        if (c.repeat > 1) h->add_repeated(c.bits, c.wide, c.repeat);
        else h->add(c.bits, c.wide, c.count);
        if (blk) blk->add(c);
    });
    pd.d.step = *t.step;
    pd.d.hist = h;
    h->finish();
    pd.d.amax = h->te_amax();
    if (!blk) return true;
    if (!blk->active())
        L.notes.push_back(fmt::format("{}: {}: block recipes skipped: {}", t.file, t.name, blk->why()));
    for (const QuantStats& q : blk->finish()) pd.d.block.push_back(q);  // the scalars only
    return true;
}

// Every dumped tensor selected (one read each).
std::vector<Pending> load_dumps(const Inputs& in, const std::vector<Candidate>& blocks, Loaded& L) {
    std::vector<Pending> pending;
    if (L.dump_files.empty()) return pending;
    dump::Dump dmp(L.dump_files, dump::Selection{}, in.read);
    for (const auto& p : dmp.errors()) L.notes.push_back(p.describe());
    std::size_t skipped_opt = 0;
    for (std::size_t i = 0; i < dmp.tensors().size(); ++i) {
        const auto& t = dmp.tensors()[i];
        if (t.role == dump::Role::optimizer_state) {
            ++skipped_opt;
            continue;
        }
        Pending pd;
        pd.series = series_name_of_dump(t.name);
        if (!selected(in.tensors, pd.series)) {
            ++L.not_selected;
            continue;
        }
        try {
            if (read_dumped(dmp, i, blocks, in, L, pd)) pending.push_back(std::move(pd));
        } catch (const std::bad_alloc&) {  // name what was being read (the bare what() names nothing)
            throw dump::DumpError(t.file, t.name, fmt::format("out of memory while reading its {} elements", t.numel));
        }
    }
    L.optimizer_state = skipped_opt;
    if (L.no_step)
        L.notes.push_back(fmt::format("{} dumped tensor(s) have no step (neither a 'step' attribute nor a step in the "
                                      "name, file or folder): skipped (first: {})", L.no_step, L.first_no_step));
    if (skipped_opt)
        L.notes.push_back(fmt::format("{} optimizer-state tensors skipped (no FP8 cast to tune)", skipped_opt));
    return pending;
}

// Why no series is left: the reasons, largest first in what a user meets (a checkpoint has no
// steps at all).
std::string nothing_to_sweep(const Inputs& in, const Loaded& L) {
    std::string why;
    if (L.no_step)
        why += fmt::format("; {} dumped tensor(s) have no step information (no 'step' attribute, no step in the name, "
                           "file or folder: a checkpoint?): sweep compares recipes over the steps of a run, so it "
                           "needs a trace or dumps of several steps (for one state, use inspect)", L.no_step);
    if (L.optimizer_state) why += fmt::format("; {} optimizer-state tensor(s) left out", L.optimizer_state);
    if (L.not_selected && !in.tensors.empty()) why += fmt::format("; {} tensor(s) not matched by --tensor", L.not_selected);
    if (why.empty()) why = "; check the inputs and --tensor";
    return "no tensors to sweep" + why;
}

}  // namespace

Loaded load_inputs(const Inputs& in) {
    // 1. Candidates: the grid and tensorwise presets; block presets only when a dump is given.
    auto cands = default_candidates(in.formats);
    const auto blocks = block_candidates();
    bool any_dump = false;
    for (const auto& f : in.files) {
        trace::require_regular_file(f);  // before any probe: a FIFO would block it
        any_dump |= dump::is_dump_file(f);
    }
    if (in.blocks && any_dump) cands.insert(cands.end(), blocks.begin(), blocks.end());
    // 2. Files, told apart by content.
    Loaded L;
    for (const auto& f : in.files) {
        (dump::is_dump_file(f) ? L.dump_files : L.trace_files).push_back(f);
    }
    // 3. Trace series, then the dumped tensors.
    std::vector<trace::Series> series;
    std::map<std::string, std::size_t> by_name;
    load_traces(in, L, series, by_name);
    std::vector<Pending> pending = load_dumps(in, blocks, L);
    // 4. Dumped tensors without a trace: their series is the dumped steps' amax.
    std::map<std::string, std::vector<std::pair<std::int64_t, float>>> dump_only;
    std::map<std::string, Role> dump_roles;
    for (const auto& p : pending)
        if (!by_name.count(p.series)) {
            dump_only[p.series].emplace_back(p.d.step, p.d.amax);
            dump_roles[p.series] = p.role;
        }
    L.sweep = std::make_unique<Sweep>(std::move(cands), std::move(series));
    for (auto& [n, v] : dump_only) {
        std::sort(v.begin(), v.end());
        trace::Series s;
        s.tensor = n;
        s.role = dump_roles[n];
        for (std::size_t k = 0; k < v.size(); ++k) {
            if (k && v[k].first == v[k - 1].first)
                throw trace::TraceError(fmt::format("tensor '{}' step {} is dumped twice", n, v[k].first));
            s.steps.push_back(v[k].first);
            s.amax.push_back(v[k].second);
            s.lines.push_back(0);
        }
        by_name[n] = L.sweep->add_series(std::move(s));
    }
    if (!dump_only.empty())
        L.notes.push_back(fmt::format("{} dumped tensors have no amax trace: their series are the dumped steps only, "
                                      "so delayed scaling sees just those steps", dump_only.size()));
    for (auto& p : pending) {
        p.d.series = by_name.at(p.series);
        L.dumped.push_back(std::move(p.d));
    }
    if (L.sweep->series().empty()) throw trace::TraceError(nothing_to_sweep(in, L));
    return L;
}

}  // namespace fp8kit::sweep
