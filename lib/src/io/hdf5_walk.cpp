// The dataset walk of HDF5 files; see hdf5_walk.hpp.
#include "io/hdf5_walk.hpp"

#include <unordered_set>
#include <vector>

#include "io/hdf5_handle.hpp"

namespace fp8kit::dump::detail {
namespace {

herr_t hard_link(hid_t, const char* name, const H5L_info_t* info, void* data) {
    if (info->type == H5L_TYPE_HARD) static_cast<std::vector<std::string>*>(data)->push_back(name);
    return 0;
}

struct Frame {
    Handle group;
    std::vector<std::string> links;
    std::size_t next = 0;
    std::size_t path_len = 0;  // length of the parent's path, restored when this frame ends
};

}  // namespace

std::string walk_datasets(hid_t file, const std::function<void(hid_t, const std::string&, const std::string&)>& dataset,
                          const std::function<void()>& progress) {
    std::string why;
    std::unordered_set<haddr_t> seen;
    std::vector<Frame> stack;
    std::string path;
    auto enter = [&](Handle g) {
        Frame f;
        f.group = std::move(g);
        f.path_len = path.size();
        if (H5Literate(f.group.get(), H5_INDEX_NAME, H5_ITER_INC, nullptr, hard_link, &f.links) < 0 && why.empty())
            why = "could not list every object (file corrupt?): " + hdf5_detail();
        stack.push_back(std::move(f));
    };
    Handle root(H5Gopen2(file, "/", H5P_DEFAULT), H5Gclose);  // (the root's path is "/": short)
    if (!root.ok()) return "cannot open the root group: " + hdf5_detail();
    H5O_info_t info{};
    if (H5Oget_info2(root.get(), &info, H5O_INFO_BASIC) >= 0) seen.insert(info.addr);
    enter(std::move(root));
    while (!stack.empty()) {
        Frame& top = stack.back();
        if (top.next == top.links.size()) {
            path.resize(stack.size() > 1 ? stack.back().path_len : 0);
            stack.pop_back();
            continue;
        }
        const std::string& name = top.links[top.next++];
        progress();
        if (H5Oget_info_by_name2(top.group.get(), name.c_str(), &info, H5O_INFO_BASIC, H5P_DEFAULT) < 0) {
            if (why.empty()) why = "could not list every object (file corrupt?): " + hdf5_detail();
            continue;
        }
        if (!seen.insert(info.addr).second) continue;  // reached again through another hard link
        const std::string full = path.empty() ? name : path + "/" + name;
        if (info.type == H5O_TYPE_DATASET) {
            dataset(top.group.get(), name, full);
        } else if (info.type == H5O_TYPE_GROUP) {
            // By address, not by name: a handle opened by name carries its full path, which
            // libhdf5 rebuilds for every object below it (H5G_name_set), quadratic in the depth.
            Handle g(H5Oopen_by_addr(file, info.addr), H5Oclose);
            if (!g.ok()) {
                if (why.empty()) why = "could not open group '" + full + "': " + hdf5_detail();
                continue;
            }
            const std::size_t parent_len = path.size();
            path = full;
            enter(std::move(g));
            stack.back().path_len = parent_len;
        }
    }
    return why;
}

}  // namespace fp8kit::dump::detail
