// Read only the files the user named: external raw storage, virtual datasets and external links
// in HDF5 (see hdf5_outside.hpp).
//
// How libhdf5 1.10 resolves the names it would open (H5Dint.c H5D__build_file_prefix, H5Fint.c
// H5F_prefix_open_file, H5Lexternal.c H5L__extern_traverse):
//   - an external raw file: an absolute name as it is; a relative one after the prefix from
//     $HDF5_EXTFILE_PREFIX, else the dataset access list's efile prefix, else the working directory;
//   - a VDS source file: "." is the file itself; otherwise the name as it is, then after
//     $HDF5_VDS_PREFIX or the access list's virtual prefix, then the parent file's folder, then the
//     working directory (a fallback search);
//   - an external link: the same fallback search, after the link access list's callback.
// So fp8kit decides from the names alone, before libhdf5 opens anything, and allows only names
// that every one of those searches resolves to the same regular file inside the dump's folder.
#include "fp8kit/io/gate.hpp"
#include "io/hdf5_outside.hpp"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cstdlib>
#include <vector>

#include <fmt/format.h>

namespace fp8kit::dump::detail {
namespace {

// Denies every external link traversal before the target file is opened.
herr_t deny_external_link(const char*, const char*, const char*, const char*, unsigned*, hid_t, void*) { return -1; }

std::string real(const std::string& p) {
    char buf[PATH_MAX];
    return ::realpath(p.c_str(), buf) ? std::string(buf) : std::string();
}

bool is_absolute(const std::string& p) { return !p.empty() && p[0] == '/'; }

// The regular file that `name` means inside `folder`, or why it is not one. Relative names must
// not climb out ("..") and must exist there: libhdf5 would otherwise go on searching elsewhere.
std::string inside_folder(const std::string& name, const std::string& folder, std::string& why) {
    if (folder.empty()) {
        why = "the dump's folder could not be resolved";
        return "";
    }
    if (name.find('%') != std::string::npos) {
        why = "printf-style source names are not supported";
        return "";
    }
    const std::string full = is_absolute(name) ? real(name) : real(folder + "/" + name);
    if (full.empty()) {
        why = "it does not exist in the dump's folder";
        return "";
    }
    if (full.compare(0, folder.size() + 1, folder + "/") != 0) {
        why = "it is outside the dump's folder";
        return "";
    }
    struct stat st {};
    if (::stat(full.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
        why = "it is not a regular file";
        return "";
    }
    return full;
}

std::string short_list(const std::vector<std::string>& items) {
    std::string s;
    for (std::size_t i = 0; i < items.size() && i < 3; ++i) s += (i ? ", " : "") + items[i];
    if (items.size() > 3) s += fmt::format(" and {} more", items.size() - 3);
    return s;
}

// Short: the CLI's one-line skip notes keep the end of a message when they must cut it.
const char* kHow = "only the files named are read; see --allow-external-in-dump-folder";

Outside check_external(hid_t dcpl, int n, const std::string& folder, bool allow) {
    std::vector<std::string> names;
    std::string why;
    bool ok = allow && std::getenv("HDF5_EXTFILE_PREFIX") == nullptr;
    if (allow && !ok) why = "$HDF5_EXTFILE_PREFIX is set";
    for (int i = 0; i < n; ++i) {
        char name[4096] = {};
        off_t offset = 0;
        hsize_t size = 0;
        if (H5Pget_external(dcpl, static_cast<unsigned>(i), sizeof name, name, &offset, &size) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return {true, "its raw data is stored in external files whose list cannot be read: not read"};
        }
        names.push_back(fmt::format("'{}'", name));
        if (ok && inside_folder(name, folder, why).empty()) ok = false;
    }
    if (ok) return {};
    return {true, fmt::format("raw data stored outside the file, in {}: not read ({}{})", short_list(names),
                              allow ? "not allowed: " + why + "; " : "", kHow)};
}

// A VDS source must be a plain dataset: not virtual itself, no external storage.
std::string plain_source(hid_t file, const std::string& path, const std::string& dset, const std::string& folder) {
    Handle own;
    if (path != ".") {
        try {
            io::check_input(path);  // libhdf5 opens by name: a FIFO would block it (io/gate.hpp)
        } catch (const io::InputError& e) {
            return "its source file is " + e.reason;
        }
        Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
        own = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
        if (!own.ok()) return "its source file cannot be opened as HDF5";
        file = own.get();
    }
    if (!check_link_path(file, dset).empty()) return "its source is reached through an external link";
    Handle dapl = confined_access(folder);
    Handle d(H5Dopen2(file, dset.c_str(), dapl.get()), H5Dclose);
    if (!d.ok()) return "its source dataset does not exist";
    Handle dcpl(H5Dget_create_plist(d.get()), H5Pclose);
    if (!dcpl.ok() || H5Pget_layout(dcpl.get()) == H5D_VIRTUAL || H5Pget_external_count(dcpl.get()) != 0)
        return "its source is itself virtual or stored outside its file";
    return "";
}

Outside check_virtual(hid_t file, hid_t dcpl, const std::string& dataset, const std::string& folder, bool allow) {
    std::size_t n = 0;
    if (H5Pget_virtual_count(dcpl, &n) < 0) {
        H5Eclear2(H5E_DEFAULT);
        return {true, "virtual dataset whose mappings cannot be read: not read"};
    }
    std::vector<std::string> names;
    std::string why;
    bool ok = allow && std::getenv("HDF5_VDS_PREFIX") == nullptr;
    if (allow && !ok) why = "$HDF5_VDS_PREFIX is set";
    for (std::size_t i = 0; i < n; ++i) {
        char fname[4096] = {}, dname[4096] = {};
        if (H5Pget_virtual_filename(dcpl, i, fname, sizeof fname) < 0 ||
            H5Pget_virtual_dsetname(dcpl, i, dname, sizeof dname) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return {true, "virtual dataset whose mappings cannot be read: not read"};
        }
        const std::string f = fname, d = dname;
        names.push_back(fmt::format("'{}:{}'", f == "." ? "(this file)" : f, d));
        if (!ok) continue;
        std::string src = ".";
        if (d.find('%') != std::string::npos) {
            why = "printf-style source names are not supported";
            ok = false;
        } else if (f != "." && (src = inside_folder(f, folder, why)).empty()) {
            ok = false;
        } else if (f == "." && (d == dataset || d == "/" + dataset)) {
            why = "it maps itself";
            ok = false;
        } else if (const std::string bad = plain_source(file, src, d, folder); !bad.empty()) {
            why = bad;
            ok = false;
        }
    }
    if (n == 0) return {true, "virtual dataset without mappings: not read"};
    if (ok) return {};
    return {true, fmt::format("virtual dataset mapping {}: not read ({}{})", short_list(names),
                              allow ? "not allowed: " + why + "; " : "", kHow)};
}

}  // namespace

std::string dump_folder(const std::string& path) {
    const std::string full = real(path);
    const auto slash = full.find_last_of('/');
    if (full.empty() || slash == std::string::npos) return "";
    return slash == 0 ? std::string("/") : full.substr(0, slash);
}

Handle confined_access(const std::string& folder) {
    Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
    H5Pset_elink_cb(dapl.get(), deny_external_link, nullptr);
    if (!folder.empty()) {
        H5Pset_efile_prefix(dapl.get(), folder.c_str());
        H5Pset_virtual_prefix(dapl.get(), folder.c_str());
    }
    return dapl;
}

Outside check_outside(hid_t file, hid_t dcpl, const std::string& dataset, const std::string& folder, bool allow) {
    if (H5Pget_layout(dcpl) == H5D_VIRTUAL) return check_virtual(file, dcpl, dataset, folder, allow);
    const int n = H5Pget_external_count(dcpl);
    if (n > 0) return check_external(dcpl, n, folder, allow);
    if (n < 0) {
        H5Eclear2(H5E_DEFAULT);
        return {true, "its storage layout cannot be read: not read"};
    }
    return {};
}

std::string check_link_path(hid_t file, const std::string& dataset) {
    Handle lapl(H5Pcreate(H5P_LINK_ACCESS), H5Pclose);
    H5Pset_elink_cb(lapl.get(), deny_external_link, nullptr);
    std::string prefix;
    std::size_t at = 0;
    while (at <= dataset.size()) {
        std::size_t slash = dataset.find('/', at);
        if (slash == std::string::npos) slash = dataset.size();
        if (slash > at) {
            prefix += "/" + dataset.substr(at, slash - at);
            H5L_info_t info{};
            if (H5Lget_info(file, prefix.c_str(), &info, lapl.get()) < 0) {
                H5Eclear2(H5E_DEFAULT);
                return fmt::format(
                    "no dataset there: '{}' does not exist (or is reached through an external "
                    "link, which is not followed)",
                    prefix);
            }
            if (info.type == H5L_TYPE_EXTERNAL) {
                std::vector<char> val(info.u.val_size + 1, '\0');
                const char *tfile = nullptr, *tobj = nullptr;
                unsigned flags = 0;
                std::string target = "another file";
                if (H5Lget_val(file, prefix.c_str(), val.data(), val.size(), lapl.get()) >= 0 &&
                    H5Lunpack_elink_val(val.data(), val.size(), &flags, &tfile, &tobj) >= 0)
                    target = fmt::format("'{}:{}'", tfile ? tfile : "", tobj ? tobj : "");
                H5Eclear2(H5E_DEFAULT);
                return fmt::format("'{}' is an external link to {}: not followed (fp8kit reads only the files named)",
                                   prefix, target);
            }
            if (info.type != H5L_TYPE_HARD && info.type != H5L_TYPE_SOFT)
                return fmt::format("'{}' is a user-defined link: not followed", prefix);
        }
        at = slash + 1;
    }
    return "";
}

}  // namespace fp8kit::dump::detail
