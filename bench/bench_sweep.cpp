// The sweep's cost model (issue 6 item 4): R recipes over a dumped tensor from one histogram
// pass, against one compute_stats pass (what `fp8kit inspect` does per tensor and recipe).
// Run: bench_sweep --benchmark_min_time=2 (FP8KIT_BENCH_N overrides the element count).
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdlib>
#include <random>
#include <vector>

#include "fp8kit/stats/magnitude_histogram.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace {

std::size_t count() {
    const char* env = std::getenv("FP8KIT_BENCH_N");
    return env ? static_cast<std::size_t>(std::strtoull(env, nullptr, 10)) : (std::size_t{16} << 20);
}

// Activation-like values: normal times log-normal, so magnitudes spread over many binades.
const std::vector<float>& data() {
    static const std::vector<float> v = [] {
        std::vector<float> d(count());
        std::mt19937_64 rng(12345);
        std::normal_distribution<float> nd(0.0f, 1.0f);
        for (auto& x : d) x = nd(rng) * std::exp(nd(rng));
        return d;
    }();
    return v;
}

constexpr fp8kit::Policy kPolicy{fp8kit::Rounding::nearest_even, fp8kit::Overflow::saturate_all,
                                 fp8kit::NanEncoding::canonical};

// 100 scales as a delayed-scaling grid produces them: fl32(448 / amax) / 2^margin, not powers of two.
std::vector<float> scales() {
    std::vector<float> s;
    for (int i = 0; i < 100; ++i)
        s.push_back(448.0f / (8.0f + 0.37f * static_cast<float>(i % 20)) / static_cast<float>(1 << (i / 20)));
    return s;
}

void BM_compute_stats_one_recipe(benchmark::State& state) {
    const auto& d = data();
    const fp8kit::QuantConfig cfg{fp8kit::Format::e4m3, 448.0f / 9.0f, kPolicy};
    for (auto _ : state) {
        auto st = fp8kit::compute_stats(d.data(), fp8kit::Wide::f32, d.size(), cfg);
        benchmark::DoNotOptimize(st);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.size()));
}

void BM_histogram_build(benchmark::State& state) {
    const auto& d = data();
    for (auto _ : state) {
        fp8kit::MagnitudeHistogram h;
        h.add(d.data(), fp8kit::Wide::f32, d.size());
        h.finish();
        benchmark::DoNotOptimize(h);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.size()));
}

void BM_sweep_100_recipes(benchmark::State& state) {
    const auto& d = data();
    const auto sc = scales();
    std::size_t bins = 0;
    for (auto _ : state) {
        fp8kit::MagnitudeHistogram h;
        h.add(d.data(), fp8kit::Wide::f32, d.size());
        h.finish();
        bins = h.used_bins();
        for (float s : sc) {
            auto r = h.evaluate(fp8kit::Format::e4m3, s, 1.0f / s, kPolicy);
            benchmark::DoNotOptimize(r);
        }
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * d.size()));
    state.counters["used_bins"] = static_cast<double>(bins);
}

}  // namespace

BENCHMARK(BM_compute_stats_one_recipe)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_histogram_build)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_sweep_100_recipes)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK_MAIN();
