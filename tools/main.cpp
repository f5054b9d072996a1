// fp8kit: FP8 numerics from the command line. Each subcommand is in cmd_<name>.cpp.
#include <cstdio>  // first: it defines __GLIBC__ on glibc systems
#include <exception>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "command.hpp"

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
    if (!profile.empty()) {
        const auto p = parse_profile(profile);
        if (!p) throw UsageError(fmt::format("--profile: unknown profile '{}' (choose from {})", profile, profile_choices()));
        if (!overflow.empty() || !nan.empty())
            throw UsageError("--profile fixes the overflow and NaN policy: drop --overflow/--nan, or drop --profile");
        Rounding r = Rounding::toward_zero;
        if (format == Format::e8m0) {
            if (round.empty())
                throw UsageError(fmt::format("--profile {} with e8m0 needs --round toward-zero or toward-positive", profile));
            const auto pr = parse_rounding(round);
            if (!pr) throw UsageError(fmt::format("--round: unknown rounding '{}' (choose from {})", round, rounding_choices()));
            r = *pr;
        } else if (!round.empty()) {
            throw UsageError(fmt::format("--profile {} rounds {} to nearest-even: drop --round, or drop --profile", profile, name(format)));
        }
        const auto res = emu::profile_policy(*p, format, from, r);
        if (!res.ok) {
            if (format == Format::e8m0 && (*p == Profile::cuda_satfinite || *p == Profile::cuda_nosat))
                throw UsageError(fmt::format("--profile {}: cuda_fp8.h converts to e8m0 only toward-zero or toward-positive, not {}", profile, round));
            throw UsageError(fmt::format("--profile {} has no conversion to {}", profile, name(format)));
        }
        return res.policy;
    }
    if (round.empty() || overflow.empty() || nan.empty())
        throw UsageError("name the conversion: --profile P (" + profile_choices() +
                         "), or all of --round, --overflow and --nan");
    const auto r = parse_rounding(round);
    if (!r) throw UsageError(fmt::format("--round: unknown rounding '{}' (choose from {})", round, rounding_choices()));
    const auto o = parse_overflow(overflow);
    if (!o) throw UsageError(fmt::format("--overflow: unknown policy '{}' (choose from {})", overflow, overflow_choices()));
    const auto n = parse_nan(nan);
    if (!n) throw UsageError(fmt::format("--nan: unknown encoding '{}' (choose from {})", nan, nan_choices()));
    return Policy{*r, *o, *n};
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
