// The cast tables of tables.cuh: one static device array holding a table per (FP8 element format,
// deterministic policy), filled by emu::convert on first use.
#include <mutex>

#include "common.cuh"
#include "tables.cuh"

namespace fp8kit::cuda::detail {

namespace {

constexpr int kFormats = 4;              // e4m3, e5m2, e4m3fnuz, e5m2fnuz
constexpr int kPolicies = 60;            // 5 deterministic roundings x 3 overflow x 4 NaN encodings
constexpr std::size_t kSlot = 1u << 14;  // the largest table (3 mantissa bits)
constexpr int kMaxDevices = 64;

__device__ std::uint8_t g_tables[kFormats * kPolicies * kSlot];

int format_slot(emu::Format f) {
    require_gpu_format(f, "quantize");
    switch (f) {
        case emu::Format::e4m3: return 0;
        case emu::Format::e5m2: return 1;
        case emu::Format::e4m3fnuz: return 2;
        case emu::Format::e5m2fnuz: return 3;
        default: break;
    }
    throw std::invalid_argument("fp8kit::cuda: no cast table for e8m0");
}

int policy_slot(const emu::Policy& p) {
    return (static_cast<int>(p.rounding) * 3 + static_cast<int>(p.overflow)) * 4 + static_cast<int>(p.nan);
}

template <class D>
__global__ void build_table(std::uint8_t* table, emu::Policy policy) {
    const std::uint32_t key = blockIdx.x * blockDim.x + threadIdx.x;
    if (key < cast_table_size<D>())
        table[key] =
            static_cast<std::uint8_t>(emu::convert<Binary32, D>(cast_table_representative<D>(key), policy, 0u));
}

}  // namespace

const std::uint8_t* cast_table(emu::Format to, const emu::Policy& policy, cudaStream_t stream) {
    if (policy.rounding == emu::Rounding::stochastic)
        throw std::invalid_argument("fp8kit::cuda: no cast table for stochastic rounding");
    static std::mutex mu;
    static bool built[kMaxDevices][kFormats * kPolicies] = {};
    int dev = 0;
    FP8KIT_CUDA_CHECK(cudaGetDevice(&dev));
    if (dev < 0 || dev >= kMaxDevices)
        throw std::runtime_error("fp8kit::cuda: device index out of range for the cast tables");
    const int slot = format_slot(to) * kPolicies + policy_slot(policy);
    void* base = nullptr;
    FP8KIT_CUDA_CHECK(cudaGetSymbolAddress(&base, g_tables));
    auto* table = static_cast<std::uint8_t*>(base) + static_cast<std::size_t>(slot) * kSlot;
    std::lock_guard<std::mutex> lock(mu);
    if (!built[dev][slot]) {
        with_fp8(to, [&](auto d) {
            using D = decltype(d);
            if constexpr (D::has_zero) {
                constexpr unsigned n = static_cast<unsigned>(cast_table_size<D>());
                build_table<D><<<(n + 255) / 256, 256, 0, stream>>>(table, policy);
            }
            return 0;
        });
        check_launch("build_table");
        // Later launches on any stream read the table: wait for it once.
        FP8KIT_CUDA_CHECK(cudaStreamSynchronize(stream));
        built[dev][slot] = true;
    }
    return table;
}

}  // namespace fp8kit::cuda::detail
