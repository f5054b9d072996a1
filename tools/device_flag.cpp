// --device: parsed here, resolved by lib (stats/device.hpp), reported on stderr with --verbose.
#include "device_flag.hpp"

#include <fmt/format.h>

#include <cstdio>

#include "command.hpp"

namespace fp8kit::cli {

void add_device_flags(CLI::App* cmd, DeviceFlags& f, const std::string& gpu_part) {
    cmd->add_option("--device", f.device,
                    "auto, cpu or cuda: where the statistics are computed. " + gpu_part +
                        " auto uses a GPU when this fp8kit was built with CUDA and one is there, else "
                        "the CPU; cuda fails (exit 2) naming why when no GPU can be used. The output "
                        "is the same: counts and codes exact, float64 sums within docs/statistics.md's "
                        "tolerance")
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
        if (!sd.gpu)
            where = sd.fallback.empty() ? "on the CPU (--device cpu)" : fmt::format("on the CPU ({})", sd.fallback);
        else if (!gpu_work)
            where = "on the CPU: this command has no GPU statistics kernel (docs/cli-device.md)";
        else if (sd.min_gpu_elements)
            where = fmt::format("on the GPU ({}) for per-tensor casts of {} elements or more, the rest on the CPU",
                                sd.gpu->name, sd.min_gpu_elements);
        else
            where = fmt::format("on the GPU ({}) for every per-tensor cast it has a kernel for, the rest on the CPU",
                                sd.gpu->name);
        std::fprintf(stderr, "fp8kit %s: statistics %s\n", command, where.c_str());
    }
    return sd;
}

}  // namespace fp8kit::cli
