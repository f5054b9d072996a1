// The inputs of a sweep, loaded: amax traces and tensor dumps (told apart by content) become the
// Sweep's series and its dumped entries (each dumped tensor read once, into a MagnitudeHistogram
// and, for the block presets, the block statistics). Used by `fp8kit sweep` and fp8kit.sweep.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/analysis/sweep.hpp"
#include "fp8kit/io/dump.hpp"

namespace fp8kit::sweep {

struct Inputs {
    std::vector<std::string> files;    // amax traces (CSV, dlfw-inspect logs) and dumps (HDF5, safetensors)
    std::vector<std::string> tensors;  // globs on series names (trace::matches); all when empty
    std::vector<std::optional<Format>> formats{std::nullopt};  // default_candidates' format choices
    bool blocks = true;                // the block presets too, when a dump is given (they need the data)
    dump::ReadOptions read;            // limits and the read-only-what-was-named switch for dumps
    // The most bytes of one tensor the block presets hold at once (larger tensors are analysed in
    // strips of whole tiles; dumped_blocks.hpp).
    std::size_t block_memory_bytes = std::size_t(256) << 20;
};

struct Loaded {
    std::unique_ptr<Sweep> sweep;      // candidates and series; call sweep->run(dumped, notes)
    std::vector<std::string> trace_files, dump_files;
    std::vector<Dumped> dumped;
    std::vector<std::string> notes;    // messages about the inputs (skipped tensors, ...)
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
// given twice, nothing selected.
Loaded load_inputs(const Inputs& in);

}  // namespace fp8kit::sweep
