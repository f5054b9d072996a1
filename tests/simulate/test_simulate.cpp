// MS-AMP simulation: hand-worked cases of the scale rule, the FP8 hop, the all-reduce and the O2
// step (the bit-exact comparison with an independent numpy transcription of MS-AMP's source is
// tests/python/test_simulate.py).
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "fp8kit/simulate.hpp"
#include "float_bits.hpp"

using namespace fp8kit::simulate;

namespace {

using fp8kit_test::bits;
const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();
}  // namespace

TEST_CASE("compute_scaling_factor: MS-AMP's steps in order", "[simulate]") {
    CHECK(compute_scaling_factor(1.0f, 1.0f, kE4M3Max, 0) == 256.0f);  // floor(log2 448) = 8
    CHECK(compute_scaling_factor(448.0f, 1.0f, kE4M3Max, 0) == 1.0f);
    CHECK(compute_scaling_factor(449.0f, 1.0f, kE4M3Max, 0) == 0.5f);  // exp -1: inverted
    CHECK(compute_scaling_factor(3e38f, 1.0f, kE4M3Max, 0) == std::ldexp(1.0f, -120));
    CHECK(compute_scaling_factor(1.0f, 1.0f, kE4M3Max, 2) == 64.0f);  // margin
    CHECK(compute_scaling_factor(1.0f, 1.0f, kF16Max, 0) == 32768.0f);
    CHECK(compute_scaling_factor(1.0f, 1.0f, kE5M2Max, 0) == 32768.0f);
    // amax 0, negative, NaN: the old scale (exp is +Inf or NaN, so not inverted)
    CHECK(compute_scaling_factor(0.0f, 4.0f, kE4M3Max, 0) == 4.0f);
    CHECK(compute_scaling_factor(-0.0f, 4.0f, kE4M3Max, 0) == 4.0f);  // 1/-0 = -Inf, q = -Inf, log2 NaN
    CHECK(compute_scaling_factor(-2.0f, 4.0f, kE4M3Max, 0) == 4.0f);
    CHECK(compute_scaling_factor(kNaN, 4.0f, kE4M3Max, 0) == 4.0f);
    // +-Inf: q = +-0, exp = -Inf, the old scale is kept by steps 4/5 and then inverted by step 6
    CHECK(compute_scaling_factor(kInf, 4.0f, kE4M3Max, 0) == 0.25f);
    CHECK(compute_scaling_factor(-kInf, 4.0f, kE4M3Max, 0) == 0.25f);
    // tiny and subnormal amax: 448/amax overflows float32, the Inf scale is kept
    CHECK(compute_scaling_factor(1e-35f, 1.0f, kE4M3Max, 0) == std::ldexp(1.0f, 125));
    CHECK(std::isinf(compute_scaling_factor(1e-36f, 1.0f, kE4M3Max, 0)));
    CHECK(std::isinf(compute_scaling_factor(1e-40f, 1.0f, kE4M3Max, 0)));
    CHECK(std::isinf(compute_scaling_factor(1e-45f, 1.0f, kE4M3Max, 0)));
    // torch's float32 log2: q = 255.99998 (amax = 1.75 + 1 ulp) has log2 8 - 9e-8, which rounds to
    // 8.0 in float32: the scale is 256, not the exact floor's 128, and amax * scale exceeds 448.
    float a1;
    const std::uint32_t a1_bits = 0x3FE00001u;
    std::memcpy(&a1, &a1_bits, 4);
    CHECK(compute_scaling_factor(a1, 1.0f, kE4M3Max, 0) == 256.0f);
    CHECK(e4m3_to_float(to_e4m3_satfinite(a1 * 256.0f)) == 448.0f);  // the saturating cast clamps
    float a2;
    const std::uint32_t a2_bits = 0x3FE00002u;  // q = 255.99995: log2 rounds below 8
    std::memcpy(&a2, &a2_bits, 4);
    CHECK(compute_scaling_factor(a2, 1.0f, kE4M3Max, 0) == 128.0f);
}

TEST_CASE("FP8 hop: saturating E4M3 sum, and half == float32 on every pair", "[simulate]") {
    const std::uint8_t c448 = to_e4m3_satfinite(448.0f), c1 = to_e4m3_satfinite(1.0f);
    CHECK(fp8_add(c448, c448, HopArith::half) == c448);  // 896 saturates
    CHECK(e4m3_to_float(fp8_add(c1, to_e4m3_satfinite(0.0625f), HopArith::half)) ==
          1.0f);  // 1.0625 -> 1 (ties to even)
    CHECK(e4m3_to_float(fp8_add(c1, to_e4m3_satfinite(0.125f), HopArith::half)) == 1.125f);
    // The float32 sum of two E4M3 values rounded once to half, then to E4M3, always gives the
    // E4M3 rounding of the float32 sum: the two NCCL variants agree on all 65536 pairs.
    int differ = 0;
    for (int a = 0; a < 256; ++a)
        for (int b = 0; b < 256; ++b) {
            const auto x = fp8_add(std::uint8_t(a), std::uint8_t(b), HopArith::half);
            const auto y = fp8_add(std::uint8_t(a), std::uint8_t(b), HopArith::float32);
            differ += x != y;
        }
    CHECK(differ == 0);
}

TEST_CASE("all-reduce: hand-worked DDP sum of two ranks", "[simulate]") {
    // amax 2 -> sf = 2^floor(log2 224) = 128, times fl32(1/sqrt 2); scale_inv = fl32(1/sf) / 2
    auto src = explicit_ranks({{2.0f, 0.5f, 0.0f}, {1.0f, -0.5f, 0.0f}});
    const auto r = fp8_allreduce(*src, {Order::rank, Order::tree});
    const float sf = 128.0f * static_cast<float>(1.0 / std::sqrt(2.0));
    CHECK(r.amax == 2.0f);
    CHECK(bits(r.scale) == bits(sf));
    CHECK(bits(r.scale_inv) == bits((1.0f / sf) / 2.0f));
    // 2*sf = 181.02 -> 176; 1*sf = 90.5 -> 88; 176 + 88 = 264 -> 256 (spacing 32, ties to even)
    CHECK(e4m3_to_float(r.orders[0].codes[0]) == 256.0f);
    CHECK(r.orders[0].values[2] == 0.0f);
    CHECK(r.orders[0].hop_overflows == 0);
    CHECK(r.cast_nonzero == 4);
}

TEST_CASE("all-reduce: partial sums past 448 saturate and depend on the order", "[simulate]") {
    // non-DDP: sf from amax 3.5 = 128: ranks 448, 448, -448, -448 in scaled units
    auto src = explicit_ranks({{3.5f}, {3.5f}, {-3.5f}, {-3.5f}});
    AllReduceOptions o;
    o.path = Path::non_ddp;
    const auto r = fp8_allreduce(*src, {Order::rank, Order::tree, Order::ring}, o);
    CHECK(r.scale == 128.0f);
    // rank: (448+448)=448 sat, +(-448)=0, +(-448)=-448; tree: (896->448)+(-896->-448)=0
    CHECK(e4m3_to_float(r.orders[0].codes[0]) == -448.0f);
    CHECK(e4m3_to_float(r.orders[1].codes[0]) == 0.0f);
    CHECK(r.orders[0].hop_overflows == 1);
    CHECK(r.orders[1].hop_overflows == 2);
    CHECK(r.order_differs == 1);
    CHECK(r.extra_margin == 1);
}

TEST_CASE("all-reduce: NaN and Inf amax, zero gradient", "[simulate]") {
    auto nan = explicit_ranks({{1.0f, kNaN}, {1.0f, 1.0f}});
    const auto a = fp8_allreduce(*nan, {Order::rank});
    CHECK(std::isinf(a.amax));
    // Inf amax: old scale 1 kept, then inverted: 1; times 1/sqrt(2)
    CHECK(bits(a.scale) == bits(static_cast<float>(1.0 / std::sqrt(2.0))));
    CHECK(std::isnan(a.orders[0].values[1]));
    auto zero = explicit_ranks({{0.0f, 0.0f}, {0.0f, -0.0f}});
    const auto z = fp8_allreduce(*zero, {Order::ring});
    CHECK(z.amax == 0.0f);
    CHECK(z.orders[0].values[0] == 0.0f);
    CHECK(z.orders[0].rel_error == 0.0);
}

TEST_CASE("all-reduce: the split model averages to the gradient and N up to 1024", "[simulate]") {
    std::vector<float> g(500);
    for (std::size_t i = 0; i < g.size(); ++i) g[i] = std::sin(0.1f * float(i)) * 1e-3f;
    for (int n : {2, 7, 64, 1024}) {
        auto src = split_ranks(g, n, 1.0, 9);
        std::vector<double> sum(g.size(), 0.0);
        std::vector<float> buf(g.size());
        for (int r = 0; r < n; ++r) {
            src->fill(r, 0, g.size(), buf.data());
            for (std::size_t i = 0; i < g.size(); ++i) sum[i] += buf[i];
        }
        for (std::size_t i = 0; i < g.size(); ++i)
            CHECK(std::fabs(sum[i] / n - g[i]) <= 1e-6 * std::fabs(g[i]) + 1e-12);
        const auto r = fp8_allreduce(*src, {Order::rank, Order::ring, Order::tree});
        CHECK(r.ranks == n);
        CHECK(r.orders.size() == 3);
        CHECK(r.orders[0].sqnr_db > 0);
    }
    CHECK_THROWS_AS(split_ranks(g, 0, 1.0, 0), std::invalid_argument);
    CHECK_THROWS_AS(explicit_ranks({{1.0f}, {1.0f, 2.0f}}), std::invalid_argument);
}

TEST_CASE("O2: a first step from zero states by hand", "[simulate]") {
    AdamHyper h;
    h.weight_decay = 0;
    MsampAdam a({1.0f, -1.0f}, {}, {}, h, 0, false);
    a.step({0.5f, -0.25f});
    // m = 0.1 g; v = 0.001 g^2 (float32); amax_m = 0.05 -> scale 2^13 (448/0.05 = 8960)
    CHECK(a.m_scale() == 8192.0f);
    CHECK(a.v_scale() == compute_scaling_factor(0.001f * 0.25f, 1.0f, kF16Max, 0));
    const float m0 = 0.9f * 0.0f * 1.0f + (1.f - 0.9f) * 0.5f;
    CHECK(a.m_codes()[0] == to_e4m3_satfinite(m0 * 8192.0f));
    // with bias correction the first step moves each weight by about lr
    CHECK(std::fabs(a.weight()[0] - (1.0f - 3e-3f)) < 1e-5f);
    CHECK(std::fabs(a.ref_weight()[1] - (-1.0f + 3e-3f)) < 1e-5f);
    CHECK_THROWS_AS(a.step({1.0f}), std::invalid_argument);
}

TEST_CASE("TE FusedAdam: a first step from fresh FP8/FP16 states by hand", "[simulate]") {
    // beta1 = beta2 = 0.5, eps = 1, lr = 1, no decay: every kernel value is exact.
    // g = 1: m = 0.5, v = 0.5, bc1 = bc2 = 0.5, denom = sqrt(1) + 1 = 2, p = 1 - 0.5 = 0.5.
    const AdamHyper h{1.0, 0.5, 0.5, 1.0, 0.0, true};
    TeFusedAdam a({1.0f, 0.0f}, {}, {}, h, 0, {StateDtype::fp8, StateDtype::f16, StateDtype::f32});
    CHECK(a.m_state().bits == std::vector<std::uint32_t>{0, 0});  // quantize_(zeros), scale 1
    a.step({1.0f, 0.0f});
    CHECK(a.weight() == std::vector<float>{0.5f, 0.0f});
    CHECK(a.ref_weight() == a.weight());
    // FP8: scale = absmax / 448, quantizer scale ~ 896: 0.5 * 896 -> 448 (code 0x7E)
    CHECK(a.m_state().bits == std::vector<std::uint32_t>{0x7E, 0});
    CHECK(bits(a.m_state().scale) == bits(0.5f / 448.0f));
    // FP16: scale = absmax / 32752: 0.5 / scale ~ 32752 = 0x77FF
    CHECK(a.v_state().bits == std::vector<std::uint32_t>{0x77FF, 0});
    CHECK(bits(a.v_state().scale) == bits(0.5f / 32752.0f));
    const auto r = report(a);
    CHECK(r.m_underflow == 0);
    CHECK(r.steps == 1);
}

TEST_CASE("TE FusedAdam: amax 0 gives an FP8 state of NaN, an FP16 state of zeros", "[simulate]") {
    const AdamHyper h{1e-3, 0.9, 0.999, 1e-8, 0.01, true};
    TeFusedAdam a({1.0f, -2.0f}, {}, {}, h, 0, {StateDtype::fp8, StateDtype::f16, StateDtype::f16});
    a.step({0.0f, 0.0f});
    // scale = 0 / 448 = 0, quantizer scale 1 / 0 = Inf, 0 * Inf = NaN -> 0x7F, scale_inv = 0
    CHECK(a.m_state().bits == std::vector<std::uint32_t>{0x7F, 0x7F});
    CHECK(a.m_state().fp8_scale_inv == 0.0f);
    CHECK(std::isnan(a.m_dequantized()[0]));
    // FP16: rscale = where(scale > 0, 1 / scale, 0) = 0: zeros, dequantized 0 * 0 = 0
    CHECK(a.v_state().bits == std::vector<std::uint32_t>{0, 0});
    CHECK(a.v_dequantized() == std::vector<float>{0.0f, 0.0f});
    a.step({1.0f, 1.0f});  // the NaN moment reaches the weights
    CHECK(std::isnan(a.weight()[0]));
    CHECK_FALSE(std::isnan(a.ref_weight()[0]));
    CHECK_THROWS_AS(a.step({1.0f}), std::invalid_argument);
    CHECK_THROWS_AS(TeFusedAdam({1.0f}, {}, {}, h, 0, {StateDtype::fp8, StateDtype::fp8, StateDtype::bf16}),
                    std::invalid_argument);
    CHECK(parse_state_dtype("bf16") == StateDtype::bf16);
    CHECK_THROWS_AS(parse_state_dtype("fp4"), std::invalid_argument);
}

TEST_CASE("O2: step(grad, ref_grad) feeds the simulated side and the FP32 reference separately", "[simulate]") {
    const AdamHyper h;
    // ref's second entry has the other sign: with gradients constant over the steps, Adam's update
    // is about lr * sign(g), so same-signed gradients could give the same weights.
    const std::vector<float> w{0.5f, -0.25f, 1.0f, 0.0f}, g{0.5f, -0.25f, 1e-3f, 2.0f}, ref{0.4f, 0.3f, 2e-3f, 1.5f};
    auto check = [&](auto make) {
        auto both = make(), sim_only = make(), ref_only = make();
        for (int s = 0; s < 3; ++s) {
            both.step(g, ref);
            sim_only.step(g);
            ref_only.step(ref);
        }
        CHECK(both.weight() == sim_only.weight());  // the simulated side saw only g
        CHECK(both.m_dequantized() == sim_only.m_dequantized());
        CHECK(both.ref_weight() == ref_only.ref_weight());  // the reference saw only ref
        CHECK(both.ref_m() == ref_only.ref_m());
        CHECK(both.ref_weight() != sim_only.ref_weight());
        CHECK_THROWS_AS(both.step(g, {1.0f}), std::invalid_argument);
    };
    check([&] { return MsampAdam(w, {}, {}, h, 0, true); });
    check([&] { return TeFusedAdam(w, {}, {}, h, 0, {StateDtype::fp8, StateDtype::f16, StateDtype::f32}); });
    CHECK(parse_optimizer_grad("fp8-allreduce") == OptimizerGrad::fp8_allreduce);
    CHECK_THROWS_AS(parse_optimizer_grad("fp8"), std::invalid_argument);
}

TEST_CASE("allreduce: stalled partial sums are counted", "[simulate]") {
    // Element 0: 256 then two 4s. E4M3's spacing at 256 is 32, so 256 + 4 rounds back to 256 at
    // both hops, in every order (the tree adds 256 + 4 first too). Element 1: 1 + 1 + 1 never stalls.
    auto src = explicit_ranks({{256.0f, 1.0f}, {4.0f, 1.0f}, {4.0f, 1.0f}});
    AllReduceOptions o;
    o.path = Path::non_ddp;
    const auto r = fp8_allreduce(*src, {Order::rank, Order::tree}, o);
    REQUIRE(r.scale == 1.0f);
    for (const auto& x : r.orders) {
        INFO(name(x.order));
        CHECK(x.hops == 4);
        CHECK(x.stalled_hops == 2);
        CHECK(x.hop_overflows == 0);
    }
}

TEST_CASE("allreduce: the weight gradient rounded to its dtype first (MS-AMP's wgrad_qtype)", "[simulate]") {
    const float v[] = {1.0f + 0x1p-10f, 1e-8f, 70000.0f, -3.0f};
    std::vector<float> g(std::begin(v), std::end(v));
    CHECK(parse_wgrad_dtype("fp16") == WgradDtype::f16);
    CHECK_THROWS_WITH(parse_wgrad_dtype("fp8"), Catch::Contains("fp32, fp16 or bf16"));
    std::vector<float> out(4);
    rounded_ranks(explicit_ranks({g}), WgradDtype::f16)->fill(0, 0, 4, out.data());
    CHECK(out[0] == 1.0f + 0x1p-10f);  // representable in float16
    CHECK(out[1] == 0.0f);             // below half of float16's smallest subnormal 2^-24
    CHECK(std::isinf(out[2]));         // above 65504: Inf, as torch's .half()
    CHECK(out[3] == -3.0f);
    rounded_ranks(explicit_ranks({g}), WgradDtype::bf16)->fill(0, 0, 4, out.data());
    CHECK(out[0] == 1.0f);  // bfloat16 keeps 7 fraction bits: 1 + 2^-10 rounds to 1
    CHECK(out[1] != 0.0f);
    CHECK(std::fabs(out[1] - 1e-8f) <= 1e-8f * 0x1p-8f);  // within half a bfloat16 ulp
    CHECK(out[2] == 70144.0f);                            // nearest bfloat16 (spacing 512 at 2^16)
    rounded_ranks(explicit_ranks({g}), WgradDtype::f32)->fill(0, 0, 4, out.data());
    CHECK(out == g);
}

namespace {

// te_adam_probe's output (scripts/gpu/te_adam_probe.cu: TE's AdamW update built and run on a GPU).
struct ProbeSet {
    float lr, beta1, beta2, eps, decay;
    std::vector<float> p0, m0, v0;
    std::vector<std::array<std::vector<float>, 4>> steps;  // g, p, m, v after the step
};

std::vector<ProbeSet> read_probe(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f != nullptr);
    std::uint32_t head[4] = {};
    REQUIRE(std::fread(head, 4, 4, f) == 4);
    REQUIRE(head[0] == 0x50414554u);
    const std::size_t n = head[3];
    auto read = [&](std::vector<float>& v) {
        v.resize(n);
        REQUIRE(std::fread(v.data(), 4, n, f) == n);
    };
    std::vector<ProbeSet> sets(head[1]);
    for (auto& s : sets) {
        REQUIRE(std::fread(&s.lr, 4, 5, f) == 5);
        read(s.p0), read(s.m0), read(s.v0);
        s.steps.resize(head[2]);
        for (auto& st : s.steps)
            for (auto& a : st) read(a);
    }
    std::fclose(f);
    return sets;
}

std::size_t differing(const std::vector<float>& a, const std::vector<float>& b) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += bits(a[i]) != bits(b[i]);
    return d;
}

}  // namespace

TEST_CASE("TE FusedAdam update as the GPU computes it, in TE's fast-math build and in nvcc's default build",
          "[simulate]") {
    // tests/golden/te_adam: 512 elements x 4 hyperparameter sets x 5 steps, on an H200 (README.md);
    // the fourth set's gradients and states lie near and below 2^-126, where the fast-math build
    // flushes. Every value of p, m and v must be the GPU's, in both builds.
    const std::pair<const char*, TeBuild> builds[] = {{"fast_math", TeBuild::fast_math},
                                                      {"default", TeBuild::nvcc_default}};
    for (const auto& [file, build] : builds) {
        const auto sets = read_probe(std::string(FP8KIT_GOLDEN_DIR) + "/te_adam/adam_" + file + ".bin");
        REQUIRE(sets.size() == 4);
        for (const auto& s : sets) {
            AdamHyper h;
            h.lr = s.lr, h.beta1 = s.beta1, h.beta2 = s.beta2, h.eps = s.eps, h.weight_decay = s.decay;
            TeFusedAdam a(s.p0, s.m0, s.v0, h, 0, {StateDtype::f32, StateDtype::f32, StateDtype::f32, build});
            for (std::size_t k = 0; k < s.steps.size(); ++k) {
                const auto& [g, p, m, v] = s.steps[k];
                a.step(g, g);
                INFO(file << " lr " << s.lr << " eps " << s.eps << " step " << k + 1);
                CHECK(differing(a.ref_m(), m) == 0);
                CHECK(differing(a.ref_v(), v) == 0);
                CHECK(differing(a.ref_weight(), p) == 0);
            }
        }
    }
}

TEST_CASE("TE FusedAdam: the two builds differ where TE's fast math does", "[simulate]") {
    // One element whose master weight differs by the approximate division (the golden set 0 shows
    // thousands): the default build must not be used for TE's own build, nor the reverse.
    const auto sets = read_probe(std::string(FP8KIT_GOLDEN_DIR) + "/te_adam/adam_fast_math.bin");
    const auto& s = sets.at(0);
    AdamHyper h;
    h.lr = s.lr, h.beta1 = s.beta1, h.beta2 = s.beta2, h.eps = s.eps, h.weight_decay = s.decay;
    TeFusedAdam fast(s.p0, s.m0, s.v0, h, 0, {StateDtype::f32, StateDtype::f32, StateDtype::f32, TeBuild::fast_math});
    TeFusedAdam ieee(s.p0, s.m0, s.v0, h, 0,
                     {StateDtype::f32, StateDtype::f32, StateDtype::f32, TeBuild::nvcc_default});
    const auto& g = std::get<0>(s.steps[0]);
    fast.step(g, g);
    ieee.step(g, g);
    CHECK(differing(fast.ref_weight(), ieee.ref_weight()) > 100);
    CHECK(name(TeBuild::fast_math) == "fast-math");
    CHECK(parse_te_build("nvcc-default") == TeBuild::nvcc_default);
    CHECK_THROWS_WITH(parse_te_build("fast"), Catch::Contains("fast-math"));
}

namespace {

// msamp_adam_probe's output (scripts/gpu/msamp_adam_probe.cu: MS-AMP's adamw_fp8_stage1/stage2
// kernels built with MS-AMP's flags and LBAdamW.adamw_fn's loop, run on a GPU).
struct MsampProbeStep {
    std::vector<float> g, p;
    float inv_m, inv_v, amax_m, amax_v, scale_m, scale_v;
    std::vector<std::uint16_t> m, v;  // E4M3 codes or FP16 bits
};
struct MsampProbeSet {
    double lr, beta1, beta2, eps, weight_decay;
    std::uint32_t m_dtype, v_dtype;  // 0 torch.uint8 (E4M3), 1 torch.float16
    std::vector<float> p0;
    std::vector<MsampProbeStep> steps;
};

std::vector<MsampProbeSet> read_msamp_probe(const std::string& path) {
    std::FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f != nullptr);
    std::uint32_t head[4] = {};
    REQUIRE(std::fread(head, 4, 4, f) == 4);
    REQUIRE(head[0] == 0x5041534Du);
    const std::size_t n = head[3];
    auto read = [&](auto& v) {
        v.resize(n);
        REQUIRE(std::fread(v.data(), sizeof(v[0]), n, f) == n);
    };
    std::vector<MsampProbeSet> sets(head[1]);
    for (auto& s : sets) {
        REQUIRE(std::fread(&s.lr, 8, 5, f) == 5);
        REQUIRE(std::fread(&s.m_dtype, 4, 2, f) == 2);
        read(s.p0);
        s.steps.resize(head[2]);
        for (auto& st : s.steps) {
            read(st.g);
            REQUIRE(std::fread(&st.inv_m, 4, 6, f) == 6);
            read(st.p), read(st.m), read(st.v);
        }
    }
    std::fclose(f);
    return sets;
}

template <typename T>
std::size_t differing_codes(const std::vector<T>& a, const std::vector<T>& b) {
    std::size_t d = 0;
    for (std::size_t i = 0; i < a.size(); ++i) d += a[i] != b[i];
    return d;
}

}  // namespace

TEST_CASE("MS-AMP LBAdamW as the GPU computes it: states, scales and weights of MS-AMP's build, bit for bit",
          "[simulate]") {
    // tests/golden/msamp_adam: 192 elements x 12 parameter sets (E4M3/FP16 and FP16/FP16 states,
    // each with three hyperparameter sets, one with subnormal and overflowing gradients and two
    // with tiny moments, where the moments' FMAs round differently from the separate multiply and
    // add) x 6 steps, on an H200 (README.md). The probe's master weight is FP32.
    const auto sets = read_msamp_probe(std::string(FP8KIT_GOLDEN_DIR) + "/msamp_adam/adam_192.bin");
    REQUIRE(sets.size() == 12);
    std::size_t fp8_sets = 0;
    for (const auto& s : sets) {
        const AdamHyper h{s.lr, s.beta1, s.beta2, s.eps, s.weight_decay, true};
        const MsampStates states{s.m_dtype == 0 ? StateDtype::fp8 : StateDtype::f16,
                                 s.v_dtype == 0 ? StateDtype::fp8 : StateDtype::f16};
        fp8_sets += states.exp_avg == StateDtype::fp8;
        MsampAdam a(s.p0, {}, {}, h, 0, false, states);
        for (std::size_t k = 0; k < s.steps.size(); ++k) {
            const auto& st = s.steps[k];
            a.step(st.g);
            INFO("exp_avg " << name(states.exp_avg) << " lr " << s.lr << " decay " << s.weight_decay << " step "
                            << k + 1);
            CHECK(bits(a.m_scale()) == bits(st.scale_m));
            CHECK(bits(a.v_scale()) == bits(st.scale_v));
            CHECK(differing_codes(a.m_codes(), st.m) == 0);
            CHECK(differing_codes(a.v_bits(), st.v) == 0);
            CHECK(differing(a.weight(), st.p) == 0);
        }
    }
    CHECK(fp8_sets == 6);
}

TEST_CASE("MS-AMP LBAdamW: state dtypes other than fp8 and fp16 are refused", "[simulate]") {
    const AdamHyper h;
    CHECK_THROWS_WITH(MsampAdam({1.0f}, {}, {}, h, 0, false, {StateDtype::bf16, StateDtype::f16}),
                      Catch::Contains("exp_avg dtype bf16"));
    CHECK_THROWS_WITH(MsampAdam({1.0f}, {}, {}, h, 0, false, {StateDtype::fp8, StateDtype::f32}),
                      Catch::Contains("exp_avg_sq dtype fp32"));
}
