// Internal: every dataset of an HDF5 file reachable through hard links, each object once, in the
// order H5Ovisit gives (depth first, links by name), with the work following the tree: each group
// is opened from its parent's handle. H5Ovisit2 in libhdf5 1.10 looks every object up again by
// its full path from the root (H5G_visit builds the path, then H5G_loc_find), so a chain of 10,000
// nested groups cost cubic time (2,000 levels: 280 s); this walk is linear in the objects.
#pragma once

#include <hdf5.h>

#include <functional>
#include <string>

namespace fp8kit::dump::detail {

// Calls `dataset(parent, link_name, path)` for each dataset (path without a leading '/') and
// `progress()` once per object. Soft and external links are not followed. Returns "" or why the
// walk stopped early (what was found until then has been reported).
std::string walk_datasets(hid_t file, const std::function<void(hid_t, const std::string&, const std::string&)>& dataset,
                          const std::function<void()>& progress);

}  // namespace fp8kit::dump::detail
