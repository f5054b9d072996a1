// NVFP4 rules of numerics/scale_rules.hpp: the edge cases TransformerEngine's kernel code fixes
// (core_nvfp4.cuh: fminf caps, the 1-for-0 rule, a block scale that rounds to E4M3 0) and
// torchao's (E4M3_EPS floor). Bit-exact agreement with TE's and torchao's own Python on real and
// random tensors is tests/python/test_nvfp4.py.
#include <catch2/catch.hpp>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "fp8kit/numerics/scale_rules.hpp"

using namespace fp8kit::numerics;

TEST_CASE("NVFP4 (TE) global encode scale: 2688 / amax, capped, 1 for 0 and Inf", "[numerics][nvfp4]") {
    CHECK(nvfp4_te_global_encode(0.0f) == 1.0f);                                        // amax 0
    CHECK(nvfp4_te_global_encode(INFINITY) == 1.0f);                                    // 2688 / Inf = 0
    CHECK(nvfp4_te_global_encode(1e-40f) == FLT_MAX);                                   // Inf quotient -> FLT_MAX
    CHECK(nvfp4_te_global_encode(std::numeric_limits<float>::quiet_NaN()) == FLT_MAX);  // fminf drops NaN
    CHECK(nvfp4_te_global_encode(2688.0f) == 1.0f);
    CHECK(nvfp4_te_global_encode(1.0f) == 2688.0f);
    CHECK(nvfp4_te_global_encode(3.0f) == 2688.0f / 3.0f);  // one float32 division
}

TEST_CASE("NVFP4 (TE) constant quotients by their bits are the float32 divisions", "[numerics][nvfp4]") {
    volatile float one = 1.0f, six = 6.0f, max = kNvfp4ScaleMax;  // divided at run time
    CHECK(bits_of(one_sixth()) == bits_of(one / six));
    CHECK(bits_of(one_over_2688()) == bits_of(one / max));
}

TEST_CASE("NVFP4 (TE) block scale: the block holding the tensor's amax gets 448", "[numerics][nvfp4]") {
    for (float amax : {1e-30f, 0.37f, 1.0f, 5.5f, 1000.0f, 3.0e38f}) {
        INFO(amax);
        const Nvfp4Block b = nvfp4_te_block(amax, nvfp4_te_global_encode(amax), amax);
        CHECK(b.scale_code == 0x7E);  // E4M3 448
        // Its elements: amax * encode lands on 6 up to float32 rounding, so E2M1 max.
        CHECK(std::fabs(amax * b.encode - 6.0f) < 6.0f * 1e-5f);
    }
}

TEST_CASE("NVFP4 (TE) block scale that rounds to E4M3 zero: encode FLT_MAX, decode 0", "[numerics][nvfp4]") {
    const float s_enc = nvfp4_te_global_encode(1.0f);  // 2688
    // amax * 2688/6 < 2^-10 (half the smallest E4M3 subnormal 2^-9) rounds to 0.
    const Nvfp4Block b = nvfp4_te_block(1e-9f, s_enc, 1.0f);
    CHECK(b.scale_code == 0);
    CHECK(b.encode == FLT_MAX);
    CHECK(b.decode == 0.0f);
    // All-zero block: the same.
    CHECK(nvfp4_te_block(0.0f, s_enc, 1.0f).scale_code == 0);
    // Inf block amax: fminf caps the product at FLT_MAX, E4M3 satfinite gives 448.
    CHECK(nvfp4_te_block(INFINITY, 1.0f, INFINITY).scale_code == 0x7E);
}

TEST_CASE("NVFP4 (torchao) block scale stays at or above E4M3's smallest normal", "[numerics][nvfp4]") {
    const Nvfp4Block tiny = nvfp4_torchao_block(1e-9f, 1.0f);
    CHECK(tiny.scale_code == 0x08);  // 2^-6: clamp(min=finfo(float8_e4m3fn).tiny)
    CHECK(nvfp4_torchao_block(1.0f, 1.0f).scale_code == 0x7E);
    // A zero tensor: per_tensor_scale 0, 0 / 0 is NaN, which the clamp keeps and E4M3 makes 0x7F.
    CHECK(nvfp4_torchao_block(0.0f, 0.0f).scale_code == 0x7F);
}

TEST_CASE("rule_scale dispatches the NVFP4 rules with the tensor's amax", "[numerics][nvfp4]") {
    ScaleParams p = make_scale_params(ScaleRule::nvfp4_te, Format::e2m1, 0.0, false, FLT_MAX, 0);
    set_global_amax(p, 10.0f);
    const BlockScale s = rule_scale(p, 2.5f);
    const Nvfp4Block b = nvfp4_te_block(2.5f, nvfp4_te_global_encode(10.0f), 10.0f);
    CHECK((s.code == b.scale_code && s.scale == b.encode && s.scale_inv == b.decode));
    CHECK(rule_uses_global_amax(ScaleRule::nvfp4_torchao));
    CHECK_FALSE(rule_uses_global_amax(ScaleRule::mx_roundup));
}

// The NVFP4 rules' steps, transcribed from their sources in one piece (TE core_nvfp4.cuh and
// quantization_nvfp4.py; torchao nvfp4_tensor.py), each step computed where the source computes
// it, per block: the reference for rule_scale, which splits each rule into the numbers of the
// tensor (set_global_amax), the byte of a block, and the numbers of the byte (rule_nvfp4_byte,
// rule_nvfp4_from_byte), so that kernels can tabulate the last over the bytes.
namespace {

float fminf_te(float v) { return is_nan(v) ? kFltMax : (v < kFltMax ? v : kFltMax); }

std::uint8_t clamp_e4m3(float v) {
    const float tiny = 0x1p-6f;
    return e4m3_satfinite(is_nan(v) ? v : (v < tiny ? tiny : (v > 448.0f ? 448.0f : v)));
}

Nvfp4Block te_in_one(float block_amax, float global_amax) {
    const float s_enc = nvfp4_te_global_encode(global_amax);
    const float s_dec = 1.0f / s_enc;
    const std::uint8_t code = e4m3_satfinite(fminf_te(block_amax * (s_enc * one_sixth())));
    const float enc = fminf_te(1.0f / (e4m3_value(code) * s_dec));
    return {code, enc, e4m3_value(code) * global_amax * one_over_2688()};
}

Nvfp4Block torchao_in_one(float block_amax, float global_amax) {
    const float pts = global_amax / 2688.0f;
    const std::uint8_t code = clamp_e4m3(block_amax / 6.0f / pts);
    return {code, 1.0f / pts / e4m3_value(code), e4m3_value(code) * pts};
}

Nvfp4Block single_in_one(float block_amax) {
    const std::uint8_t code = clamp_e4m3(block_amax / 6.0f);
    return {code, 1.0f / e4m3_value(code), e4m3_value(code)};
}

// Block and global amaxes: zeros, subnormals, the E4M3 byte boundaries' neighbourhood, the
// float32 extremes, Inf and NaN, and a sweep of exponents with varied mantissas.
std::vector<float> amaxes() {
    std::vector<float> v = {0.0f,
                            0x1p-149f,
                            0x1p-140f,
                            0x1.8p-127f,
                            0x1p-126f,
                            1e-30f,
                            1e-9f,
                            1.0f / 448.0f,
                            0.37f,
                            1.0f,
                            5.5f,
                            6.0f,
                            448.0f,
                            2688.0f,
                            1e30f,
                            3.0e38f,
                            FLT_MAX,
                            INFINITY,
                            std::numeric_limits<float>::quiet_NaN()};
    std::uint32_t x = 12345u;
    for (int e = -149; e <= 127; e += 3) {
        for (int k = 0; k < 4; ++k) {
            x = x * 1664525u + 1013904223u;  // Numerical Recipes' LCG: varied mantissas
            const float base = std::ldexp(1.0f, e);
            v.push_back(e < -126 ? base : float_of(bits_of(base) | (x >> 9)));
        }
    }
    return v;
}

bool same(const BlockScale& s, const Nvfp4Block& b) {
    return s.code == b.scale_code && bits_of(s.scale) == bits_of(b.encode) && bits_of(s.scale_inv) == bits_of(b.decode);
}

}  // namespace

TEST_CASE("NVFP4 rules split into tensor, byte and byte's numbers give the sources' results", "[numerics][nvfp4]") {
    const std::vector<float> a = amaxes();
    ScaleParams te = make_scale_params(ScaleRule::nvfp4_te, Format::e2m1, 0.0, false, FLT_MAX, 0);
    ScaleParams ao = make_scale_params(ScaleRule::nvfp4_torchao, Format::e2m1, 0.0, false, FLT_MAX, 0);
    const ScaleParams single = make_scale_params(ScaleRule::nvfp4_torchao_single, Format::e2m1, 0.0, false, FLT_MAX, 0);
    std::size_t mismatches = 0, nan_bytes = 0, zero_bytes = 0;
    for (float g : a) {
        set_global_amax(te, g);
        set_global_amax(ao, g);
        for (float b : a) {
            const BlockScale st = rule_scale(te, b), sa = rule_scale(ao, b);
            mismatches += !same(st, te_in_one(b, g)) + !same(sa, torchao_in_one(b, g));
            mismatches += !same(st, nvfp4_te_block(b, nvfp4_te_global_encode(g), g));
            mismatches += !same(sa, nvfp4_torchao_block(b, g));
            // Every byte below 128 (the kernels tabulate bytes 0 .. 127).
            mismatches += st.code >= 128 || sa.code >= 128;
            nan_bytes += sa.code == 0x7F;
            zero_bytes += st.code == 0;
        }
    }
    for (float b : a) mismatches += !same(rule_scale(single, b), single_in_one(b));
    CHECK(mismatches == 0);
    CHECK(nan_bytes > 0);   // torchao: global amax 0 or NaN
    CHECK(zero_bytes > 0);  // TE: a block far below the tensor's amax
}
