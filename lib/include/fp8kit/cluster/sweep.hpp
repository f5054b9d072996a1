// sweep::load_inputs over the ranks of a communicator: the histogram passes over the dumped
// tensors (read each tensor once into its MagnitudeHistogram and block statistics, the part of a
// sweep that reads the data) are split by tensor (cluster::share: contiguous, balanced over the
// bytes the passes read); rank 0 receives every pass's result bit for bit and keeps them in tensor order, so the
// Loaded it gets, and the sweep it runs, are one process's. docs/mpi.md.
#pragma once

#include <string>

#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/cluster/comm.hpp"

namespace fp8kit::cluster {

// Collective over `comm`. Rank 0 gets what sweep::load_inputs(in) returns in one process, or its
// exception: a pass that fails on any rank (a corrupt tensor) is thrown on rank 0 as one process
// throws it, the first failing tensor in tensor order. The other ranks get a Loaded without a
// sweep (nothing to report). Every rank must be given the same inputs.
sweep::Loaded load_sweep_inputs(Comm& comm, sweep::Inputs in);

// The bytes that carry one tensor's pass between ranks (exposed for the round-trip test).
std::string encode_pass(std::size_t i, const sweep::DumpedPass& p);
// Reads one record at `pos` (advanced past it) into `out`; throws std::runtime_error on malformed
// bytes. Returns the tensor's index.
std::size_t decode_pass(const std::string& bytes, std::size_t& pos, sweep::DumpedPass& out);

}  // namespace fp8kit::cluster
