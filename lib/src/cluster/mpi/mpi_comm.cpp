// MPI_COMM_WORLD as a cluster::Comm; see cluster/mpi.hpp.
#include "fp8kit/cluster/mpi.hpp"

#include <mpi.h>

#include <cstdint>
#include <cstdlib>
#include <stdexcept>
#include <string>

#include "fp8kit/parallel/pool.hpp"

namespace fp8kit::cluster {
namespace {

void check(int rc, const char* what) {
    if (rc == MPI_SUCCESS) return;
    char text[MPI_MAX_ERROR_STRING];
    int n = 0;
    MPI_Error_string(rc, text, &n);
    throw std::runtime_error(std::string("MPI: ") + what + ": " + std::string(text, n));
}

constexpr int kTag = 19;
constexpr std::size_t kPiece = std::size_t(1) << 30;  // MPI counts are int: send in 1 GiB pieces

}  // namespace

struct MpiSession::World final : Comm {
    int rank_ = 0, size_ = 1;
    int rank() const override { return rank_; }
    int size() const override { return size_; }
    // Rank 0 receives from ranks 1, 2, ... in order: its length, then its bytes in pieces.
    std::vector<std::string> gather(std::string mine) override {
        std::vector<std::string> all;
        if (rank_ != 0) {
            std::uint64_t n = mine.size();
            check(MPI_Send(&n, 1, MPI_UINT64_T, 0, kTag, MPI_COMM_WORLD), "send");
            for (std::size_t at = 0; at < mine.size(); at += kPiece)
                check(MPI_Send(mine.data() + at, static_cast<int>(std::min(kPiece, mine.size() - at)), MPI_BYTE, 0,
                               kTag, MPI_COMM_WORLD),
                      "send");
            return all;
        }
        all.resize(size_);
        all[0] = std::move(mine);
        for (int r = 1; r < size_; ++r) {
            std::uint64_t n = 0;
            check(MPI_Recv(&n, 1, MPI_UINT64_T, r, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE), "receive");
            all[r].resize(n);
            for (std::size_t at = 0; at < n; at += kPiece)
                check(MPI_Recv(all[r].data() + at, static_cast<int>(std::min<std::uint64_t>(kPiece, n - at)), MPI_BYTE,
                               r, kTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE),
                      "receive");
        }
        return all;
    }
    // Rank 0's length, then its bytes in pieces, to every rank (MPI_Bcast).
    std::string broadcast(std::string bytes) override {
        std::uint64_t n = bytes.size();
        check(MPI_Bcast(&n, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD), "broadcast");
        bytes.resize(n);
        for (std::size_t at = 0; at < n; at += kPiece)
            check(MPI_Bcast(bytes.data() + at, static_cast<int>(std::min<std::uint64_t>(kPiece, n - at)), MPI_BYTE, 0,
                            MPI_COMM_WORLD),
                  "broadcast");
        return bytes;
    }
};

bool launched_as_rank() {
    for (const char* v : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
        if (std::getenv(v)) return true;
    return false;
}

MpiSession::MpiSession(int* argc, char*** argv) : world_(new World) {
    int provided = 0;
    check(MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided), "init");
    MPI_Comm_rank(MPI_COMM_WORLD, &world_->rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &world_->size_);
    MPI_Comm node;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) == MPI_SUCCESS) {
        int on_node = 1;
        MPI_Comm_size(node, &on_node);
        MPI_Comm_free(&node);
        parallel::set_ranks_on_node(static_cast<unsigned>(on_node));
    }
    // The pool and OpenMP's team both take the rank's share (a --threads flag parsed later wins).
    parallel::set_threads(0);
    set_world(world_);
}

MpiSession::~MpiSession() {
    set_world(nullptr);
    MPI_Finalize();
    delete world_;
}

Comm& MpiSession::comm() { return *world_; }

void MpiSession::abort(int status) {
    MPI_Abort(MPI_COMM_WORLD, status);
    std::_Exit(status);  // MPI_Abort does not return; this keeps [[noreturn]] honest
}

}  // namespace fp8kit::cluster
