// The host side of the GPU statistics (engine.hpp): lib's types in, fp8kit::cuda's kernels under.
#include "fp8kit/cuda/engine.hpp"

#include <mutex>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/stats/device.hpp"
#include "fp8kit/recipes/scale_params.hpp"

namespace fp8kit::cuda {
namespace {

// Device memory for one call, freed on every way out.
struct DeviceBuffer {
    void* p;
    explicit DeviceBuffer(std::size_t bytes) : p(device_alloc(bytes)) {}
    ~DeviceBuffer() { device_free(p); }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    char* bytes() const { return static_cast<char*>(p); }
};

}  // namespace

std::pair<std::size_t, std::size_t> block_grid(const BlockStatsPlan& p, std::size_t rows, std::size_t cols) {
    if (p.columnwise_rht) std::swap(rows, cols);
    return {(rows + p.block_rows - 1) / p.block_rows, (cols + p.block_cols - 1) / p.block_cols};
}

std::optional<BlockStatsPlan> block_stats_plan(const BlockRecipe& br, Wide from) {
    if (br.block_rows < 1 || !has_cast_kernels(br.format) || br.format == Format::e8m0) return std::nullopt;
    if (from == Wide::f64) return std::nullopt;  // the kernels read f32, f16 and bf16 (kernels.hpp)
    // torchao's MX and single-level NVFP4 rules keep a NaN block amax: block_statistics_async
    // refuses them (block_statistics.cu), so they stay on the CPU.
    if (numerics::rule_amax_keeps_nan(br.rule)) return std::nullopt;
    return BlockStatsPlan{
        br.format,        from,
        br.policy,        numerics::make_scale_params(br.rule, br.format, br.epsilon, br.pow2, br.value_for_inf, 0),
        br.block_rows,    br.block_cols,
        br.columnwise_rht};
}

BlockStats block_stats(const BlockStatsPlan& p, const void* d_in, std::size_t rows, std::size_t cols,
                       float* d_scale_inv, std::uint64_t seed, Stream stream) {
    BlockStats b;
    b.tile_rows = static_cast<std::size_t>(p.block_rows);
    b.tile_cols = static_cast<std::size_t>(p.block_cols);
    std::tie(b.grid_rows, b.grid_cols) = block_grid(p, rows, cols);
    b.blocks = b.grid_rows * b.grid_cols;
    b.columnwise_rht = p.columnwise_rht;
    // One allocation: the record, the workspace, each tile's amax, min and (unless the caller
    // gives a place) scale_inv, and NVFP4's global amax.
    const std::size_t rb = sizeof(StatsRecord), ws = statistics_workspace_bytes(), tb = b.blocks * sizeof(float);
    DeviceBuffer mem(rb + ws + 3 * tb + 16);
    auto* tile_amax = reinterpret_cast<float*>(mem.bytes() + rb + ws);
    float* tile_min = tile_amax + b.blocks;
    float* scale_inv = d_scale_inv ? d_scale_inv : tile_min + b.blocks;
    device_memset(mem.p, 0, rb);
    synchronize();  // the zeroed record before the launch on any stream
    block_statistics_async(p, d_in, rows, cols, reinterpret_cast<StatsRecord*>(mem.p), scale_inv, mem.bytes() + rb,
                           seed, stream, tile_amax, tile_min, tile_min + 2 * b.blocks);
    synchronize();
    StatsRecord rec{};
    copy_to_host(&rec, mem.p, rb);
    std::vector<float> amax(b.blocks), mins(b.blocks);
    b.scale_inv.resize(b.blocks);
    if (b.blocks) {
        copy_to_host(amax.data(), tile_amax, tb);
        copy_to_host(mins.data(), tile_min, tb);
        copy_to_host(b.scale_inv.data(), scale_inv, tb);
    }
    b.total = stats_of_record(rec);
    const std::vector<double> amax_d(amax.begin(), amax.end()), min_d(mins.begin(), mins.end());
    summarize_tiles(b, amax_d.data(), min_d.data());
    return b;
}

namespace {

// One device buffer for the process's host tensors, grown as they need (a cudaMalloc per tensor
// costs more than a small tensor's statistics). Never freed: freeing at exit races the CUDA
// runtime's own teardown, and the process ends there anyway.
struct Staging {
    std::mutex m;
    void* p = nullptr;
    std::size_t bytes = 0;

    // The host data on the device (the caller holds m).
    const void* copy(const void* data, std::size_t n) {
        if (n > bytes) {
            if (p) device_free(p);
            p = nullptr;
            bytes = 0;
            p = device_alloc(n);
            bytes = n;
        }
        copy_to_device(p, data, n);
        return p;
    }
};
Staging& staging() {
    static auto* s = new Staging;
    return *s;
}

std::string unavailable() {
    std::string why;
    if (device_count(&why) > 0) return {};
    return why.empty() ? std::string("no CUDA device found") : why;
}

bool handles(Format format, Wide type, const Policy&) {
    // The kernel reads f32, f16 and bf16 bits (kernels.hpp); f64 inputs stay on the CPU.
    return type != Wide::f64 && has_cast_kernels(format);
}

QuantStats compute(const void* data, Wide type, std::size_t n, const QuantConfig& cfg) {
    if (n == 0) return compute_stats(data, type, n, cfg);  // nothing to copy
    Staging& s = staging();
    std::lock_guard<std::mutex> lock(s.m);
    const void* d = s.copy(data, n * wide_size(type));
    return statistics(cfg.format, type, d, n, cfg.policy, cfg.scale, cfg.scale_inv, cfg.seed, 0);
}

bool handles_blocks(const BlockRecipe& recipe, Wide type) { return block_stats_plan(recipe, type).has_value(); }

BlockStats compute_blocks(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& recipe) {
    check_block_input(recipe, rows, cols);  // lib's message where the recipe cannot apply
    const std::size_t n = rows * cols;
    if (n == 0) return compute_block_stats(data, type, rows, cols, recipe);  // nothing to copy
    Staging& s = staging();
    std::lock_guard<std::mutex> lock(s.m);
    const void* d = s.copy(data, n * wide_size(type));
    return block_stats(*block_stats_plan(recipe, type), d, rows, cols);
}

const StatsEngine kEngine{"cuda", unavailable, handles, compute, handles_blocks, compute_blocks};

}  // namespace

void use_gpu() {
    register_stats_engine(&kEngine);
    register_gemm_engine();
}

}  // namespace fp8kit::cuda
