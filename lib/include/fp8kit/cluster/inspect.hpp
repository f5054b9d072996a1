// inspect::analyse_all over the ranks of a communicator: each rank reads and analyses only its
// share of the tensors (share.hpp), with its own thread pool, and sends its results to rank 0,
// which delivers every tensor's result or error in tensor order, as one process would.
#pragma once

#include "fp8kit/analysis/inspect.hpp"
#include "fp8kit/cluster/comm.hpp"

namespace fp8kit::cluster {

// Collective over `comm`. On rank 0, done(i, result, nullptr) or done(i, nullptr, error) is called
// once per tensor in index order, as inspect::analyse_all calls it; an error analysed on another
// rank arrives as a dump::DumpError holding the (file, name, message) that rank reported (the
// message of a non-DumpError is its what(), under the tensor's file and name). On the other ranks
// done is never called. Every rank must hold the same Dump (same files and selection).
void analyse_all(Comm& comm, dump::Dump& d, const inspect::Options& opts, const inspect::Done& done);

// This rank's tensors of d: share() over their stored bytes (numel x element size). The one rule
// for every caller (the CLI through analyse_all, Python's fp8kit.inspect(comm=...)).
std::pair<std::size_t, std::size_t> tensor_share(const dump::Dump& d, int rank, int size);

// The bytes that carry one tensor's outcome between ranks (exposed for the round-trip test).
std::string encode(std::size_t i, const inspect::Result* r, const dump::Problem* error);
struct Decoded {
    std::size_t index = 0;
    std::optional<inspect::Result> result;
    dump::Problem error;
};
// Reads one record at `pos` (advanced past it); throws std::runtime_error on malformed bytes.
Decoded decode(const std::string& bytes, std::size_t& pos);

}  // namespace fp8kit::cluster
