// bench_watch: the trend watcher (lib/src/warn) fed as a monitor feeds it, one step of every
// tensor at a time (issue 27: 10^5 tensors x 10^3 steps in under a minute on 2 cores, memory
// bounded by the tensors). Amaxes are synthetic (log-normal noise, a few growing or spiking
// tensors) so the signals do their full work. Prints wall time, steps/s and peak RSS.
// Usage: bench_watch [TENSORS=100000] [STEPS=1000] [RECIPE=te-delayed|none]
//        bench_watch TENSORS STEPS csv PATH [out-of-order]
//   writes the same amaxes as a CSV trace (step,tensor,amax; step-major, as a training script
//   appends them) for `/usr/bin/time -v fp8kit watch PATH`; out-of-order puts one row of step STEPS
//   first, so that watch reads the file whole (the path before streaming) for comparison.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include <sys/resource.h>

#include "fp8kit/parallel/pool.hpp"
#include "fp8kit/warn/trend.hpp"

using namespace fp8kit;

namespace {

// A counter-based hash to a normal-ish variate (sum of 4 uniforms): deterministic, no state.
double noise(std::uint64_t k) {
    double s = 0;
    for (int i = 0; i < 4; ++i) {
        std::uint64_t x = (k * 4 + static_cast<std::uint64_t>(i) + 1) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 31;
        x *= 0xBF58476D1CE4E5B9ull;
        x ^= x >> 29;
        s += static_cast<double>(x >> 11) * 0x1.0p-53;
    }
    return (s - 2) * 1.7;
}

double amax_of_point(std::size_t t, std::int64_t s) {
    const auto k = static_cast<std::uint64_t>(t) * 1000003ull + static_cast<std::uint64_t>(s);
    double l2 = 0.3 * noise(k);
    if (t % 1000 == 1) l2 += 0.05 * static_cast<double>(s);  // growing tensors
    if (t % 1000 == 2 && s % 250 == 200) l2 += 8;            // spiking tensors
    return std::exp2(l2);
}

int write_csv(std::size_t tensors, std::int64_t steps, const char* path, bool out_of_order) {
    std::FILE* f = std::fopen(path, "wb");
    if (!f) return std::perror(path), 2;
    std::string buf = "step,tensor,amax\n";
    if (out_of_order) buf += std::to_string(steps) + ",model.layers.0.input,1\n";
    char line[96];
    for (std::int64_t s = 0; s < steps; ++s)
        for (std::size_t t = 0; t < tensors; ++t) {
            const int n =
                std::snprintf(line, sizeof line, "%lld,model.layers.%zu.input,%.9g\n", static_cast<long long>(s), t,
                              static_cast<double>(static_cast<float>(amax_of_point(t, s))));
            buf.append(line, static_cast<std::size_t>(n));
            if (buf.size() > (1u << 24)) {
                std::fwrite(buf.data(), 1, buf.size(), f);
                buf.clear();
            }
        }
    std::fwrite(buf.data(), 1, buf.size(), f);
    return std::fclose(f) == 0 ? 0 : 2;
}

}  // namespace

int main(int argc, char** argv) {
    if (argc > 4 && std::string(argv[3]) == "csv")
        return write_csv(std::strtoull(argv[1], nullptr, 10), std::strtoll(argv[2], nullptr, 10), argv[4],
                         argc > 5 && std::string(argv[5]) == "out-of-order");
    const std::size_t tensors = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 100000;
    const std::int64_t steps = argc > 2 ? std::strtoll(argv[2], nullptr, 10) : 1000;
    const std::string recipe = argc > 3 ? argv[3] : "te-delayed";
    warn::TrendConfig c;
    if (recipe != "none") c.recipe = parse_recipe(recipe);
    warn::Watcher w(c, "bench");
    for (std::size_t t = 0; t < tensors; ++t) w.id("model.layers." + std::to_string(t) + ".input");
    auto& trends = w.trends();
    const auto t0 = std::chrono::steady_clock::now();
    for (std::int64_t s = 0; s < steps; ++s) {
        // One step of every tensor; tensors are independent, so any split gives the same state.
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t t = 0; t < static_cast<std::ptrdiff_t>(tensors); ++t) {
            trends[static_cast<std::size_t>(t)].observe(
                s, static_cast<float>(amax_of_point(static_cast<std::size_t>(t), s)));
        }
    }
    const auto t1 = std::chrono::steady_clock::now();
    const auto ws = w.warnings();
    const auto t2 = std::chrono::steady_clock::now();
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    const double feed = std::chrono::duration<double>(t1 - t0).count(),
                 rep = std::chrono::duration<double>(t2 - t1).count();
    std::printf(
        "%zu tensors x %lld steps, recipe %s, %u threads: feed %.2f s (%.3g points/s), report %.2f s (%zu warnings), "
        "peak RSS %.0f MiB\n",
        tensors, static_cast<long long>(steps), recipe.c_str(), parallel::threads(), feed,
        static_cast<double>(tensors) * static_cast<double>(steps) / feed, rep, ws.size(), ru.ru_maxrss / 1024.0);
    return 0;
}
