// "Read only the files the user named" (docs/hardening.md) as a property: each input is written as
// an HDF5 file into a private temp folder and read as `fp8kit inspect` reads it (every tensor of
// the dump reader) and as `validate --input file.h5:/x` reads it (load_array, for every dataset
// listed, skipped or refused, up to fuzz_validate_path.hpp's bound). Every file the process opens meanwhile is recorded by interposing open, open64, openat,
// openat64, fopen and fopen64 here in the executable: libhdf5 is a shared library, so its calls
// bind to these definitions, which forward to the C library's (dlsym(RTLD_NEXT)). Opening any path
// but the input file itself (after realpath), outside the short allow-list below, is a finding.
//
// The reader lists HDF5 files in a forked child (dump.hpp, hdf5_listing_timeout_ms). That child
// runs these same interposers; a forbidden open is written to a page shared with it (MAP_SHARED),
// so opens in the child are checked too, and the trap fires in this process after the read. The
// child is kept (not hdf5_listing_timeout_ms = 0) because it is what turns libhdf5 1.10's crashes
// and loops on corrupt metadata into errors, as in the hdf5 harness.
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <string>

#include "fp8kit/io/array_file.hpp"
#include "fp8kit/io/dump.hpp"
#include "fuzz_validate_path.hpp"

namespace {

struct Shared {
    volatile int bad;  // set by any process that opened a forbidden path
    char path[4096];   // the first such path
};
Shared* g_shared = nullptr;
bool g_recording = false;
char g_input[PATH_MAX];  // realpath of the input file

bool starts_with(const char* s, const char* prefix) { return strncmp(s, prefix, strlen(prefix)) == 0; }

// The paths a reading process legitimately opens besides the input: the system's shared libraries
// and /dev/null. Nothing else, so /dev/zero, /dev/urandom, /proc and /etc/passwd (named by the
// seeds) are findings, as is any file next to the input.
bool allowed(const char* abs) {
    if (strcmp(abs, g_input) == 0) return true;
    // The reader's listing child sends its stdout and stderr there (dump_hdf5.cpp); it yields no
    // bytes, so a dataset stored "in" it could not leak anything either.
    if (strcmp(abs, "/dev/null") == 0) return true;
    // Shared libraries loaded lazily (libhdf5 plugins, libgcc_s for unwinding a C++ exception the
    // first time): the dynamic loader's own opens, which go through these symbols on some libcs.
    if (starts_with(abs, "/lib/") || starts_with(abs, "/usr/lib/") || starts_with(abs, "/lib64/") ||
        starts_with(abs, "/etc/ld.so."))
        return true;
    return false;
}

// Makes `path` (relative to `dirfd`) absolute and canonical where it exists, then checks it.
void note(int dirfd, const char* path) {
    if (!g_recording || path == nullptr || g_shared == nullptr) return;
    char abs[PATH_MAX * 2];
    if (path[0] == '/') {
        snprintf(abs, sizeof abs, "%s", path);
    } else {
        char dir[PATH_MAX] = "";
        if (dirfd == AT_FDCWD) {
            if (getcwd(dir, sizeof dir) == nullptr) dir[0] = '\0';
        } else {
            char link[64];
            snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
            const ssize_t n = readlink(link, dir, sizeof dir - 1);
            dir[n > 0 ? n : 0] = '\0';
        }
        snprintf(abs, sizeof abs, "%s/%s", dir, path);
    }
    char real[PATH_MAX];
    const char* checked = realpath(abs, real) != nullptr ? real : abs;  // a failed open counts too
    if (allowed(checked) || g_shared->bad) return;
    snprintf(g_shared->path, sizeof g_shared->path, "%s", checked);
    g_shared->bad = 1;
}

template <class F>
F real_fn(const char* name) {
    return reinterpret_cast<F>(dlsym(RTLD_NEXT, name));
}

mode_t mode_arg(int flags, va_list ap) {
    return (flags & O_CREAT) != 0 || (flags & O_TMPFILE) == O_TMPFILE ? static_cast<mode_t>(va_arg(ap, int)) : 0;
}

}  // namespace

extern "C" {

int open(const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    note(AT_FDCWD, path);
    static auto fn = real_fn<int (*)(const char*, int, ...)>("open");
    return fn(path, flags, mode);
}
int open64(const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    note(AT_FDCWD, path);
    static auto fn = real_fn<int (*)(const char*, int, ...)>("open64");
    return fn(path, flags, mode);
}
int openat(int dirfd, const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    note(dirfd, path);
    static auto fn = real_fn<int (*)(int, const char*, int, ...)>("openat");
    return fn(dirfd, path, flags, mode);
}
int openat64(int dirfd, const char* path, int flags, ...) {
    va_list ap;
    va_start(ap, flags);
    const mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    note(dirfd, path);
    static auto fn = real_fn<int (*)(int, const char*, int, ...)>("openat64");
    return fn(dirfd, path, flags, mode);
}
FILE* fopen(const char* path, const char* mode) {
    note(AT_FDCWD, path);
    static auto fn = real_fn<FILE* (*)(const char*, const char*)>("fopen");
    return fn(path, mode);
}
FILE* fopen64(const char* path, const char* mode) {
    note(AT_FDCWD, path);
    static auto fn = real_fn<FILE* (*)(const char*, const char*)>("fopen64");
    return fn(path, mode);
}

int LLVMFuzzerInitialize(int*, char***) {
    void* p = mmap(nullptr, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) abort();  // the harness cannot run at all; not a finding
    g_shared = static_cast<Shared*>(p);
    return 0;
}

}  // extern "C"

namespace {

// Removes the private folder and whatever is in it (only the input is ever written there).
std::string g_folder;
void remove_folder() {
    if (g_folder.empty()) return;
    if (DIR* d = opendir(g_folder.c_str())) {
        while (const dirent* e = readdir(d))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
                unlink((g_folder + "/" + e->d_name).c_str());
        closedir(d);
    }
    rmdir(g_folder.c_str());
}

// The private folder, made once and removed at exit (and before a trap).
const std::string& folder() {
    if (g_folder.empty()) {
        char tmpl[] = "/tmp/fp8kit-fuzz-outside-XXXXXX";
        if (mkdtemp(tmpl) == nullptr) abort();
        g_folder = tmpl;
        atexit(remove_folder);
    }
    return g_folder;
}

void write_input(const std::string& path, const std::uint8_t* data, std::size_t size) {
    FILE* f = fopen(path.c_str(), "wb");
    if (f == nullptr || fwrite(data, 1, size, f) != size || fclose(f) != 0) abort();
}

// What inspect does: list, then stream every tensor (small ones: a few header bytes can describe
// 2^40 fill-value elements, which would only be a timeout). Returns the names validate's path
// is then run on (fuzz_validate_path.hpp).
std::vector<std::string> read_as_inspect(const std::string& path, const fp8kit::dump::ReadOptions& opts) {
    namespace dump = fp8kit::dump;
    std::unique_ptr<dump::Source> src;
    try {
        src = dump::open_source(path, opts);
    } catch (const dump::DumpError&) {
        return {};
    }
    for (const auto& t : src->tensors()) {
        if (t.numel > (std::uint64_t(1) << 20)) continue;
        try {
            src->read(t, [](const dump::Chunk&) {});
        } catch (const dump::DumpError&) {}
    }
    return fp8kit::fuzz::names_to_validate(*src);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static const unsigned char kSignature[8] = {0x89, 'H', 'D', 'F', '\r', '\n', 0x1a, '\n'};
    if (size < sizeof kSignature || memcmp(data, kSignature, sizeof kSignature) != 0) return 0;
    const std::string path = folder() + "/input.h5";
    write_input(path, data, size);
    if (realpath(path.c_str(), g_input) == nullptr) abort();

    fp8kit::dump::ReadOptions opts;
    opts.chunk_bytes = 4096;
    opts.hdf5_cache_bytes = 1 << 20;
    opts.hdf5_listing_timeout_ms = 2000;  // the child's opens are checked through g_shared
    g_shared->bad = 0;
    g_recording = true;
    const std::vector<std::string> names = read_as_inspect(path, opts);
    fp8kit::fuzz::load_each_as_validate(path, names, /*hdf5=*/true, opts);
    g_recording = false;
    unlink(path.c_str());
    if (g_shared->bad) {
        fprintf(stderr, "fuzz_hdf5_outside: opened '%s', which is not the named file\n", g_shared->path);
        remove_folder();  // libFuzzer keeps the input itself (crash-*)
        __builtin_trap();
    }
    return 0;
}
