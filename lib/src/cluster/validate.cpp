// validate over ranks; see cluster/validate.hpp and docs/mpi.md.
#include "fp8kit/cluster/validate.hpp"

namespace fp8kit::cluster {

std::optional<ValidateReport> validate(Comm& comm, const ValidateRequest& request, const ValidateOptions& options) {
    ValidateSplit split;
    split.part = comm.rank();
    split.parts = comm.size();
    split.gather = [&comm](std::string mine) { return comm.gather(std::move(mine)); };
    return fp8kit::validate(request, options, split);
}

}  // namespace fp8kit::cluster
