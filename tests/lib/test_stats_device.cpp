// The --device seam (fp8kit/stats/device.hpp) without a GPU: which engine select_device picks, the
// errors that name why, and that StatsDevice::compute sends exactly the casts the engine handles
// to it, and StatsDevice::compute_blocks exactly the block recipes it handles (a fake engine here
// that records its calls and returns the CPU's result with a mark).
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "fp8kit/stats/device.hpp"

using namespace fp8kit;

namespace {

int g_calls = 0;
std::string g_why;  // what the fake engine's unavailable() returns

QuantStats fake_compute(const void* data, Wide type, std::size_t n, const QuantConfig& cfg) {
    ++g_calls;
    QuantStats s = compute_stats(data, type, n, cfg);
    s.sum_x2 += 1.0;  // a mark: this result came from the engine
    return s;
}
int g_block_calls = 0;
BlockStats fake_blocks(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br) {
    ++g_block_calls;
    BlockStats b = compute_block_stats(data, type, rows, cols, br);
    b.total.sum_x2 += 1.0;  // the mark
    return b;
}
const StatsEngine kFake{"fake",
                        [] { return g_why; },
                        [](Format f, Wide w, const Policy&) { return f == Format::e4m3 && w == Wide::f32; },
                        fake_compute,
                        [](const BlockRecipe& br, Wide w) { return br.format == Format::e2m1 && w == Wide::f32; },
                        fake_blocks};

// Restores the process's engine (none in test_lib) when a test ends, also when it fails.
struct Registered {
    explicit Registered(const StatsEngine* e) { register_stats_engine(e); }
    ~Registered() { register_stats_engine(nullptr); }
};

}  // namespace

TEST_CASE("parse_device names the three devices and nothing else", "[device]") {
    CHECK(parse_device("auto") == Device::auto_select);
    CHECK(parse_device("cpu") == Device::cpu);
    CHECK(parse_device("cuda") == Device::cuda);
    CHECK_FALSE(parse_device("gpu"));
    CHECK_FALSE(parse_device("CUDA"));
    CHECK(name(Device::cuda) == "cuda");
}

TEST_CASE("without an engine: cpu and auto are the CPU, cuda names the build", "[device]") {
    REQUIRE(registered_stats_engine() == nullptr);
    CHECK(select_device(Device::cpu).gpu == nullptr);
    const StatsDevice a = select_device(Device::auto_select);
    CHECK(a.gpu == nullptr);
    CHECK(a.fallback.find("built without CUDA") != std::string::npos);
    CHECK_THROWS_WITH(select_device(Device::cuda), Catch::Contains("built without CUDA"));
    CHECK_THROWS_AS(select_device(Device::cuda), DeviceError);
}

TEST_CASE("with an engine but no usable GPU, cuda names the engine's reason; auto never probes", "[device]") {
    Registered r(&kFake);
    g_why = "cudaGetDeviceCount returned 0 devices";
    CHECK_THROWS_WITH(select_device(Device::cuda), "no usable CUDA GPU: cudaGetDeviceCount returned 0 devices");
    CHECK(gpu_unavailable() == "no usable CUDA GPU: cudaGetDeviceCount returned 0 devices");
    const StatsDevice a = select_device(Device::auto_select);
    CHECK(a.gpu == nullptr);
    CHECK(a.fallback.rfind("auto: ", 0) == 0);
    g_why.clear();
    CHECK(select_device(Device::auto_select).gpu == nullptr);  // auto is the CPU even with a GPU
    CHECK(select_device(Device::cuda).gpu == &kFake);
}

TEST_CASE("StatsDevice::compute sends the engine exactly the casts it handles", "[device]") {
    Registered r(&kFake);
    g_why.clear();
    const StatsDevice gpu = select_device(Device::cuda);
    const StatsDevice cpu = select_device(Device::cpu);
    std::vector<float> x = {1.0f, -0.3f, 448.0f, 1e-9f, 0.0f};
    std::vector<double> xd(x.begin(), x.end());
    QuantConfig cfg{};
    cfg.format = Format::e4m3;
    cfg.scale = 1.0f;
    cfg.policy = Policy{};
    g_calls = 0;
    const QuantStats want = compute_stats(x.data(), Wide::f32, x.size(), cfg);
    const QuantStats on_cpu = cpu.compute(x.data(), Wide::f32, x.size(), cfg);
    CHECK(g_calls == 0);
    CHECK(on_cpu.sum_x2 == want.sum_x2);
    const QuantStats on_gpu = gpu.compute(x.data(), Wide::f32, x.size(), cfg);
    CHECK(g_calls == 1);
    CHECK(on_gpu.sum_x2 == want.sum_x2 + 1.0);
    CHECK(on_gpu.underflow == want.underflow);
    // Not handled (f64 input, another format): the CPU, whatever the device.
    gpu.compute(xd.data(), Wide::f64, xd.size(), cfg);
    cfg.format = Format::e5m2;
    gpu.compute(x.data(), Wide::f32, x.size(), cfg);
    CHECK(g_calls == 1);
}

TEST_CASE("StatsDevice::compute_blocks sends the engine exactly the block recipes it handles", "[device]") {
    Registered r(&kFake);
    g_why.clear();
    const StatsDevice gpu = select_device(Device::cuda);
    const StatsDevice cpu = select_device(Device::cpu);
    std::vector<float> x(4 * 32);
    for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 7) - 3.0f;
    const std::vector<double> xd(x.begin(), x.end());
    BlockRecipe br{};
    br.format = Format::e2m1;
    br.block_rows = 1;
    br.block_cols = 32;
    br.rule = ScaleRule::mx_roundup;
    br.policy = Policy{};
    const BlockStats want = compute_block_stats(x.data(), Wide::f32, 4, 32, br);
    g_block_calls = 0;
    CHECK(cpu.compute_blocks(x.data(), Wide::f32, 4, 32, br).total.sum_x2 == want.total.sum_x2);
    CHECK(g_block_calls == 0);
    const BlockStats on_gpu = gpu.compute_blocks(x.data(), Wide::f32, 4, 32, br);
    CHECK(g_block_calls == 1);
    CHECK(on_gpu.total.sum_x2 == want.total.sum_x2 + 1.0);
    CHECK(on_gpu.blocks == want.blocks);
    // Not handled (f64 input, another format): the CPU.
    gpu.compute_blocks(xd.data(), Wide::f64, 4, 32, br);
    br.format = Format::e4m3;
    gpu.compute_blocks(x.data(), Wide::f32, 4, 32, br);
    CHECK(g_block_calls == 1);
}
