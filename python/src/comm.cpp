// PyComm: a Python communicator (mpi4py's) behind cluster::Comm; see comm.hpp.
#include "comm.hpp"

#include <fmt/format.h>

#include <stdexcept>

namespace fp8kit::py {

PyComm::PyComm(pyb::object comm) : comm_(std::move(comm)) {
    rank_ = comm_.attr("Get_rank")().cast<int>();
    size_ = comm_.attr("Get_size")().cast<int>();
    if (size_ < 1 || rank_ < 0 || rank_ >= size_)
        throw std::invalid_argument(fmt::format("comm: rank {} of {} ranks", rank_, size_));
}

std::vector<std::string> PyComm::gather(std::string mine) {
    pyb::gil_scoped_acquire gil;
    using namespace pyb::literals;
    pyb::object all = comm_.attr("gather")(pyb::bytes(mine), "root"_a = 0);
    if (rank_ != 0) return {};
    std::vector<std::string> out;
    for (auto part : all.cast<pyb::list>()) out.push_back(part.cast<std::string>());
    if (out.size() != static_cast<std::size_t>(size_))
        throw std::runtime_error(fmt::format("comm: gather returned {} parts for {} ranks", out.size(), size_));
    return out;
}

std::string PyComm::broadcast(std::string bytes) {
    pyb::gil_scoped_acquire gil;
    using namespace pyb::literals;
    return comm_.attr("bcast")(pyb::bytes(bytes), "root"_a = 0).cast<std::string>();
}

void bind_comm(pyb::module_& m) {
    // Raised on ranks other than 0 for the error that every rank meets alike (rank 0 raises the
    // original, e.g. DumpError): cluster::SharedError.
    pyb::register_exception<cluster::SharedError>(m, "SharedError", PyExc_RuntimeError);
}

}  // namespace fp8kit::py
