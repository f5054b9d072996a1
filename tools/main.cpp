// fp8kit: FP8 numerics from the command line. Each subcommand is in cmd_<name>.cpp.
#include <cstdio>  // first: it defines __GLIBC__ on glibc systems
#include <cerrno>
#include <cstring>
#include <exception>
#include <iostream>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "command.hpp"
#if FP8KIT_HAVE_MPI
#include <memory>
#include <string_view>

#include "fp8kit/cluster/launcher.hpp"
#include "fp8kit/cluster/mpi.hpp"
#endif
#include "fp8kit/convert/policy_args.hpp"
#include "fp8kit/cluster/comm.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"
#if FP8KIT_HAVE_CUDA
#include "fp8kit/cuda/engine.hpp"
#endif

namespace fp8kit::cli {

int& exit_status() {
    static int status = 0;
    return status;
}

std::vector<Setup>& registry() {
    static std::vector<Setup> r;
    return r;
}

void PolicyOptions::add_to(CLI::App* cmd) {
    cmd->add_option("--profile", profile, "Reproduce a library bit for bit: " + profile_choices())
        ->group("Conversion policy");
    cmd->add_option(
           "--round", round,
           "Rounding: " + rounding_choices() + " (with --profile: only for e8m0, toward-zero or toward-positive)")
        ->group("Conversion policy");
    cmd->add_option("--overflow", overflow, "Overflow: " + overflow_choices())->group("Conversion policy");
    cmd->add_option("--nan", nan, "NaN encoding: " + nan_choices())->group("Conversion policy");
}

Policy PolicyOptions::resolve(Format format, Wide from) const {
    auto opt = [](const std::string& v) { return v.empty() ? std::nullopt : std::optional<std::string>(v); };
    try {
        return resolve_policy(format, from, PolicyArgs{opt(profile), opt(round), opt(overflow), opt(nan)},
                              ArgStyle::cli);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

std::string PolicyOptions::describe(Format format, Wide from) const {
    const Policy p = resolve(format, from);
    return (profile.empty() ? std::string("policy ") : "profile " + profile + ": ") + fp8kit::describe(p);
}

Format require_format(const std::string& s, const char* option) {
    const auto f = parse_format(s);
    if (!f) throw UsageError(fmt::format("{}: unknown format '{}' (choose from {})", option, s, format_choices()));
    return *f;
}

Wide require_wide(const std::string& s, const char* option) {
    const auto w = parse_wide(s);
    if (!w) throw UsageError(fmt::format("{}: unknown type '{}' (choose from {})", option, s, wide_choices()));
    return *w;
}

std::string exact(double v) { return fmt::format("{}", v); }

}  // namespace fp8kit::cli

#if FP8KIT_HAVE_MPI
namespace {

// Under `mpirun -n P` (an MPI build): the commands that split their work over the ranks
// (lib/src/cluster: inspect by tensor, sweep's dumped tensors, validate's blocks of elements). Any other command runs whole on rank 0; the other ranks leave at once, so
// one report is written, never P.
bool splits_over_ranks(int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (!a.empty() && a[0] != '-') return a == "inspect" || a == "sweep" || a == "validate";
    }
    return false;
}

}  // namespace
#endif

int main(int argc, char** argv) {
    using namespace fp8kit::cli;
#if FP8KIT_HAVE_MPI
    // Declared first: MPI is finalised after everything else (the report is written by then).
    std::unique_ptr<fp8kit::cluster::MpiSession> mpi;
    if (fp8kit::cluster::launched_as_rank()) {
        mpi = std::make_unique<fp8kit::cluster::MpiSession>(&argc, &argv);
        if (!mpi->comm().root() && !splits_over_ranks(argc, argv)) return 0;
    }
#endif
#if FP8KIT_HAVE_CUDA
    // --device cuda: lib dispatches statistics and GEMMs to the GPU engines (stats/device.hpp, gemm/device.hpp).
    fp8kit::cuda::use_gpu();
#endif
    // Only rank 0 writes: the other ranks' argument errors are rank 0's too.
    const bool speaks = fp8kit::cluster::world().root();
    bool stdout_closed = fp8kit::io::reserve_stdout();
#if FP8KIT_HAVE_MPI
    if (mpi && speaks) stdout_closed = fp8kit::cluster::write_to_launcher_stdout() || stdout_closed;
#endif
    fp8kit::io::remove_temporaries_on_signals();  // an interrupted -o leaves no temporary (io/sink.hpp)
#if defined(__GLIBC__)
    // Reading a dump allocates and frees buffers of several MiB per chunk (libhdf5's decompression
    // buffers among them). By default glibc returns such memory to the kernel on every free, and
    // the next chunk faults the same pages in again: a third of `inspect`'s time on a 1 GiB dump
    // (docs/performance.md). Keep freed memory for reuse instead; the peak is unchanged.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest value glibc accepts on 64-bit systems
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    CLI::App app{
        "fp8kit: bit-exact FP8 reference, conversion tables, and FP8 analysis of tensor dumps.\n"
        "Run 'fp8kit COMMAND --help' for the options of each command."};
    app.require_subcommand(1);
    app.set_version_flag("--version", "fp8kit 0.1.0");
    for (auto& setup : registry()) setup(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return fp8kit::io::finish_stdout(app.exit(e), stdout_closed);
    } catch (const CLI::CallForAllHelp& e) {
        return fp8kit::io::finish_stdout(app.exit(e), stdout_closed);
    } catch (const CLI::CallForVersion& e) {
        return fp8kit::io::finish_stdout(app.exit(e), stdout_closed);
    } catch (const CLI::ParseError& e) {
        if (speaks) std::fprintf(stderr, "fp8kit: error: %s (see 'fp8kit --help')\n", e.what());
        return 2;
    } catch (const UsageError& e) {  // the same on every rank: rank 0 says it
        if (std::ferror(stdout)) return fp8kit::io::finish_stdout(2, stdout_closed);
        std::fflush(stdout);
        if (speaks) std::fprintf(stderr, "fp8kit: error: %s\n", fp8kit::io::printable(e.what()).c_str());
        return 2;
    } catch (const fp8kit::cluster::SharedError&) {  // rank 0 reports it (a rank other than 0 throws it)
        return 2;
    } catch (const std::exception& e) {  // everything else: one line, exit 2
        // fmt::print throws when standard output fails mid-report: say that, not "cannot write to file".
        if (std::ferror(stdout)) {
            const int status = fp8kit::io::finish_stdout(2, stdout_closed);
#if FP8KIT_HAVE_MPI
            // The other ranks may be waiting in an exchange with this one: end the job.
            if (mpi && mpi->comm().size() > 1) mpi->abort(status);
#endif
            return status;
        }
        std::fflush(stdout);
        std::fprintf(stderr, "fp8kit: error: %s\n", fp8kit::io::printable(e.what()).c_str());
#if FP8KIT_HAVE_MPI
        // A rank that fails outside its tensors' analysis (memory, MPI itself) would leave the
        // others waiting for its results: end the whole job instead.
        if (mpi && mpi->comm().size() > 1) mpi->abort(2);
#endif
        return 2;
    }
    const int status = fp8kit::io::finish_stdout(exit_status(), stdout_closed);
#if FP8KIT_HAVE_MPI
    if (mpi && mpi->comm().size() > 1 && splits_over_ranks(argc, argv))
        return fp8kit::cluster::worst_status(mpi->comm(), status);
#endif
    return status;
}
