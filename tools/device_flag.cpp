// --device: parsed here, resolved by lib (stats/device.hpp), reported on stderr with --verbose.
#include "device_flag.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "command.hpp"

namespace fp8kit::cli {

void add_device_flags(CLI::App* cmd, DeviceFlags& f, const std::string& gpu_part) {
    cmd->add_option(
           "--device", f.device,
           "auto, cpu or cuda: where the statistics are computed. " + gpu_part +
               " auto is the CPU: on dumps read from files the GPU gained about 10% with one thread "
               "and lost from 4 threads up (file reading bound, docs/performance.md). cuda fails (exit 2) naming "
               "why when this fp8kit was built without CUDA or no GPU can be used. Counts and codes "
               "are the same on both; float64 sums within 1e-9 relative (docs/cuda.md)")
        ->capture_default_str()
        ->group("Device");
    cmd->add_flag("--verbose", f.verbose, "Say on stderr where the statistics run, and why not on the GPU")
        ->group("Device");
}

StatsDevice resolve_device(const DeviceFlags& f, const char* command, bool gpu_work) {
    const auto d = parse_device(f.device);
    if (!d) throw UsageError(fmt::format("--device '{}': expected auto, cpu or cuda", f.device));
    StatsDevice sd;
    try {
        sd = select_device(*d);
    } catch (const DeviceError& e) {
        throw UsageError(fmt::format("--device cuda: {}", e.what()));
    }
    if (f.verbose) {
        std::string where;
        if (sd.gpu)
            where = gpu_work ? fmt::format(
                                   "on the GPU ({}) for every per-tensor cast and block recipe it has a "
                                   "kernel for, the rest on the CPU",
                                   sd.gpu->name)
                             : "on the CPU: this command has no GPU statistics kernel (docs/dumps.md, --device)";
        else if (*d == Device::cpu)
            where = "on the CPU (--device cpu)";
        else if (registered_stats_engine()) {
            // auto in a CUDA build: say also whether --device cuda would find a GPU.
            const std::string why = gpu_unavailable();
            where = fmt::format("on the CPU ({}; {})", sd.fallback, why.empty() ? "a GPU is usable" : why);
        } else
            where = fmt::format("on the CPU ({})", sd.fallback);
        std::fprintf(stderr, "fp8kit %s: statistics %s\n", command, where.c_str());
    }
    return sd;
}

gemm::GemmDevice resolve_gemm_device(const DeviceFlags& f, const char* command) {
    const auto d = parse_device(f.device);
    if (!d) throw UsageError(fmt::format("--device '{}': expected auto, cpu or cuda", f.device));
    gemm::GemmDevice gd;
    try {
        gd = gemm::select_gemm_device(*d);
    } catch (const DeviceError& e) {
        throw UsageError(fmt::format("--device cuda: {}", e.what()));
    }
    if (f.verbose)
        std::fprintf(stderr, "fp8kit %s: GEMM models %s\n", command,
                     gd.gpu ? "on the GPU (every model but exact, which runs on the CPU)"
                            : "on the CPU (--device cuda runs them on the GPU)");
    return gd;
}

}  // namespace fp8kit::cli
