// --device auto|cpu|cuda and --verbose, shared by inspect, sweep and validate (docs/dumps.md, "--device"),
// and gemm / validate --gemm (docs/gemm.md, "On the GPU").
#pragma once

#include <CLI/CLI.hpp>

#include <string>

#include "fp8kit/gemm/device.hpp"
#include "fp8kit/stats/device.hpp"

namespace fp8kit::cli {

struct DeviceFlags {
    std::string device = "auto";
    bool verbose = false;
};

// `gpu_part`: what of this command runs on the GPU, for the help text.
void add_device_flags(CLI::App* cmd, DeviceFlags& f, const std::string& gpu_part);

// The device for `command`: UsageError (exit 2, one line) for an unknown value or for cuda where
// no GPU can be used, naming why. With --verbose, one line on stderr says where the statistics run
// and why (auto: why the CPU, and whether --device cuda would find a GPU). `gpu_work`: false for a command with nothing the GPU
// computes (sweep, validate): cuda is still checked, and --verbose says the CPU does the work.
StatsDevice resolve_device(const DeviceFlags& f, const char* command, bool gpu_work = true);

// The GEMM device (lib's gemm/device.hpp): UsageError as above; --verbose says where the models run.
gemm::GemmDevice resolve_gemm_device(const DeviceFlags& f, const char* command);

}  // namespace fp8kit::cli
