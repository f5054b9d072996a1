// A temporary directory for a test's files, under $TMPDIR (else /tmp), removed with everything in
// it when the object goes away: at the end of a scope, or at process exit for the per-process one
// (a failed Catch2 assertion ends the test case, not the process, so the directory still goes).
// scripts/run-tests.sh runs the suites with a fresh TMPDIR and fails if anything is left in it.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <stdexcept>
#include <string>

namespace fp8kit::test {

class ScratchDir {
public:
    explicit ScratchDir(const std::string& prefix) : owner_(::getpid()) {
        const char* t = std::getenv("TMPDIR");
        std::string tmpl = std::string(t && *t ? t : "/tmp") + "/" + prefix + "_XXXXXX";
        if (!::mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
        path_ = tmpl;
    }
    ~ScratchDir() {
        // Only the process that made it removes it (a forked child that returns must not).
        if (::getpid() != owner_) return;
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    ScratchDir(const ScratchDir&) = delete;
    ScratchDir& operator=(const ScratchDir&) = delete;

    const std::string& path() const { return path_; }
    std::string file(const std::string& name) const { return path_ + "/" + name; }

private:
    std::string path_;
    pid_t owner_;
};

// One directory per test process and prefix, made on first use and removed at exit.
template <class Tag>
const ScratchDir& process_scratch(const char* prefix) {
    static const ScratchDir dir(prefix);
    return dir;
}

}  // namespace fp8kit::test
