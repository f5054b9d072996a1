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

bool StatsDevice::on_gpu(Format format, Wide type, const Policy& policy, std::size_t n) const {
    return gpu && n >= min_gpu_elements && gpu->handles(format, type, policy);
}

QuantStats StatsDevice::compute(const void* data, Wide type, std::size_t n, const QuantConfig& cfg) const {
    if (on_gpu(cfg.format, type, cfg.policy, n)) return gpu->compute(data, type, n, cfg);
    return compute_stats(data, type, n, cfg);
}

StatsDevice select_device(Device d) {
    StatsDevice out;
    if (d == Device::cpu) return out;
    const StatsEngine* e = registered_stats_engine();
    std::string why = e ? e->unavailable() : "this fp8kit was built without CUDA (FP8KIT_CUDA=OFF or no nvcc)";
    if (e && !why.empty()) why = "no usable CUDA GPU: " + why;
    if (why.empty()) {
        out.gpu = e;
        out.min_gpu_elements = d == Device::auto_select ? kAutoGpuMinElements : 0;
        return out;
    }
    if (d == Device::cuda) throw DeviceError(why);
    out.fallback = std::move(why);
    return out;
}

}  // namespace fp8kit
