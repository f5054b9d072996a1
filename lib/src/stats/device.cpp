// Where statistics run (stats/device.hpp): the registered GPU engine or compute_stats.
#include "fp8kit/stats/device.hpp"

#include <atomic>

namespace fp8kit {
namespace {

std::atomic<const StatsEngine*>& engine_slot() {
    static std::atomic<const StatsEngine*> slot{nullptr};
    return slot;
}

}  // namespace

std::optional<Device> parse_device(std::string_view s) {
    if (s == "auto") return Device::auto_select;
    if (s == "cpu") return Device::cpu;
    if (s == "cuda") return Device::cuda;
    return std::nullopt;
}

std::string_view name(Device d) {
    switch (d) {
        case Device::auto_select: return "auto";
        case Device::cpu: return "cpu";
        case Device::cuda: return "cuda";
    }
    return "auto";
}

void register_stats_engine(const StatsEngine* engine) { engine_slot().store(engine); }
const StatsEngine* registered_stats_engine() { return engine_slot().load(); }

bool StatsDevice::on_gpu(Format format, Wide type, const Policy& policy) const {
    return gpu && gpu->handles(format, type, policy);
}

QuantStats StatsDevice::compute(const void* data, Wide type, std::size_t n, const QuantConfig& cfg) const {
    if (on_gpu(cfg.format, type, cfg.policy)) return gpu->compute(data, type, n, cfg);
    return compute_stats(data, type, n, cfg);
}

BlockStats StatsDevice::compute_blocks(const void* data, Wide type, std::size_t rows, std::size_t cols,
                                       const BlockRecipe& recipe) const {
    if (gpu && gpu->handles_blocks(recipe, type)) return gpu->compute_blocks(data, type, rows, cols, recipe);
    return compute_block_stats(data, type, rows, cols, recipe);
}

#ifndef FP8KIT_NO_CUDA_WHY
#define FP8KIT_NO_CUDA_WHY "FP8KIT_CUDA=OFF or no nvcc"
#endif

std::string built_without_cuda() { return "this fp8kit was built without CUDA (" FP8KIT_NO_CUDA_WHY ")"; }

std::string gpu_unavailable() {
    const StatsEngine* e = registered_stats_engine();
    if (!e) return built_without_cuda();
    const std::string why = e->unavailable();
    return why.empty() ? why : "no usable CUDA GPU: " + why;
}

StatsDevice select_device(Device d) {
    StatsDevice out;
    if (d == Device::cpu) return out;
    if (d == Device::auto_select) {
        out.fallback = registered_stats_engine()
                           ? "auto: the CPU, which matched or beat the GPU on dumps read from files from 2 threads "
                             "up (docs/performance.md); --device cuda uses the GPU"
                           : gpu_unavailable();
        return out;
    }
    std::string why = gpu_unavailable();
    if (!why.empty()) throw DeviceError(why);
    out.gpu = registered_stats_engine();
    return out;
}

}  // namespace fp8kit
