// The MPI transport of cluster/comm.hpp, in the fp8kit::cluster_mpi library (built when CMake
// finds MPI; the fp8kit CLI links it). Only the calling thread uses MPI (MPI_THREAD_FUNNELED):
// the thread pool's workers read and decode, they never communicate.
#pragma once

#include "fp8kit/cluster/comm.hpp"

namespace fp8kit::cluster {

// True when a launcher (mpirun, mpiexec, srun with PMI/PMIx) started this process as a rank:
// the environment names its rank. A plain `fp8kit` run never initialises MPI.
bool launched_as_rank();

// MPI initialised for the life of this object: MPI_COMM_WORLD installed as world() (set_world),
// and the ranks that share this node (MPI_Comm_split_type, MPI_COMM_TYPE_SHARED) given to
// parallel::set_ranks_on_node, so each rank's default thread count is its share of the cores.
// The destructor restores serial() and finalises MPI.
class MpiSession {
public:
    MpiSession(int* argc, char*** argv);
    ~MpiSession();
    MpiSession(const MpiSession&) = delete;
    MpiSession& operator=(const MpiSession&) = delete;
    Comm& comm();
    // MPI_Abort on MPI_COMM_WORLD: a rank that cannot deliver its share ends the job rather than
    // leave rank 0 waiting. Does not return.
    [[noreturn]] void abort(int status);

private:
    struct World;
    World* world_;
};

}  // namespace fp8kit::cluster
