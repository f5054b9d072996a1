// Where the statistics of a cast are computed: `--device auto|cpu|cuda` (fp8kit inspect, sweep,
// validate; docs/dumps.md, "--device"). fp8kit::core never links CUDA: a program that links fp8kit::cuda
// registers a StatsEngine (cuda::use_gpu, cuda/engine), and lib dispatches to it. The
// statistics rule stays written once: the engine runs fp8kit::cuda::statistics
// (cuda/include/fp8kit/cuda/kernels.hpp), which applies numerics::element_step to every element
// as compute_stats does, so counts, amax, min_nonzero and the histogram are exact and the two
// binary64 sums differ only by the order of their additions (docs/statistics.md).
#pragma once

#include <cstddef>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

#include "fp8kit/stats/statistics.hpp"

namespace fp8kit {

enum class Device { auto_select, cpu, cuda };
std::optional<Device> parse_device(std::string_view s);  // "auto", "cpu", "cuda"; nullopt otherwise
std::string_view name(Device d);

// A GPU's statistics, as plain function pointers (no CUDA type crosses into lib).
struct StatsEngine {
    const char* name;  // "cuda"
    // "" when a GPU can be used now, otherwise why not (no device, driver missing), one line.
    std::string (*unavailable)();
    // True when the engine has a statistics kernel for this cast (format, input type, policy).
    bool (*handles)(Format format, Wide type, const Policy& policy);
    // compute_stats(data, type, n, cfg) for host data: copied to the device, one kernel pass.
    QuantStats (*compute)(const void* data, Wide type, std::size_t n, const QuantConfig& cfg);
    // True when the engine has a block statistics kernel for this block recipe and input type.
    bool (*handles_blocks)(const BlockRecipe& recipe, Wide type);
    // compute_block_stats(data, type, rows, cols, recipe) for host data, on the device.
    BlockStats (*compute_blocks)(const void* data, Wide type, std::size_t rows, std::size_t cols,
                                 const BlockRecipe& recipe);
};

// The engine of this process (nullptr, the default: built without CUDA). Set once at start-up.
void register_stats_engine(const StatsEngine* engine);
const StatsEngine* registered_stats_engine();

// --device cuda where no GPU can be used: the message names why (one line).
struct DeviceError : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// Where one command's statistics run. The default is the CPU.
struct StatsDevice {
    const StatsEngine* gpu = nullptr;
    std::string fallback;  // auto, or no usable GPU: why the CPU is used ("" for --device cpu)

    // True when compute() of this cast runs on the GPU.
    bool on_gpu(Format format, Wide type, const Policy& policy) const;
    // compute_stats, on the GPU where on_gpu() says so.
    QuantStats compute(const void* data, Wide type, std::size_t n, const QuantConfig& cfg) const;
    // compute_block_stats, on the GPU where the engine has a block kernel for the recipe.
    BlockStats compute_blocks(const void* data, Wide type, std::size_t rows, std::size_t cols,
                              const BlockRecipe& recipe) const;
};

// cpu: the CPU. cuda: the registered engine, or DeviceError naming why there is none (built
// without CUDA; no usable GPU, with the driver's reason). auto: the CPU, with `fallback` saying
// why: on dumps read from files (the 16-core H100 host, docs/performance.md "--device") the GPU
// gained about 10% with one thread, tied with 2 and lost from 4 threads up, since every byte
// is read on the host and copied; and probing for a GPU alone costs the CUDA driver's start
// (about 0.2 s), so auto does not probe.
StatsDevice select_device(Device d);

// Why this build has no GPU path: "this fp8kit was built without CUDA (FP8KIT_CUDA=OFF)" or
// "(no nvcc was found when it was built)", as CMake configured it. The CLI and the Python module
// both say it.
std::string built_without_cuda();

// For --verbose: "" when the registered engine can use a GPU now, else why not (probes the driver).
std::string gpu_unavailable();

}  // namespace fp8kit
