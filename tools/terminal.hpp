// Printing names on a terminal: how wide it is, and how to lay out a table row without cutting a
// name (neighbouring layers differ only in an index).
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fp8kit::cli {

// Columns available for one line of a table: the terminal's width when standard output is one,
// else $COLUMNS when set, else 0 (no limit: a file or a pipe gets whole names).
std::size_t output_width();

// `name` as the first cell of a table row whose name column is `width` characters wide and starts
// at column `indent`. A name that fits is padded to the width. A longer one is never cut (neighbours
// such as layers.3.q_proj and layers.13.q_proj must stay apart): it is written whole, then the row
// continues on the next line at column indent + width, so the other columns stay aligned. width 0:
// no column (the name alone). Control characters are escaped first (io::printable), so the result is
// safe to print.
std::string name_cell(std::string_view name, std::size_t width, std::size_t indent);

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
