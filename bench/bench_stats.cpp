// All FP8 statistics of a float32 tensor (compute_stats) against a plain quantization pass
// (encode_array) over the same 64M random values. The target is stats <= 1.5x encode.
// Run: bench_stats --benchmark_min_time=3 (FP8KIT_BENCH_N overrides the element count).
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <random>
#include <vector>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace {

std::size_t count() {
    const char* env = std::getenv("FP8KIT_BENCH_N");
    return env ? static_cast<std::size_t>(std::strtoull(env, nullptr, 10)) : (std::size_t{64} << 20);
}

// Normal values with a spread of magnitudes, so every branch of the statistics runs.
const std::vector<float>& data() {
    static const std::vector<float> v = [] {
        std::vector<float> d(count());
        std::mt19937_64 rng(12345);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& x : d) x = nd(rng);
        return d;
    }();
    return v;
}

constexpr fp8kit::Policy kPolicy{fp8kit::Rounding::nearest_even, fp8kit::Overflow::saturate_all,
                                 fp8kit::NanEncoding::canonical};

void BM_encode_array(benchmark::State& state) {
    const auto& d = data();
    std::vector<std::uint8_t> out(d.size());
    for (auto _ : state) {
        fp8kit::encode_array(fp8kit::Format::e4m3, fp8kit::Wide::f32, d.data(), out.data(), d.size(), kPolicy);
        benchmark::DoNotOptimize(out.data());
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.size()));
    state.SetLabel(fp8kit::encode_path(fp8kit::Format::e4m3, fp8kit::Wide::f32, kPolicy));
}

void BM_compute_stats(benchmark::State& state) {
    const auto& d = data();
    const fp8kit::QuantConfig cfg{fp8kit::Format::e4m3, 64.0f, kPolicy};
    for (auto _ : state) {
        auto st = fp8kit::compute_stats(d.data(), fp8kit::Wide::f32, d.size(), cfg);
        benchmark::DoNotOptimize(st);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.size()));
}

}  // namespace

BENCHMARK(BM_encode_array)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_compute_stats)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
