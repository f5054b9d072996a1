// fp8kit: FP8 numerics from the command line. Each subcommand is in cmd_<name>.cpp.
#include <cstdio>  // first: it defines __GLIBC__ on glibc systems
#include <exception>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "command.hpp"
#include "fp8kit/convert/policy_args.hpp"

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
    cmd->add_option("--profile", profile,
                    "Reproduce a library bit for bit: " + profile_choices())
        ->group("Conversion policy");
    cmd->add_option("--round", round, "Rounding: " + rounding_choices() +
                    " (with --profile: only for e8m0, toward-zero or toward-positive)")
        ->group("Conversion policy");
    cmd->add_option("--overflow", overflow, "Overflow: " + overflow_choices())
        ->group("Conversion policy");
    cmd->add_option("--nan", nan, "NaN encoding: " + nan_choices())->group("Conversion policy");
}

Policy PolicyOptions::resolve(Format format, Wide from) const {
    auto opt = [](const std::string& v) { return v.empty() ? std::nullopt : std::optional<std::string>(v); };
    try {
        return resolve_policy(format, from, PolicyArgs{opt(profile), opt(round), opt(overflow), opt(nan)}, ArgStyle::cli);
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

int main(int argc, char** argv) {
    using namespace fp8kit::cli;
#if defined(__GLIBC__)
    // Reading a dump allocates and frees buffers of several MiB per chunk (libhdf5's decompression
    // buffers among them). By default glibc returns such memory to the kernel on every free, and
    // the next chunk faults the same pages in again: a third of `inspect`'s time on a 1 GiB dump
    // (docs/performance.md). Keep freed memory for reuse instead; the peak is unchanged.
    mallopt(M_MMAP_THRESHOLD, 32 << 20);  // the largest value glibc accepts on 64-bit systems
    mallopt(M_TRIM_THRESHOLD, 1 << 30);
#endif
    CLI::App app{"fp8kit: bit-exact FP8 reference, conversion tables, and FP8 analysis of tensor dumps.\n"
                 "Run 'fp8kit COMMAND --help' for the options of each command."};
    app.require_subcommand(1);
    app.set_version_flag("--version", "fp8kit 0.1.0");
    for (auto& setup : registry()) setup(app);
    try {
        app.parse(argc, argv);
    } catch (const CLI::CallForHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForAllHelp& e) {
        return app.exit(e);
    } catch (const CLI::CallForVersion& e) {
        return app.exit(e);
    } catch (const CLI::ParseError& e) {
        std::fprintf(stderr, "fp8kit: error: %s (see 'fp8kit --help')\n", e.what());
        return 2;
    } catch (const UsageError& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "fp8kit: error: %s\n", e.what());
        return 2;
    } catch (const std::exception& e) {
        std::fflush(stdout);
        std::fprintf(stderr, "fp8kit: error: %s\n", e.what());
        return 2;
    }
    return exit_status();
}
