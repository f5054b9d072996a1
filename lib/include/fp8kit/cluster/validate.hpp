// validate() over the ranks of a communicator: each rank compares its contiguous share of the
// array's 2^16-element blocks and rank 0 merges the scans (exact integer and lowest-index merges,
// ValidateSplit in validate.hpp) into the report one process writes. Every rank holds the whole
// request (the CLI loads both arrays on every rank; docs/mpi.md).
#pragma once

#include <optional>

#include "fp8kit/cluster/comm.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit::cluster {

// Collective over `comm`: the report on rank 0, nullopt on the others.
std::optional<ValidateReport> validate(Comm& comm, const ValidateRequest& request, const ValidateOptions& options);

}  // namespace fp8kit::cluster
