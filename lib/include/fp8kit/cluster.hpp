// fp8kit/cluster: one command's work split over the ranks of an MPI job (`mpirun -n P fp8kit
// inspect ...`) and merged on rank 0 into the report one process would write, byte for byte
// (docs/mpi.md). The split and the merge are here, independent of MPI; the MPI transport is
// cluster/mpi.hpp (built when CMake finds MPI).
#pragma once

#include "fp8kit/cluster/comm.hpp"
#include "fp8kit/cluster/inspect.hpp"
#include "fp8kit/cluster/share.hpp"
#include "fp8kit/cluster/sweep.hpp"
#include "fp8kit/cluster/validate.hpp"
