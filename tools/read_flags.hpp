// The reading limits and the "read only the files named" switch, as flags of every command that
// reads dumps or arrays (inspect, sweep, replay, validate, simulate). One ReadOptions for the process: the
// CLI runs one command.
#pragma once

#include <CLI/CLI.hpp>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/parallel/pool.hpp"

namespace fp8kit::cli {

inline dump::ReadOptions& cli_read_options() {
    static dump::ReadOptions opts;
    return opts;
}

inline void add_read_flags(CLI::App* cmd) {
    auto& o = cli_read_options();
    static std::uint64_t chunk_mib = o.max_chunk_bytes >> 20;
    cmd->add_flag("--allow-external-in-dump-folder", o.allow_external_in_dump_folder,
                  "Read HDF5 datasets stored in external files, and virtual datasets' sources, when "
                  "they are regular files in the dump's own folder (default: skipped with a note; "
                  "nothing outside the folder is ever read, external links are never followed)")
        ->group("Reading");
    cmd->add_option("--max-elements", o.max_elements,
                    "Largest element count one tensor may claim (default 2^34); larger ones are errors "
                    "before anything is read")
        ->group("Reading");
    cmd->add_option_function<std::uint64_t>(
           "--max-chunk-mib", [&o](std::uint64_t v) { o.max_chunk_bytes = v << 20; },
           "Largest HDF5 chunk, decoded whole, in MiB (default 64)")
        ->default_val(chunk_mib)
        ->group("Reading");
    cmd->add_option_function<unsigned>(
           "--threads", [](unsigned n) { parallel::set_threads(n); },
           "Threads that read, decode and analyse (default: OMP_NUM_THREADS, else the cores this "
           "process may use); the output is the same for any count")
        ->check(CLI::Range(1u, 1024u))
        ->group("Reading");
}

}  // namespace fp8kit::cli
