// The inputs of a sweep, loaded: amax traces and tensor dumps (told apart by content) become the
// Sweep's series and its dumped entries (each dumped tensor read once, into a MagnitudeHistogram
// and, for the block presets, the block statistics). Used by `fp8kit sweep` and fp8kit.sweep.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/analysis/sweep.hpp"
#include "fp8kit/io/dump.hpp"

namespace fp8kit::sweep {

// What the histogram pass over one dumped tensor keeps for the sweep: the tensor read (its
// series name, class and Dumped entry, series index not yet set), or why it is left out, or why
// it failed (a corrupt chunk: `failure`, reported like inspect's failed tensors); and the notes
// the pass wrote, in order.
struct DumpedPass {
    enum class Kind : std::uint8_t { read, left_out, optimizer_state, not_selected, no_step, failed };
    Kind kind = Kind::left_out;
    std::string series;
    Role role = Role::activation;
    Dumped d{};
    std::vector<std::string> notes;
    // Non-empty when a block preset could not take this tensor (nvfp4's column-wise RHT needs rows
    // in 16s): the reason, for sweep's one summary note.
    std::string rht_skip;
    dump::Problem failure;  // Kind::failed: the file, tensor and message
};

// How the passes over a dump's tensors are run: given the dump, the bytes each tensor's pass
// reads (0 for a tensor left out) and the pass of tensor i (a tensor that cannot be read comes
// back as Kind::failed; the pass throws only what no tensor can go on from), call keep(i, result) for every tensor in index order, and return true; or return
// false on a process that only contributed its share to another (an MPI rank other than 0;
// load_inputs then returns a Loaded without a sweep). Empty: one process, every tensor in order
// (cluster/sweep.hpp splits them over ranks).
using PassOver = std::function<bool(const dump::Dump& d, const std::vector<std::uint64_t>& bytes,
                                    const std::function<DumpedPass(std::size_t)>& pass,
                                    const std::function<void(std::size_t, DumpedPass&&)>& keep)>;

struct Inputs {
    std::vector<std::string> files;    // amax traces (CSV, dlfw-inspect logs) and dumps (HDF5, safetensors)
    std::vector<std::string> tensors;  // globs on series names (trace::matches); all when empty
    std::vector<std::optional<Format>> formats{std::nullopt};  // default_candidates' format choices
    bool blocks = true;      // the block presets too, when a dump is given (they need the data)
    dump::ReadOptions read;  // limits and the read-only-what-was-named switch for dumps
    // The most bytes of one tensor the block presets hold at once (larger tensors are analysed in
    // strips of whole tiles; dumped_blocks.hpp).
    std::size_t block_memory_bytes = std::size_t(256) << 20;
    PassOver pass_over;  // empty: every dumped tensor read here, in order
    // Called after each dumped tensor's pass made here, with (passes made, passes to make here);
    // for a progress line (the CLI's, on rank 0). Empty: none.
    std::function<void(std::size_t, std::size_t)> progress;
};

struct Loaded {
    std::unique_ptr<Sweep> sweep;  // candidates and series; call sweep->run(dumped, notes)
                                   // (null where Inputs::pass_over returned false)
    std::vector<std::string> trace_files, dump_files;
    std::vector<Dumped> dumped;
    std::vector<std::string> notes;  // messages about the inputs (skipped tensors, ...)
    // Datasets the dump reader skipped on purpose (stored outside the file, integer tensors, ...):
    // dump::skipped() of its notes, reported by every output form.
    std::vector<dump::Problem> skipped;
    // Inputs that could not be read, in input order: files or tensors the dump reader could not
    // list, then dumped tensors whose pass failed (a corrupt chunk). The sweep goes on without
    // them (a failed step is as if not dumped); the CLI reports each and exits 1, as inspect does.
    std::vector<dump::Problem> errors;
    // Dumped tensors left out, by reason (for the "nothing to sweep" message).
    std::size_t no_step = 0, optimizer_state = 0, not_selected = 0;
    std::string first_no_step;  // "file: name" of the first tensor without a step
    // Tensor steps a block preset with TE's column-wise RHT (nvfp4's inputs and gradients) left out
    // because their row count is not a multiple of 16; the first one's "file: name" and reason.
    std::size_t rht_skipped = 0;
    std::string first_rht_skipped;
};

// Reads every file. Bad input throws trace::TraceError or dump::DumpError naming the file, the
// tensor or the filter: a file that cannot be opened, a tensor in two traces, a dumped step
// given twice, nothing selected. A dumped tensor that cannot be read goes to Loaded::errors.
Loaded load_inputs(const Inputs& in);

}  // namespace fp8kit::sweep
