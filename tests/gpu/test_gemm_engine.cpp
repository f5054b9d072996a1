// The GEMM engine of cuda/engine (what `--device cuda` of fp8kit gemm and validate --gemm, and
// device='cuda' of Python's fp8kit.gemm / validate_gemm reach) against lib:
// - fp8kit::cuda::gemm_binary64_sums equals lib's gemm::binary64_sums bit for bit (the same rule,
//   numerics::gemm::binary64_add_product / _run, in the same k order);
// - gemm::compare through the GPU device gives the CPU's report: the same mismatches per model,
//   closest model, differences, error and bound violations.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/cuda/engine.hpp"
#include "fp8kit/cuda/gemm.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/gemm.hpp"

namespace gm = fp8kit::gemm;
using fp8kit::Format;

namespace {

struct Operands {
    std::vector<std::uint8_t> a, b;
    std::vector<float> sa, sb;
    gm::GemmRequest rq;
};

float value_of(Format f, std::uint8_t c) {
    const auto bits = static_cast<std::uint32_t>(fp8kit::emu::decode(f, fp8kit::Wide::f32, c));
    float x;
    std::memcpy(&x, &bits, 4);
    return x;
}

// Random codes (every code, NaN/Inf included when `special`), scales per kind.
Operands make(Format fa, Format fb, std::size_t m, std::size_t n, std::size_t k, gm::ScaleKind kind, bool special,
              std::uint32_t seed) {
    std::mt19937 g(seed);
    Operands o;
    auto codes = [&](Format f, std::size_t rows) {
        std::vector<std::uint8_t> v(rows * k);
        for (auto& c : v) {
            do c = static_cast<std::uint8_t>(g() % 256);
            while (!special && !std::isfinite(value_of(f, c)));
        }
        return v;
    };
    o.a = codes(fa, m);
    o.b = codes(fb, n);
    std::uniform_real_distribution<float> u(0.01f, 4.0f);
    o.sa.resize(gm::scale_count_for(kind, false, m, k));
    o.sb.resize(gm::scale_count_for(kind, true, n, k));
    for (auto& s : o.sa) s = u(g);
    for (auto& s : o.sb) s = u(g);
    o.rq.a = {o.a.data(), m, fa, kind, o.sa.data(), o.sa.size()};
    o.rq.b = {o.b.data(), n, fb, kind, o.sb.data(), o.sb.size()};
    o.rq.k = k;
    return o;
}

bool same_double(double x, double y) {
    if (std::isnan(x) || std::isnan(y)) return std::isnan(x) && std::isnan(y);  // payloads differ by processor
    std::uint64_t bx, by;
    std::memcpy(&bx, &x, 8);
    std::memcpy(&by, &y, 8);
    return bx == by;
}

}  // namespace

TEST_CASE("cuda gemm_binary64_sums equals lib's binary64_sums bit for bit", "[gpu][gemm]") {
    struct Shape {
        std::size_t m, n, k;
    };
    std::uint32_t seed = 91;
    std::size_t cases = 0;
    for (const Shape sh : {Shape{1, 1, 1}, Shape{70, 33, 16}, Shape{65, 130, 129}, Shape{17, 5, 300},
                           Shape{64, 64, 1024}, Shape{9, 70, 8192}})
        for (gm::ScaleKind kind : {gm::ScaleKind::tensor, gm::ScaleKind::row, gm::ScaleKind::block})
            for (bool special : {false, true}) {
                const Format fa = seed % 2 ? Format::e4m3 : Format::e5m2, fb = seed % 3 ? Format::e4m3 : Format::e5m2;
                Operands o = make(fa, fb, sh.m, sh.n, sh.k, kind, special, seed++);
                const gm::Binary64Sums cpu = gm::binary64_sums(o.rq), gpu = fp8kit::cuda::gemm_sums_on_gpu(o.rq);
                REQUIRE(gpu.sum.size() == cpu.sum.size());
                std::size_t bad = 0;
                for (std::size_t e = 0; e < cpu.sum.size(); ++e)
                    bad += !same_double(cpu.sum[e], gpu.sum[e]) || !same_double(cpu.magnitude[e], gpu.magnitude[e]);
                INFO(sh.m << "x" << sh.n << "x" << sh.k << " kind " << static_cast<int>(kind) << " special "
                          << special);
                CHECK(bad == 0);
                ++cases;
            }
    CHECK(cases == 36);
}

TEST_CASE("validate --gemm through the GPU engine gives the CPU's report", "[gpu][gemm]") {
    fp8kit::cuda::use_gpu();
    const gm::GemmDevice dev = gm::select_gemm_device(fp8kit::Device::cuda);
    REQUIRE(dev.gpu != nullptr);
    Operands o = make(Format::e4m3, Format::e4m3, 48, 40, 1024, gm::ScaleKind::tensor, false, 7);
    for (const char* made_with : {"sm90", "sm90-fast", "fp32", "exact"}) {
        auto d = gm::gemm(o.rq, gm::parse_model(made_with));
        d[5] ^= 1;  // one element off every model
        const gm::GemmComparison cpu = gm::compare(o.rq, d), gpu = gm::compare(o.rq, d, dev);
        INFO(made_with << "\nCPU:\n" << cpu.summary() << "GPU:\n" << gpu.summary());
        CHECK(gpu.device == "cuda");
        REQUIRE(gpu.models.size() == cpu.models.size());
        for (std::size_t q = 0; q < cpu.models.size(); ++q) {
            CHECK(gpu.models[q].model == cpu.models[q].model);
            CHECK(gpu.models[q].mismatches == cpu.models[q].mismatches);
        }
        CHECK(gpu.closest == cpu.closest);
        for (int c = 0; c < gm::kDiffClasses; ++c) CHECK(gpu.counts[c] == cpu.counts[c]);
        CHECK(gpu.max_abs_error == cpu.max_abs_error);
        CHECK(gpu.bound_violations == cpu.bound_violations);
    }
    // The models the GPU has give lib's bits through the engine too.
    for (const char* m : {"sm90", "fp32", "deepseek-128"})
        CHECK(dev.run(o.rq, gm::parse_model(m)) == gm::gemm(o.rq, gm::parse_model(m)));
}
