// What a recipe would do to each tensor of a dump: the per-tensor work behind `fp8kit inspect`.
// Tensors up to Options::memory_bytes are read once and analysed with one compute_stats (or
// compute_block_stats) call on the whole array; larger ones are streamed twice (amax, then
// statistics), with bounded memory, for per-tensor recipes.
#pragma once

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <vector>
#include <optional>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/device.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace fp8kit::inspect {

struct Options {
    RecipeSpec recipe;
    std::optional<Format> format;                       // overrides the recipe's per-role format ("auto" when unset)
    std::size_t memory_bytes = std::size_t(256) << 20;  // largest tensor analysed in memory
    // Where per-tensor statistics run (--device cuda: on the GPU): the CPU by default. Block recipes, and casts
    // the GPU has no statistics kernel for, run on the CPU whatever this says.
    StatsDevice device;
};

// Throws std::invalid_argument when the recipe's scale depends on earlier steps (delayed,
// windowed): a dump holds a few steps, not the history such a recipe needs.
void check_recipe(const RecipeSpec& r);

struct Result {
    Format format;
    Role role;  // the recipe slot used: recipe_slot(tensor role)
    Granularity granularity;
    float amax = 0;     // amax_of over the tensor (the amax the scale comes from)
    ScalePair scale{};  // per-tensor recipes
    QuantStats stats;
    // Block/row recipes (scale_inv per block there); a pointer, not an optional: a caller that keeps
    // one Result per tensor (inspect's rows, 10^5 tiny tensors) holds 2.4 KB each, not 7.5 KB.
    std::shared_ptr<const BlockStats> blocks;
    bool streamed = false;  // read twice in chunks rather than held whole
};

// Analyses d.tensors()[i]. Throws dump::DumpError (unreadable data) or std::invalid_argument
// (the recipe cannot be applied, e.g. a block recipe on a tensor larger than memory_bytes).
Result analyse(dump::Dump& d, std::size_t i, const Options& opts);
// The same, reading a tensor that is neither mapped nor streamed into `buf`, which is reused
// while large enough and within opts.memory_bytes (as analyse_range reuses its buffer): a caller
// analysing tensor after tensor (the Python module) pays the page faults of a fresh tensor-sized
// allocation once, not per tensor.
Result analyse(dump::Dump& d, std::size_t i, const Options& opts, std::vector<unsigned char>& buf);

// Every tensor of d in order, as analyse would give it: each tensor's chunks read and decoded by
// the thread pool (parallel/pool.hpp) and its statistics computed by OpenMP, one tensor at a time.
// done(i, result, nullptr) or done(i, nullptr, error) is called once per tensor, in index order,
// on the calling thread; error holds what analyse would have thrown. Throws what check_recipe
// throws.
using Done = std::function<void(std::size_t i, const Result* result, std::exception_ptr error)>;
void analyse_all(dump::Dump& d, const Options& opts, const Done& done);
// The same over tensors [first, last) only (an MPI rank's share: cluster/inspect.hpp); the
// other tensors' data is never read.
void analyse_range(dump::Dump& d, const Options& opts, std::size_t first, std::size_t last, const Done& done);

}  // namespace fp8kit::inspect
