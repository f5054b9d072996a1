// Internal: "read only the files the user named" for HDF5. A dataset can keep its bytes in other
// files (external raw storage, H5Pset_external), map other files' datasets (virtual datasets,
// VDS), or be reached through an external link. None of these is followed unless the user allows
// external storage and VDS sources inside the dump's own folder (ReadOptions::
// allow_external_in_dump_folder); external links are never followed.
#pragma once

#include <hdf5.h>

#include <string>

#include "io/hdf5_handle.hpp"

namespace fp8kit::dump::detail {

// The absolute folder that holds `path` (symlinks resolved), or "" when it cannot be resolved.
std::string dump_folder(const std::string& path);

// A dataset (or link) access property list for every open: external links fail before their
// target file is opened (H5Pset_elink_cb), and the names of external raw files and VDS source
// files resolve against `folder` (H5Pset_efile_prefix, H5Pset_virtual_prefix), never against the
// working directory. `folder` empty: no prefixes (nothing outside is read then anyway).
Handle confined_access(const std::string& folder);

// Whether a dataset's bytes lie in the named file. `refused` is true when they do not and may not
// be read; `message` then says what the dataset points at (for a skip note). With `allow`,
// external files and VDS sources that are regular files inside `folder` are allowed (a VDS
// source must itself be a plain dataset: no chains, no cycles).
struct Outside {
    bool refused = false;
    std::string message;
};
Outside check_outside(hid_t file, hid_t dcpl, const std::string& dataset, const std::string& folder, bool allow);

// Walks `dataset`'s path ("a/b/c") link by link: "" when every link stays in the file, else why
// not ("'a/b' is an external link to 'other.h5:/x': not followed (fp8kit reads only the files
// named)"), or that a component does not exist.
std::string check_link_path(hid_t file, const std::string& dataset);

}  // namespace fp8kit::dump::detail
