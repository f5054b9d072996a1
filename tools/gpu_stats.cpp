// The CLI's GPU statistics engine (lib's StatsEngine, fp8kit/stats/device.hpp) over fp8kit::cuda's
// statistics kernel: built only when the CUDA library is (FP8KIT_HAVE_CUDA, tools/CMakeLists.txt).
// No rule here: the kernel computes numerics::element_step per element as compute_stats does.
#ifdef FP8KIT_HAVE_CUDA

#include <cstddef>
#include <mutex>
#include <string>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/stats/device.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::gpu_stats {
namespace {

// One device buffer for the process, grown as tensors need (a cudaMalloc per tensor costs more
// than a small tensor's statistics). Never freed: freeing at exit races the CUDA runtime's own
// teardown, and the process ends there anyway.
struct Staging {
    std::mutex m;
    void* p = nullptr;
    std::size_t bytes = 0;
};
Staging& staging() {
    static auto* s = new Staging;
    return *s;
}

std::string unavailable() {
    std::string why;
    if (cuda::device_count(&why) > 0) return {};
    return why.empty() ? std::string("no CUDA device found") : why;
}

bool handles(Format format, Wide type, const Policy&) {
    // The kernel reads f32, f16 and bf16 bits (kernels.hpp); f64 inputs stay on the CPU.
    return type != Wide::f64 && cuda::has_cast_kernels(format);
}

QuantStats compute(const void* data, Wide type, std::size_t n, const QuantConfig& cfg) {
    if (n == 0) return compute_stats(data, type, n, cfg);  // nothing to copy
    Staging& s = staging();
    std::lock_guard<std::mutex> lock(s.m);
    const std::size_t bytes = n * wide_size(type);
    if (bytes > s.bytes) {
        if (s.p) cuda::device_free(s.p);
        s.p = nullptr;
        s.bytes = 0;
        s.p = cuda::device_alloc(bytes);
        s.bytes = bytes;
    }
    cuda::copy_to_device(s.p, data, bytes);
    return cuda::statistics(cfg.format, type, s.p, n, cfg.policy, cfg.scale, cfg.scale_inv, cfg.seed, 0);
}

const StatsEngine kEngine{"cuda", unavailable, handles, compute};
const bool kRegistered = (register_stats_engine(&kEngine), true);

}  // namespace
}  // namespace fp8kit::cli::gpu_stats

#endif  // FP8KIT_HAVE_CUDA
