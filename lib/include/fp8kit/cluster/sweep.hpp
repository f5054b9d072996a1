// A sweep over the ranks of a communicator (docs/mpi.md): the histogram passes over the dumped
// tensors (read each tensor once into its MagnitudeHistogram and block statistics, the part of a
// sweep that reads the data) are split by tensor (cluster::share: contiguous, balanced over the
// bytes the passes read), every rank receives every pass's result bit for bit in tensor order;
// then the replay and evaluation of the series (Sweep::run) split by groups of series, and the
// per-series rows of the report, each group formatted by one rank and written by rank 0.
#pragma once

#include <functional>
#include <string>

#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/cluster/comm.hpp"

namespace fp8kit::cluster {

// Collective over `comm`. Every rank gets what sweep::load_inputs(in) returns in one process (the
// passes are split, their records exchanged), or rank 0 its exception and the others a
// SharedError (the same error, said once). A tensor that cannot be read is in Loaded::errors on
// every rank, as in one process. Every rank must be given the same inputs.
// in.progress: called with this rank's passes (made, to make).
sweep::Loaded load_sweep_inputs(Comm& comm, sweep::Inputs in);

// (done, total) of a phase on this rank, for a progress line; empty: none.
using Progress = std::function<void(std::size_t, std::size_t)>;

// Collective: L.sweep->run(L.dumped, L.notes) with the groups of series (Sweep::kSeriesGroup)
// split over the ranks, contiguous and balanced over their steps and dumped entries; every
// rank merges every group's totals in group order, so every rank holds one process's Sweep.
// `progress`: this rank's groups (made, to make).
void run_sweep(Comm& comm, sweep::Loaded& L, const Progress& progress = {});

// Collective: the per-series output of a sweep. make(first, last) gives the rows of series
// [first, last) (groups of Sweep::kSeriesGroup, group g made on rank g % P); rank 0 calls write
// with every group's rows in series order, in rounds of P groups (memory: one round's rows).
void series_rows(Comm& comm, std::size_t series, const std::function<std::string(std::size_t, std::size_t)>& make,
                 const std::function<void(const std::string&)>& write, const Progress& progress = {});

// The bytes that carry one tensor's pass between ranks (exposed for the round-trip test).
std::string encode_pass(std::size_t i, const sweep::DumpedPass& p);
// Reads one record at `pos` (advanced past it) into `out`; throws std::runtime_error on malformed
// bytes. Returns the tensor's index.
std::size_t decode_pass(const std::string& bytes, std::size_t& pos, sweep::DumpedPass& out);

}  // namespace fp8kit::cluster
