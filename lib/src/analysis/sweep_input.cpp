// Loading a sweep's traces and dumps (sweep_input.hpp).
#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/printable.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <new>
#include <optional>
#include <stdexcept>

#include "dumped_blocks.hpp"
#include "fp8kit/analysis/trace_input.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/te_debug.hpp"

namespace fp8kit::sweep {
namespace {

bool selected(const std::vector<std::string>& patterns, const std::string& n) {
    if (patterns.empty()) return true;
    for (const auto& p : patterns)
        if (trace::matches(p, n)) return true;
    return false;
}

// Trace series, each tensor given once over all trace files; by_name maps name -> index.
void load_traces(const Inputs& in, Loaded& L, std::vector<trace::Series>& series,
                 std::map<std::string, std::size_t>& by_name) {
    for (const auto& f : L.trace_files) {
        trace::Trace t = trace::read_trace(f);
        for (auto& n : t.notes) L.notes.push_back(std::move(n));
        // Lines skipped on purpose (TE statistics whose name TE does not log): the report's skipped.
        L.skipped.insert(L.skipped.end(), t.skipped.begin(), t.skipped.end());
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

// The block presets resolved for one tensor; empty (with a note) when a preset refuses it. skip[k]:
// preset k cannot take this tensor's shape (nvfp4's column-wise RHT needs rows in groups of 16,
// check_block_input): left out of its statistics alone, said in pd.rht_skip for one note.
std::vector<BlockRecipe> block_recipes_for(const dump::TensorInfo& t, Role role, const std::vector<Candidate>& blocks,
                                           DumpedPass& pd, std::vector<bool>& skip) {
    std::vector<BlockRecipe> out;
    skip.assign(blocks.size(), false);
    const std::size_t cols = static_cast<std::size_t>(t.shape.back());
    const std::size_t rows = cols ? static_cast<std::size_t>(t.numel / cols) : 0;
    for (const auto& b : blocks) {
        try {
            out.push_back(block_recipe(b.recipe, role, cols));
        } catch (const std::invalid_argument& e) {
            pd.notes.push_back(fmt::format("{}: {}: block recipes skipped: {}", t.file, t.name, e.what()));
            return {};
        }
        try {
            check_block_input(out.back(), rows, cols);
        } catch (const std::invalid_argument& e) {
            skip[out.size() - 1] = true;
            if (pd.rht_skip.empty()) pd.rht_skip = fmt::format("{}: {}: {}: {}", t.file, t.name, b.label, e.what());
        }
    }
    return out;
}

// One dumped tensor at one step: its histogram, TE amax and (for 2-D or wider data) every block
// candidate's statistics. Read as runs: a fill-value run costs O(1) in the histogram and, when it
// covers the tensor, in the block statistics (DumpedBlocks bounds the memory of the rest; a tensor
// over its budget with an NVFP4 preset is read twice, its global amax first).
void read_dumped(dump::Dump& dmp, std::size_t i, const std::vector<Candidate>& blocks, const Inputs& in,
                 DumpedPass& pd) {
    const auto& t = dmp.tensors()[i];
    pd.role = recipe_slot(t.role);  // the reader already guessed unknown roles from the name
    auto h = std::make_shared<MagnitudeHistogram>();
    std::optional<DumpedBlocks> blk;
    if (in.blocks && !t.shape.empty()) {
        std::vector<bool> skip;
        auto recipes = block_recipes_for(t, pd.role, blocks, pd, skip);
        if (!recipes.empty()) blk.emplace(t, std::move(recipes), in.block_memory_bytes, std::move(skip));
    }
    // A tensor cut into strips, with an NVFP4 preset: its global amax first (a second read of the
    // tensor, in strips too; DumpedBlocks::needs_amax_pass).
    if (blk && blk->needs_amax_pass()) {
        dmp.read_runs(i, [&](const dump::Chunk& c) { blk->add_amax(c); });
        blk->end_amax_pass();
    }
    dmp.read_runs(i, [&](const dump::Chunk& c) {
        if (c.repeat > 1)
            h->add_repeated(c.bits, c.wide, c.repeat);
        else
            h->add(c.bits, c.wide, c.count);
        if (blk) blk->add(c);
    });
    pd.d.step = *t.step;
    pd.d.hist = h;
    h->finish();
    pd.d.amax = h->te_amax();
    if (!blk) return;
    if (!blk->active())
        pd.notes.push_back(fmt::format("{}: {}: block recipes skipped: {}", t.file, t.name, blk->why()));
    for (auto& q : blk->finish())  // the scalars only
        pd.d.block.push_back(q ? std::optional<numerics::StatsScalars>(*q) : std::nullopt);
}

// The pass over tensor i: read, or the reason it is left out (optimizer state, not matched by
// --tensor, no step, f64 data).
DumpedPass pass_one(dump::Dump& dmp, std::size_t i, const std::vector<Candidate>& blocks, const Inputs& in) {
    const auto& t = dmp.tensors()[i];
    DumpedPass pd;
    using K = DumpedPass::Kind;
    auto left_out = [&](K why) {
        pd.kind = why;
        return pd;
    };
    if (t.role == dump::Role::optimizer_state) return left_out(K::optimizer_state);
    pd.series = series_name_of_dump(t.name);
    if (!selected(in.tensors, pd.series)) return left_out(K::not_selected);
    if (!t.step) return left_out(K::no_step);  // counted, and noted once (a checkpoint has hundreds)
    if (t.wide == Wide::f64) {
        pd.notes.push_back(
            fmt::format("{}: {}: f64 data is not evaluated (the one-pass histogram needs "
                        "values float32 holds exactly)",
                        t.file, t.name));
        return pd;
    }
    try {
        read_dumped(dmp, i, blocks, in, pd);
    } catch (const std::bad_alloc&) {  // name what was being read (the bare what() names nothing)
        throw dump::DumpError(t.file, t.name, fmt::format("out of memory while reading its {} elements", t.numel));
    }
    pd.kind = K::read;
    return pd;
}

DumpedPass failed_pass(dump::Problem why) {
    DumpedPass p;
    p.kind = DumpedPass::Kind::failed;
    p.failure = std::move(why);
    return p;
}

// Every dumped tensor selected (one pass each, here or split by in.pass_over), into `read` in
// tensor order. False where pass_over says this process only contributed its share.
bool load_dumps(const Inputs& in, const std::vector<Candidate>& blocks, Loaded& L, std::vector<DumpedPass>& read) {
    if (L.dump_files.empty()) return true;
    dump::Dump dmp(L.dump_files, dump::Selection{}, in.read);
    // Files or tensors the reader could not list are failed inputs, as in inspect (exit 1).
    L.errors.insert(L.errors.end(), dmp.errors().begin(), dmp.errors().end());
    for (auto& p : dump::skipped(dmp.notes())) L.skipped.push_back(std::move(p));
    std::size_t skipped_opt = 0;
    auto keep = [&](std::size_t i, DumpedPass&& p) {
        using K = DumpedPass::Kind;
        const auto& t = dmp.tensors()[i];
        if (p.kind == K::optimizer_state) ++skipped_opt;
        if (p.kind == K::not_selected) ++L.not_selected;
        if (p.kind == K::no_step && L.no_step++ == 0) L.first_no_step = fmt::format("{}: {}", t.file, t.name);
        if (!p.rht_skip.empty() && L.rht_skipped++ == 0) L.first_rht_skipped = p.rht_skip;
        if (p.kind == K::failed) L.errors.push_back(std::move(p.failure));
        for (auto& n : p.notes) L.notes.push_back(std::move(n));
        p.notes.clear();
        if (p.kind == K::read) read.push_back(std::move(p));
    };
    // A tensor that cannot be read fails alone: the sweep goes on with the others.
    auto pass = [&](std::size_t i) {
        try {
            return pass_one(dmp, i, blocks, in);
        } catch (const dump::DumpError& e) {
            return failed_pass({e.file, e.name, e.message});
        } catch (const std::exception& e) {
            return failed_pass({dmp.tensors()[i].file, dmp.tensors()[i].name, e.what()});
        }
    };
    if (in.pass_over) {
        std::vector<std::uint64_t> bytes;  // what each pass reads (pass_one's rules): shares balance these
        for (const auto& t : dmp.tensors()) {
            const bool read = t.role != dump::Role::optimizer_state && t.step && t.wide != Wide::f64 &&
                              selected(in.tensors, series_name_of_dump(t.name));
            bytes.push_back(read ? t.numel * wide_size(t.wide) : 0);
        }
        if (!in.pass_over(dmp, bytes, pass, keep)) return false;
    } else {
        for (std::size_t i = 0; i < dmp.tensors().size(); ++i) {
            keep(i, pass(i));
            if (in.progress) in.progress(i + 1, dmp.tensors().size());
        }
    }
    L.optimizer_state = skipped_opt;
    if (L.no_step)
        L.notes.push_back(
            fmt::format("{} dumped tensor(s) have no step (neither a 'step' attribute nor a step in the "
                        "name, file or folder): skipped (first: {})",
                        L.no_step, L.first_no_step));
    if (skipped_opt)
        L.notes.push_back(fmt::format("{} optimizer-state tensors skipped (no FP8 cast to tune)", skipped_opt));
    if (L.rht_skipped)
        L.notes.push_back(
            fmt::format("{} dumped tensor step(s) left out of a block preset with TE's column-wise RHT "
                        "(first: {})",
                        L.rht_skipped, L.first_rht_skipped));
    return true;
}

// Why no series is left: the reasons, largest first in what a user meets (a checkpoint has no
// steps at all).
std::string nothing_to_sweep(const Inputs& in, const Loaded& L) {
    std::string why;
    if (L.no_step)
        why += fmt::format(
            "; {} dumped tensor(s) have no step information (no 'step' attribute, no step in the name, "
            "file or folder: a checkpoint?): sweep compares recipes over the steps of a run, so it "
            "needs a trace or dumps of several steps (for one state, use inspect)",
            L.no_step);
    if (L.optimizer_state) why += fmt::format("; {} optimizer-state tensor(s) left out", L.optimizer_state);
    if (L.not_selected && !in.tensors.empty())
        why += fmt::format("; {} tensor(s) not matched by --tensor", L.not_selected);
    if (!L.errors.empty())
        why += fmt::format("; {} input(s) could not be read (first: {})", L.errors.size(), L.errors.front().describe());
    if (why.empty()) why = "; check the inputs and --tensor";
    return "no tensors to sweep in " + io::quoted_list(in.files) + why;
}

// Whether `folder` holds TransformerEngine statistics logs (te::find_stats_logs finds some).
bool has_te_stats(const std::string& folder) {
    try {
        te::find_stats_logs(folder);
        return true;
    } catch (const std::runtime_error&) {
        return false;
    }
}

}  // namespace

Loaded load_inputs(const Inputs& in) {
    // 1. Candidates: the grid and tensorwise presets; block presets only when a dump is given.
    auto cands = default_candidates(in.formats);
    const auto blocks = block_candidates();
    bool any_dump = false;
    // A folder is read as the dump layout docs/dumps.md documents (TE tensor_dumps/); one without
    // dumps that holds TransformerEngine statistics logs (the log_dir or its
    // nvdlfw_inspect_statistics_logs/) is a trace, read as replay reads it (trace::read_te_stats);
    // any other folder is refused with the globs to use.
    std::vector<std::string> files, stats_folders;
    for (const auto& f : in.files) {
        if (io::is_folder(f)) {
            const auto inside = dump::folder_files(f);
            if (inside.empty() && has_te_stats(f)) {
                stats_folders.push_back(f);
                continue;
            }
            if (inside.empty())
                throw dump::DumpError(f, "",
                                      "a directory with no dump file in a documented layout (nor TransformerEngine "
                                      "statistics logs): " +
                                          dump::folder_hint(f));
            files.insert(files.end(), inside.begin(), inside.end());
        } else {
            files.push_back(f);
        }
    }
    for (const auto& f : files) {
        trace::require_regular_file(f);  // before any probe: a FIFO would block it
        any_dump |= dump::is_dump_file(f);
    }
    if (in.blocks && any_dump) cands.insert(cands.end(), blocks.begin(), blocks.end());
    // 2. Files, told apart by content.
    Loaded L;
    for (const auto& f : files) {
        (dump::is_dump_file(f) ? L.dump_files : L.trace_files).push_back(f);
    }
    L.trace_files.insert(L.trace_files.end(), stats_folders.begin(), stats_folders.end());
    // 3. Trace series, then the dumped tensors.
    std::vector<trace::Series> series;
    std::map<std::string, std::size_t> by_name;
    load_traces(in, L, series, by_name);
    std::vector<DumpedPass> pending;
    if (!load_dumps(in, blocks, L, pending)) return L;  // an MPI rank whose share went to rank 0
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
        L.notes.push_back(
            fmt::format("{} dumped tensors have no amax trace: their series are the dumped steps only, "
                        "so delayed scaling sees just those steps",
                        dump_only.size()));
    for (auto& p : pending) {
        p.d.series = by_name.at(p.series);
        L.dumped.push_back(std::move(p.d));
    }
    if (L.sweep->series().empty()) throw trace::TraceError(nothing_to_sweep(in, L));
    return L;
}

}  // namespace fp8kit::sweep
