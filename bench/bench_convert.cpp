// Bulk float32 -> E4M3 / E5M2 (nearest-even, saturating: profile cuda-satfinite) over 256 MiB,
// on every encode path this CPU runs, beside memory-bandwidth references over the same bytes.
// All OpenMP threads (default: every core). Bytes are counted as the memory traffic a user
// pays for: 5 per converted element (4 read, 1 written), 2x the size for a copy (glibc's memcpy
// streams at this size), 1x for a read-only sum.
// FP8KIT_BENCH_INPUT=FILE reads the float32 input from FILE (raw, 256 MiB), so that
// bench/compare_ml_dtypes.py converts the same numbers with ml_dtypes; otherwise it is made
// here with the same recipe (sign random, magnitude 2^U(-20, 20)).
#include <benchmark/benchmark.h>
#include <omp.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>

#include "fp8kit/convert/quantize.hpp"

namespace {

constexpr std::size_t kBytes = std::size_t{256} << 20;
constexpr std::size_t kElems = kBytes / sizeof(float);

// Buffers touched first by the threads that later use them (first-touch page placement).
struct Buffer {
    explicit Buffer(std::size_t bytes) : size(bytes), data(static_cast<unsigned char*>(std::aligned_alloc(64, bytes))) {
        if (!data) throw std::runtime_error("out of memory");
        const auto n = static_cast<std::ptrdiff_t>(bytes);
#pragma omp parallel for schedule(static)
        for (std::ptrdiff_t i = 0; i < n; i += 4096) data[i] = 0;
    }
    ~Buffer() { std::free(data); }
    std::size_t size;
    unsigned char* data;
};

Buffer& input() {
    static Buffer buf = [] {
        Buffer b(kBytes);
        auto* f = reinterpret_cast<float*>(b.data);
        if (const char* path = std::getenv("FP8KIT_BENCH_INPUT")) {
            std::FILE* in = std::fopen(path, "rb");
            if (!in || std::fread(b.data, 1, kBytes, in) != kBytes) {
                std::fprintf(stderr, "FP8KIT_BENCH_INPUT=%s: cannot read %zu bytes\n", path, kBytes);
                std::exit(2);
            }
            std::fclose(in);
        } else {
            std::mt19937_64 rng(1);
            std::uniform_real_distribution<double> e(-20.0, 20.0);
            for (std::size_t i = 0; i < kElems; ++i)
                f[i] = static_cast<float>(((rng() & 1) ? -1.0 : 1.0) * std::exp2(e(rng)));
        }
        return b;
    }();
    return buf;
}

Buffer& output() {
    static Buffer buf(kElems);
    return buf;
}

const char* path_name(fp8kit::EncodePath p) {
    switch (p) {
        case fp8kit::EncodePath::avx512: return "avx512";
        case fp8kit::EncodePath::avx2: return "avx2";
        case fp8kit::EncodePath::scalar: break;
    }
    return "scalar";
}

void BM_encode(benchmark::State& state, fp8kit::Format to) {
    const auto path = static_cast<fp8kit::EncodePath>(state.range(0));
    if (!fp8kit::encode_path_supported(path)) {
        state.SkipWithError("path not supported on this CPU");
        return;
    }
    fp8kit::set_encode_path_limit(path);
    const fp8kit::Policy p = fp8kit::emu::profile_policy(fp8kit::Profile::cuda_satfinite, to).policy;
    const std::string taken = fp8kit::encode_path(to, fp8kit::Wide::f32, p);
    if (taken != path_name(path)) {
        state.SkipWithError(("encode_path reports " + taken).c_str());
        return;
    }
    const Buffer& in = input();
    Buffer& out = output();
    for (auto _ : state) {
        fp8kit::encode_array(to, fp8kit::Wide::f32, in.data, out.data, kElems, p);
        benchmark::DoNotOptimize(out.data);
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElems));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kElems * 5));
    state.SetLabel(taken + ", " + std::to_string(omp_get_max_threads()) + " threads");
}

// One core's compute rate, memory out of the way: 32 Ki elements (128 KiB in, 32 KiB out) stay
// in L2 and encode_array runs on one OpenMP thread (a second one would only spin at the
// barrier). Timed in CPU time of that thread, so other processes sharing the machine do not
// count against it.
void BM_encode_in_l2(benchmark::State& state, fp8kit::Format to) {
    const auto path = static_cast<fp8kit::EncodePath>(state.range(0));
    if (!fp8kit::encode_path_supported(path)) {
        state.SkipWithError("path not supported on this CPU");
        return;
    }
    fp8kit::set_encode_path_limit(path);
    const fp8kit::Policy p = fp8kit::emu::profile_policy(fp8kit::Profile::cuda_satfinite, to).policy;
    constexpr std::size_t n = std::size_t{1} << 15;
    const Buffer& in = input();
    Buffer& out = output();
    const int threads = omp_get_max_threads();
    omp_set_num_threads(1);
    for (auto _ : state) {
        fp8kit::encode_array(to, fp8kit::Wide::f32, in.data, out.data, n, p);
        benchmark::DoNotOptimize(out.data);
        benchmark::ClobberMemory();
    }
    omp_set_num_threads(threads);
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * n));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * n * 5));
    state.SetLabel(fp8kit::encode_path(to, fp8kit::Wide::f32, p));
}

// Streaming copy of the input's 256 MiB: 512 MiB of traffic counted (read + write).
void BM_copy(benchmark::State& state) {
    const Buffer& in = input();
    static Buffer dst(kBytes);
    const int threads = omp_get_max_threads();
    for (auto _ : state) {
#pragma omp parallel num_threads(threads)
        {
            const std::size_t t = static_cast<std::size_t>(omp_get_thread_num());
            const std::size_t n = static_cast<std::size_t>(omp_get_num_threads());
            const std::size_t lo = kBytes * t / n, hi = kBytes * (t + 1) / n;
            std::memcpy(dst.data + lo, in.data + lo, hi - lo);
        }
        benchmark::DoNotOptimize(dst.data);
        benchmark::ClobberMemory();
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElems));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBytes * 2));
}

// Read-only sum of the input's 256 MiB.
void BM_read_sum(benchmark::State& state) {
    const Buffer& in = input();
    const auto* w = reinterpret_cast<const std::uint64_t*>(in.data);
    const auto n = static_cast<std::ptrdiff_t>(kBytes / 8);
    for (auto _ : state) {
        std::uint64_t sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum)
        for (std::ptrdiff_t i = 0; i < n; ++i) sum += w[i];
        benchmark::DoNotOptimize(sum);
    }
    state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations() * kElems));
    state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations() * kBytes));
}

void register_all() {
    for (auto [name, fmt] : {std::pair{"encode_e4m3_satfinite", fp8kit::Format::e4m3},
                             std::pair{"encode_e5m2_satfinite", fp8kit::Format::e5m2}}) {
        auto* b = benchmark::RegisterBenchmark(name, BM_encode, fmt);
        b->ArgName("path");
        for (auto p : {fp8kit::EncodePath::avx512, fp8kit::EncodePath::avx2, fp8kit::EncodePath::scalar})
            b->Arg(static_cast<int>(p));
        b->UseRealTime()->Unit(benchmark::kMillisecond);
    }
    for (auto [name, fmt] : {std::pair{"encode_in_l2_e4m3_satfinite", fp8kit::Format::e4m3},
                             std::pair{"encode_in_l2_e5m2_satfinite", fp8kit::Format::e5m2}}) {
        auto* b = benchmark::RegisterBenchmark(name, BM_encode_in_l2, fmt);
        b->ArgName("path");
        for (auto p : {fp8kit::EncodePath::avx512, fp8kit::EncodePath::avx2, fp8kit::EncodePath::scalar})
            b->Arg(static_cast<int>(p));
        b->Unit(benchmark::kMicrosecond);
    }
    benchmark::RegisterBenchmark("copy", BM_copy)->UseRealTime()->Unit(benchmark::kMillisecond);
    benchmark::RegisterBenchmark("read_sum", BM_read_sum)->UseRealTime()->Unit(benchmark::kMillisecond);
}

}  // namespace

int main(int argc, char** argv) {
    register_all();
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 2;
    benchmark::AddCustomContext("omp_threads", std::to_string(omp_get_max_threads()));
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    return 0;
}
