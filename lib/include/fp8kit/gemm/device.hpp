// Where the GEMM models run: `--device auto|cpu|cuda` of fp8kit gemm and validate --gemm, and
// `device=` of Python's fp8kit.gemm / validate_gemm (docs/gemm.md, "On the GPU"). fp8kit::core
// never links CUDA: a program that links fp8kit::cuda_engine registers a GemmEngine
// (cuda::use_gpu, cuda/engine), and lib dispatches to it, so the CLI and Python reach the GPU
// through the same layer. The GPU computes every model but `exact` with the same bits as
// gemm::gemm (numerics/gemm_model.hpp holds the rules both run; tests/gpu).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fp8kit/gemm/gemm.hpp"
#include "fp8kit/stats/device.hpp"

namespace fp8kit::gemm {

// Per element of D: the binary64 sum of the scaled products (numerics::gemm::scaled_sum's rule)
// and the sum of their magnitudes, T of docs/gemm.md's bounds.
struct Binary64Sums {
    std::vector<double> sum, magnitude;
};

// A GPU's GEMM models, as plain function pointers (no CUDA type crosses into lib).
struct GemmEngine {
    const char* name;  // "cuda"
    // True when the GPU computes model m; false with the reason in *why.
    bool (*handles)(const AccumModel& m, std::string* why);
    // gemm(rq, m) on the GPU: host operands in, host bits out.
    std::vector<std::uint32_t> (*run)(const GemmRequest& rq, const AccumModel& m);
    // binary64_sums(rq) on the GPU.
    Binary64Sums (*sums)(const GemmRequest& rq);
};

// The engine of this process (nullptr, the default: built without CUDA). Set once at start-up.
void register_gemm_engine(const GemmEngine* engine);
const GemmEngine* registered_gemm_engine();

// The CPU's binary64 sums, each in k order: the GPU adds in the same order, so its sums have the
// same bits (tests/gpu). Against the exact sums they may differ by binary64_order_error(K) of the
// magnitude (compare.hpp).
Binary64Sums binary64_sums(const GemmRequest& rq);

// Where one command's GEMMs run. The default is the CPU.
struct GemmDevice {
    const GemmEngine* gpu = nullptr;
    // With a GPU, compare() leaves out the models only the CPU computes (`exact`) above this many
    // multiply-adds (M x N x K): 2^33, 32 times the 256 x 256 x 4096 GEMM of docs/performance.md.
    double cpu_model_work_limit = 8589934592.0;

    bool on_gpu(const AccumModel& m) const { return gpu && gpu->handles(m, nullptr); }
    // gemm(rq, m), on the GPU where on_gpu(m) says so.
    std::vector<std::uint32_t> run(const GemmRequest& rq, const AccumModel& m) const;
    // binary64_sums(rq), on the GPU when there is one.
    Binary64Sums sums(const GemmRequest& rq) const;
    // For a command that computes one model: std::invalid_argument saying why the GPU cannot
    // compute m (the `exact` model), rather than a silent fall back to the CPU.
    void require(const AccumModel& m) const;
};

// cpu and auto: the CPU (auto does not probe for a GPU, as select_device). cuda: the registered
// engine, or DeviceError naming why there is none.
GemmDevice select_gemm_device(Device d);

}  // namespace fp8kit::gemm
