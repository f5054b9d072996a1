// libhdf5 error handling shared by the HDF5 readers; see hdf5_handle.hpp.
#include "io/hdf5_handle.hpp"

#include <vector>

#include <fmt/format.h>

namespace fp8kit::dump::detail {
namespace {

herr_t collect_error(unsigned n, const H5E_error2_t* err, void* data) {
    auto* out = static_cast<std::vector<std::string>*>(data);
    char minor[160] = {};
    H5Eget_msg(err->min_num, nullptr, minor, sizeof minor);
    if (n < 2) out->push_back(err->desc && *err->desc ? fmt::format("{} ({})", err->desc, minor) : std::string(minor));
    return 0;
}

}  // namespace

void silence_hdf5() {
    thread_local bool done = false;
    if (!done) {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        done = true;
    }
}

std::string hdf5_detail() {
    std::vector<std::string> msgs;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &msgs);
    H5Eclear2(H5E_DEFAULT);
    if (msgs.empty()) return "HDF5 reported no detail";
    std::string s = msgs[0];
    for (std::size_t i = 1; i < msgs.size(); ++i) s += "; " + msgs[i];
    return s;
}

}  // namespace fp8kit::dump::detail
