// fp8kit._fp8kit: the C++ library behind the fp8kit Python package. Arrays cross as raw bits
// (uint8 codes, uint16/32/64 for the wide types); python/fp8kit/ gives them their dtypes.
#include "bindings.hpp"

PYBIND11_MODULE(_fp8kit, m) {
    m.doc() = "fp8kit C++ core (use the fp8kit package, not this module directly)";
    fp8kit::py::bind_convert(m);
    fp8kit::py::bind_stats(m);
    fp8kit::py::bind_recipes(m);
    fp8kit::py::bind_validate(m);
    fp8kit::py::bind_dump(m);
    fp8kit::py::bind_replay(m);
    fp8kit::py::bind_simulate(m);
    fp8kit::py::bind_gemm(m);
    fp8kit::py::bind_warn(m);
    fp8kit::py::bind_comm(m);
    fp8kit::py::bind_checkpoint(m);
    fp8kit::py::bind_calibrate(m);
    fp8kit::py::bind_kv(m);
    fp8kit::py::bind_cuda(m);
    fp8kit::py::bind_io(m);
}
