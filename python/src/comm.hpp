// A Python communicator as a cluster::Comm (cluster/comm.hpp), so that fp8kit.sweep(comm=...) and
// fp8kit.validate(comm=...) split their work with the library's own split and merge, as
// `mpirun fp8kit sweep|validate` does (docs/mpi.md).
#pragma once

#include <string>
#include <vector>

#include "bindings.hpp"
#include "fp8kit/cluster/comm.hpp"

namespace fp8kit::py {

// Forwards to mpi4py's lower-case, pickle-based collectives (or any object with the same
// methods): Get_rank(), Get_size(), gather(obj, root=0), bcast(obj, root=0), carrying Python
// bytes. Made with the GIL held (rank and size are read once, here); the library code then runs
// with the GIL released and gather/broadcast take it back, on the calling thread only (the
// cluster functions exchange from the thread that called them, never from their worker pools).
class PyComm final : public cluster::Comm {
public:
    explicit PyComm(pyb::object comm);
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    std::vector<std::string> gather(std::string mine) override;
    std::string broadcast(std::string bytes) override;

private:
    pyb::object comm_;
    int rank_ = 0, size_ = 1;
};

}  // namespace fp8kit::py
