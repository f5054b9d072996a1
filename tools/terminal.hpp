// The terminal of the CLI: how wide it is (a table's name column fits it: io::name_cell), and the
// progress line.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fp8kit::cli {

// Columns available for one line of a table: the terminal's width when standard output is one,
// else $COLUMNS when set, else 0 (no limit: a file or a pipe gets whole names).
std::size_t output_width();

// The progress line of inspect, sweep and validate on stderr: "[#####     ] 12/128 tensors",
// redrawn at most every 100 ms, erased by done() (or the destructor). Drawn only where `on`:
// progress_on() says when (rank 0 alone under mpirun, never with --quiet, and only when stderr
// is a terminal unless --progress asks for it). Standard output (--json, --csv) is never touched.
class Progress {
public:
    Progress(bool on, std::size_t total, std::string what);
    ~Progress();
    Progress(const Progress&) = delete;
    Progress& operator=(const Progress&) = delete;
    void update(std::size_t done);  // `done` of total; from one thread at a time
    void done();
    bool on() const { return on_; }

private:
    bool on_;
    std::size_t total_;
    std::string what_;
    long long next_ns_ = 0;
};
bool progress_on(bool root, bool quiet, bool forced);

}  // namespace fp8kit::cli
