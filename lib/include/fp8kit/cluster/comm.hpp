// The little a split command needs from its ranks: who am I, how many are we, and every rank's
// bytes on rank 0 in rank order. Serial (one rank) by default; an MPI build installs MPI's
// world communicator with set_world (cluster/mpi.hpp).
#pragma once

#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace fp8kit::cluster {

class Comm {
public:
    virtual ~Comm() = default;
    virtual int rank() const = 0;
    virtual int size() const = 0;
    // Collective: every rank passes its bytes; rank 0 gets size() strings, rank r's at index r
    // (its own included); the other ranks get an empty vector.
    virtual std::vector<std::string> gather(std::string mine) = 0;
    // Collective: rank 0's bytes on every rank (what the others pass is ignored).
    virtual std::string broadcast(std::string bytes) = 0;
    bool root() const { return rank() == 0; }
};

// An error that every rank meets alike before it exchanges anything (the same bad input, read by
// all): rank 0 reports the original, the other ranks throw this and leave quietly, exit 2, with
// no MPI_Abort (tools/main.cpp).
struct SharedError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// One process: rank 0 of 1.
Comm& serial();

// The communicator of the process's commands: serial() unless set_world installed another
// (which must outlive every use).
Comm& world();
void set_world(Comm* c);

// Collective: the worst (largest) of every rank's exit status, on every rank. A split command's
// outcome is its writing rank's and every other rank's at once (tools/main.cpp).
int worst_status(Comm& comm, int status);

}  // namespace fp8kit::cluster
