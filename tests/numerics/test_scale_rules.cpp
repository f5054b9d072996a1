// Every scale rule of numerics/scale_rules.hpp against values worked by hand from each source's
// formula (the arithmetic is written next to each value). Nothing here asks the code under test
// for an expected value.
#include <catch2/catch.hpp>

#include "float_bits.hpp"

#include <cfloat>
#include <cstring>
#include <limits>

#include "fp8kit/numerics/scale_rules.hpp"

using namespace fp8kit::numerics;

namespace {

using fp8kit_test::kInf;
using fp8kit_test::kNaN;

using fp8kit_test::bits;
using fp8kit_test::from_bits;
constexpr std::uint32_t p2(int e) { return static_cast<std::uint32_t>(e + 127) << 23; }  // 2^e, normal
const float kTiny = from_bits(1);           // 2^-149, the smallest subnormal
const float kSub = from_bits(0x00200000u);  // 2^-128, a subnormal
const std::uint32_t kFltMaxBits = 0x7F7FFFFFu;

}  // namespace

// TransformerEngine transformer_engine/common/recipe/recipe_common.cuh, compute_scale_from_amax.
TEST_CASE("TE compute_scale_from_amax: hand-worked values and edge cases", "[numerics][scale]") {
    CHECK(bits(te_scale(1.0f, 448.0f, 0.0f, false, FLT_MAX)) == 0x43E00000u);  // 448 = 1.75 * 2^8
    // 448 / 3 = 1.0010101...b * 2^7; the bits past the 23rd (0101...) are below half an ulp.
    CHECK(bits(te_scale(3.0f, 448.0f, 0.0f, false, FLT_MAX)) == 0x43155555u);
    CHECK(bits(te_scale(3.0f, 448.0f, 0.0f, true, FLT_MAX)) == p2(7));  // pow2: 149.3 -> 128
    // Step 2: amax 0 and +-Inf give 1; step 3: NaN / amax gives NaN, replaced by 1.
    CHECK(bits(te_scale(0.0f, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    CHECK(bits(te_scale(kInf, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    CHECK(bits(te_scale(kNaN, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    // Negative amax: -1 < eps = 0, so amax becomes 0 -> 1. With eps 2^-4: amax 2^-4 -> 448 * 16.
    CHECK(bits(te_scale(-1.0f, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    CHECK(bits(te_scale(-1.0f, 448.0f, 0.0625f, false, FLT_MAX)) == 0x45E00000u);  // 7168 = 1.75 * 2^12
    // -Inf < 0: amax becomes eps 0 -> 1.
    CHECK(bits(te_scale(-kInf, 448.0f, 0.0f, false, FLT_MAX)) == p2(0));
    // Subnormal amax: 448 / 2^-149 = 1.75 * 2^157 overflows float32 -> value_for_inf (FLT_MAX);
    // with pow2 FLT_MAX keeps its exponent: 2^127.
    CHECK(bits(te_scale(kTiny, 448.0f, 0.0f, false, FLT_MAX)) == kFltMaxBits);
    CHECK(bits(te_scale(kTiny, 448.0f, 0.0f, true, FLT_MAX)) == p2(127));
    // value_for_inf is a parameter (TE's block reference uses the input type's max, e.g. 65504).
    CHECK(te_scale(kSub, 448.0f, 0.0f, false, 65504.0f) == 65504.0f);
    // FLT_MAX amax: 448 / (2^128 (1 - 2^-24)) = 1.75 * 2^-120 (1 + 2^-24 + ...). The excess,
    // 1.75 * 2^-144, is 0.875 of an ulp (2^-143): rounds up to 1.75 * 2^-120 + 2^-143.
    CHECK(bits(te_scale(from_bits(kFltMaxBits), 448.0f, 0.0f, false, FLT_MAX)) == 0x03E00001u);
}

// transformer_engine/common/recipe/delayed_scaling.cu, kernel_bulk: scale = (fmax * 2^-margin) / amax.
TEST_CASE("TE DelayedScaling division", "[numerics][scale]") {
    CHECK(bits(te_scaled_max(448.0f, 0)) == 0x43E00000u);
    CHECK(bits(te_scaled_max(448.0f, 1)) == 0x43600000u);                           // 224
    CHECK(bits(te_delayed_scale(14.0f, 1.0f, te_scaled_max(448.0f, 1))) == p2(4));  // 224 / 14 = 16
    // amax 0, negative, NaN, Inf: the previous scale stays.
    for (float a : {0.0f, -3.0f, kNaN, kInf, -kInf}) CHECK(bits(te_delayed_scale(a, 5.0f, 448.0f)) == bits(5.0f));
    // 448 / 2^-149 overflows: FLT_MAX.
    CHECK(bits(te_delayed_scale(kTiny, 1.0f, 448.0f)) == kFltMaxBits);
}

// pytorch/ao torchao/float8/float8_utils.py, amax_to_scale: fl32(fmax / clamp(fl64(amax), min=EPS)).
TEST_CASE("torchao amax_to_scale", "[numerics][scale]") {
    CHECK(bits(torchao_scale(3.0f, 448.0f, 1e-12, false)) == 0x43155555u);  // binary64 then one rounding
    CHECK(bits(torchao_scale(3.0f, 448.0f, 1e-12, true)) == p2(7));
    // amax 0, a negative amax and a subnormal amax are all clamped to 1e-12: 448e12 = 4.48e14,
    // which lies in [2^48, 2^49): pow2 gives 2^48.
    for (float a : {0.0f, -1.0f, kTiny}) {
        CHECK(torchao_scale(a, 448.0f, 1e-12, false) == static_cast<float>(448.0 / 1e-12));
        CHECK(bits(torchao_scale(a, 448.0f, 1e-12, true)) == p2(48));
    }
    // No guard: amax Inf -> 448 / Inf = 0; NaN propagates through clamp.
    CHECK(bits(torchao_scale(kInf, 448.0f, 1e-12, false)) == 0u);
    CHECK(std::isnan(torchao_scale(kNaN, 448.0f, 1e-12, true)));
    // FLT_MAX: 448 / FLT_MAX = 1.75 * 2^-120 + 2^-143 (one rounding, as in the TE case); pow2 -> 2^-120.
    CHECK(bits(torchao_scale(from_bits(kFltMaxBits), 448.0f, 1e-12, true)) == p2(-120));
}

// Azure/MS-AMP msamp/common/tensor/meta.py, ScalingMeta.compute_scaling_factor (TorchScript):
//   exp = floor(log2(fp_max / amax)) - margin; sf = round(2^|exp|); sf = where(amax > 0, sf, scale);
//   sf = where(isfinite(amax), sf, scale); sf = where(exp < 0, 1 / sf, sf).
// fp_max / amax is TorchScript's builtin div(Scalar, Tensor) = reciprocal(amax) * fp_max.
TEST_CASE("MS-AMP compute_scaling_factor, step by step in its order", "[numerics][scale]") {
    CHECK(bits(msamp_scale(10.0f, 1.0f, 448.0f, 0)) == p2(5));      // 44.8 -> exp 5
    CHECK(bits(msamp_scale(10000.0f, 1.0f, 448.0f, 0)) == p2(-5));  // 0.0448 -> exp -5 -> 1/32
    CHECK(bits(msamp_scale(10.0f, 1.0f, 448.0f, 1)) == p2(4));      // margin 1
    CHECK(bits(msamp_scale(10000.0f, 1.0f, 448.0f, 1)) == p2(-6));
    CHECK(bits(msamp_scale(1.0f, 1.0f, 65504.0f, 0)) == p2(15));  // FP16's fp_max
    // amax 0: 1/0 = Inf, log2 Inf = Inf, exp Inf; amax > 0 fails -> previous (8); Inf < 0 is false.
    CHECK(bits(msamp_scale(0.0f, 8.0f, 448.0f, 0)) == p2(3));
    // amax NaN: every step keeps the previous scale (NaN < 0 is false).
    CHECK(bits(msamp_scale(kNaN, 8.0f, 448.0f, 0)) == p2(3));
    // amax -10: ratio -44.8, log2 NaN; amax > 0 fails -> previous; NaN < 0 false.
    CHECK(bits(msamp_scale(-10.0f, 8.0f, 448.0f, 0)) == p2(3));
    // amax -0: 1/-0 = -Inf, ratio -Inf, log2 NaN -> previous.
    CHECK(bits(msamp_scale(-0.0f, 8.0f, 448.0f, 0)) == p2(3));
    // amax +Inf: 1/Inf = 0, ratio 0, log2 0 = -Inf, exp -Inf; steps 4 and 5 take the previous
    // scale 8, and step 6 still inverts it because exp < 0: 1/8.
    CHECK(bits(msamp_scale(kInf, 8.0f, 448.0f, 0)) == p2(-3));
    // amax -Inf: 1/-Inf = -0, ratio -0, log2(-0) = -Inf: the same 1/8.
    CHECK(bits(msamp_scale(-kInf, 8.0f, 448.0f, 0)) == p2(-3));
    // Subnormal amax 2^-149: 1/amax = 2^149 overflows to Inf -> exp Inf -> sf Inf, kept (amax > 0, finite).
    CHECK(bits(msamp_scale(kTiny, 1.0f, 448.0f, 0)) == 0x7F800000u);
    // amax 2^-118: 1/amax = 2^118, * 448 = 1.75 * 2^126 -> exp 126 -> 2^126.
    CHECK(bits(msamp_scale(from_bits(p2(-118)), 1.0f, 448.0f, 0)) == p2(126));
    // The reciprocal matters: amax = 1.75 * 2^126. 448 / amax would be 2^-118 exactly, but
    // 1/amax = (4/7) 2^-126 is a subnormal, rounded to 4793490 * 2^-149 (0x492492), and
    // 4793490 * 448 = 2^31 - 128, so the ratio is 2^-118 (1 - 2^-24). Its log2, -118 - 8.6e-8,
    // rounds to -118.0 in float32 (torch.log2; numpy agrees), so exp = -118 and the scale 2^-118
    // (the exact floor would give -119).
    CHECK(bits(msamp_scale(from_bits(0x7EE00000u), 1.0f, 448.0f, 0)) == p2(-118));
    // FLT_MAX: 1/FLT_MAX rounds to the subnormal 2^-128, * 448 = 1.75 * 2^-120 -> 2^-120.
    CHECK(bits(msamp_scale(from_bits(kFltMaxBits), 1.0f, 448.0f, 0)) == p2(-120));
    // |exp| past 127: the same amax with margin 10 gives exp -128, 2^128 = Inf in float32, 1/Inf = 0.
    CHECK(bits(msamp_scale(from_bits(0x7EE00000u), 1.0f, 448.0f, 10)) == 0u);
}

// deepseek-ai/DeepGEMM deep_gemm/utils/math.py: sf = max(amax, 1e-4) / 448; UE8M0: 2^ceil(log2 sf).
TEST_CASE("DeepGEMM / DeepSeek-V3 scales, UE8M0", "[numerics][scale]") {
    auto p = deepseek_scale(448.0f, 448.0f, 1e-4f, false);
    CHECK(bits(p.scale) == p2(0));
    CHECK(bits(p.scale_inv) == p2(0));
    p = deepseek_scale(449.0f, 448.0f, 1e-4f, true);  // 449/448 = 1.0022 -> 2
    CHECK(bits(p.scale_inv) == p2(1));
    CHECK(bits(p.scale) == p2(-1));
    // amax 0 and a negative amax are clamped to fl32(1e-4): 1e-4 / 448 = 2.23e-7 in [2^-23, 2^-22) -> 2^-22.
    for (float a : {0.0f, -5.0f, kTiny}) {
        p = deepseek_scale(a, 448.0f, 1e-4f, true);
        CHECK(bits(p.scale_inv) == p2(-22));
        CHECK(bits(p.scale) == p2(22));
    }
    // Inf: sf Inf, scale 1/Inf = 0. NaN propagates.
    p = deepseek_scale(kInf, 448.0f, 1e-4f, true);
    CHECK(bits(p.scale_inv) == 0x7F800000u);
    CHECK(bits(p.scale) == 0u);
    CHECK(std::isnan(deepseek_scale(kNaN, 448.0f, 1e-4f, true).scale_inv));
    // FLT_MAX / 448 = 1.1428... * 2^119 -> UE8M0 2^120.
    p = deepseek_scale(from_bits(kFltMaxBits), 448.0f, 1e-4f, true);
    CHECK(bits(p.scale_inv) == p2(120));
    CHECK(bits(p.scale) == p2(-120));
}

// OCP Microscaling Formats (MX) v1.0, section 6.3: X = 2^(floor(log2 amax) - emax_elem).
TEST_CASE("MX OCP floor rule", "[numerics][scale][mx]") {
    CHECK(mx_code_floor(448.0f, 8) == 127);  // floor(log2 448) = 8 -> X = 1
    CHECK(mx_code_floor(500.0f, 8) == 127);  // 500 / 1 > 448: the cast saturates
    CHECK(mx_code_floor(1.0f, 8) == 119);
    CHECK(mx_code_floor(65536.0f, 15) == 128);  // E5M2 emax 15
    CHECK(mx_code_floor(1e-38f, 8) == 0);       // floor(log2 1e-38) = -127: -135 clamps to code 0
    CHECK(mx_code_floor(kTiny, 8) == 0);
    CHECK(mx_code_floor(0.0f, 8) == 0);                      // amax 0: the smallest scale
    CHECK(mx_code_floor(from_bits(kFltMaxBits), 8) == 246);  // 127 - 8 + 127
    CHECK(mx_code_floor(kNaN, 8) == 0xFF);
    CHECK(mx_code_floor(kInf, 8) == 0xFF);
    CHECK(format_emax(Format::e4m3) == 8);
    CHECK(format_emax(Format::e5m2) == 15);
    CHECK(format_emax(Format::e4m3fnuz) == 7);
}

// TransformerEngine MXFP8: transformer_engine/common/util/ptx.cuh float_to_e8m0 (round up) and
// exp2f_rcp (the scale the elements are multiplied by: 1 for code 0).
TEST_CASE("MX round-up rule and the scale a block is cast with", "[numerics][scale][mx]") {
    // 448 * fl32(1/448): fl32(1/7) = (1 + 3 * 2^-26) / 7, so the product rounds to exactly 1: code 127.
    CHECK(mx_code_roundup(448.0f, 448.0f) == 127);
    CHECK(mx_code_roundup(449.0f, 448.0f) == 128);
    CHECK(mx_code_roundup(1.0f, 448.0f) == 119);  // fl32(1/448) in [2^-9, 2^-8), mantissa != 0 -> 2^-8
    CHECK(mx_code_roundup(0.0f, 448.0f) == 0);
    CHECK(mx_code_roundup(kNaN, 448.0f) == 0xFF);
    CHECK(mx_code_roundup(kInf, 448.0f) == 0xFE);
    // FLT_MAX * fl32(1/448) = 1.1428... * 2^119: biased exponent 246, mantissa nonzero -> 247.
    CHECK(mx_code_roundup(from_bits(kFltMaxBits), 448.0f) == 247);
    // Boundary of code 0: 448 * 2^-127 * fl32(1/448) = 2^-127 (1 + 3 * 2^-26) rounds to the subnormal
    // 2^-127 (bits 0x400000): 2^-127 itself covers it, code 0. 1.5 times that: mantissa 0x600000 -> code 1.
    CHECK(mx_code_roundup(448.0f * from_bits(0x00400000u), 448.0f) == 0);
    CHECK(mx_code_roundup(672.0f * from_bits(0x00400000u), 448.0f) == 1);
    CHECK(mx_code_roundup(1e-38f, 448.0f) == 0);
    // E8M0 pairs: scale_inv = 2^(code - 127), scale = 2^(127 - code).
    CHECK(bits(e8m0_scale_pair(127).scale) == p2(0));
    CHECK(bits(e8m0_scale_pair(130).scale) == p2(-3));
    CHECK(bits(e8m0_scale_pair(0).scale) == p2(127));
    CHECK(bits(e8m0_scale_pair(0).scale_inv) == 0x00400000u);  // 2^-127, subnormal
    CHECK(bits(e8m0_scale_pair(254).scale) == 0x00400000u);
    CHECK(bits(e8m0_scale_pair(254).scale_inv) == p2(127));
    CHECK(std::isnan(e8m0_scale_pair(0xFF).scale));
    // The regression: code 0 casts with scale 1 under round-up (TE exp2f_rcp), 2^127 under the OCP
    // floor rule; scale_inv is 2^-127 for both.
    CHECK(bits(mx_cast_pair(MxRule::round_up, 0).scale) == p2(0));
    CHECK(bits(mx_cast_pair(MxRule::round_up, 0).scale_inv) == 0x00400000u);
    CHECK(bits(mx_cast_pair(MxRule::ocp_floor, 0).scale) == p2(127));
    CHECK(bits(mx_cast_pair(MxRule::round_up, 1).scale) == p2(126));
}

// triton_kernels downcast_to_mxfp, ROUND_UP (_downcast_to_mxfp.py): the exponent field of
// fl32(amax / 6) plus one unless its mantissa field is zero, by `(bits + 0x007FFFFF) & 0x7F800000`.
TEST_CASE("MX rule of triton_kernels' downcast_to_mxfp (ROUND_UP)", "[numerics][scale][mx]") {
    CHECK(mx_code_triton_round_up(6.0f, 6.0f) == 127);  // 6 / 6 = 1 exactly: 2^0, no clipping
    CHECK(mx_code_triton_round_up(7.0f, 6.0f) == 128);  // 7 / 6 -> 2^1; the OCP floor rule keeps 2^0
    CHECK(mx_code_floor(7.0f, 2) == 127);               // (and 7 saturates to 6 there)
    CHECK(mx_code_triton_round_up(4.0f, 6.0f) == 127);  // 2/3 -> 2^0; OCP floor: 2^0 too
    // 6 * 2^-7 * (1 + 2^-7): one bfloat16 ulp above 6 * 2^-7 goes up to 2^-6 (code 121).
    CHECK(mx_code_triton_round_up(6.0f * 0x1p-7f * (1.0f + 0x1p-7f), 6.0f) == 121);
    CHECK(mx_code_triton_round_up(6.0f * 0x1p-7f, 6.0f) == 120);
    CHECK(mx_code_triton_round_up(0.0f, 6.0f) == 0);
    CHECK(mx_code_triton_round_up(kTiny, 6.0f) == 0);  // 2^-149 / 6 rounds to 0
    // A subnormal quotient: the carry reaches the exponent field, code 1 (2^-126); TransformerEngine's
    // round-up keeps code 0 for a quotient up to 2^-127.
    CHECK(mx_code_triton_round_up(6.0f * 0x1p-130f, 6.0f) == 1);
    CHECK(mx_code_roundup(6.0f * 0x1p-130f, 6.0f) == 0);
    // FLT_MAX / 6 = 1.33 * 2^125: field 252, mantissa nonzero -> 253. Inf / 6 = Inf: 0xFF.
    CHECK(mx_code_triton_round_up(from_bits(kFltMaxBits), 6.0f) == 253);
    CHECK(mx_code_triton_round_up(kInf, 6.0f) == 0xFF);
    // A NaN quotient (0x7FC00000) carries into the sign bit: code 0.
    CHECK(mx_code_triton_round_up(kNaN, 6.0f) == 0);
}

TEST_CASE("rule_scale: the one entry point gives each rule's scale, inverse and code", "[numerics][scale]") {
    const auto te = rule_scale(make_scale_params(ScaleRule::te, Format::e4m3, 0.0, true, FLT_MAX, 0), 3.0f);
    CHECK(bits(te.scale) == p2(7));
    CHECK(bits(te.scale_inv) == p2(-7));
    CHECK(te.code == 0);
    // A 1x32 block of 1e-38 under the TE MXFP8 rule: code 0, cast with 1, dequantised with 2^-127.
    const auto mx = rule_scale(make_scale_params(ScaleRule::mx_roundup, Format::e4m3, 0.0, false, FLT_MAX, 0), 1e-38f);
    CHECK(mx.code == 0);
    CHECK(bits(mx.scale) == p2(0));
    CHECK(bits(mx.scale_inv) == 0x00400000u);
    const auto fl =
        rule_scale(make_scale_params(ScaleRule::mx_ocp_floor, Format::e4m3, 0.0, false, FLT_MAX, 0), 1e-38f);
    CHECK(fl.code == 0);
    CHECK(bits(fl.scale) == p2(127));
    const auto ms = rule_scale(make_scale_params(ScaleRule::msamp, Format::e5m2, 0.0, false, FLT_MAX, 0), 1.0f);
    CHECK(bits(ms.scale) == p2(15));  // 57344 -> exp 15
    const auto ds = rule_scale(make_scale_params(ScaleRule::deepseek, Format::e4m3, 1e-4, true, FLT_MAX, 0), 1344.0f);
    CHECK(bits(ds.scale_inv) == p2(2));  // 1344 / 448 = 3 -> 4
    CHECK(bits(ds.scale) == p2(-2));
    CHECK(format_max(Format::e4m3) == 448.0f);
    CHECK(format_max(Format::e5m2) == 57344.0f);
    CHECK(format_max(Format::e4m3fnuz) == 240.0f);
}

TEST_CASE("torchao 0.18 MX rules: FLOOR, CEIL, EVEN from the amax bits, RCEIL with a float32 log2",
          "[numerics][scale]") {
    const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
    // E4M3 (emax 8, 3 mantissa bits). 1.9375 = 2 - 2^-4 is EVEN's boundary: it rounds up to 2.
    CHECK(mx_code_torchao(1.9375f, 8, 3, TorchaoMx::floor) == 119);
    CHECK(mx_code_torchao(1.9375f, 8, 3, TorchaoMx::even) == 120);
    CHECK(mx_code_torchao(1.875f, 8, 3, TorchaoMx::even) == 119);
    CHECK(mx_code_torchao(1.9375f, 8, 3, TorchaoMx::ceil) == 120);
    CHECK(mx_code_torchao(2.0f, 8, 3, TorchaoMx::ceil) == 120);
    // Zero and subnormal amaxes: code 0; Inf reads exponent 255 (code 255 - 8), NaN 0xFF.
    CHECK(mx_code_torchao(0.0f, 8, 3, TorchaoMx::floor) == 0);
    CHECK(mx_code_torchao(1e-40f, 8, 3, TorchaoMx::ceil) == 0);
    CHECK(mx_code_torchao(inf, 8, 3, TorchaoMx::floor) == 247);
    CHECK(mx_code_torchao(inf, 2, 1, TorchaoMx::even) == 253);
    CHECK(mx_code_torchao(nan, 8, 3, TorchaoMx::ceil) == 0xFF);
    // Code 0 divides by 2^-126 (F32_MIN_NORMAL) but dequantises with 2^-127; 0xFF divides by Inf.
    CHECK(bits(mx_torchao_cast_pair(0).scale) == p2(126));
    CHECK(bits(mx_torchao_cast_pair(0).scale_inv) == 0x00400000u);
    CHECK(bits(mx_torchao_cast_pair(0xFF).scale) == 0u);
    CHECK(bits(mx_torchao_cast_pair(130).scale) == p2(-3));
    // RCEIL: 16 (1 + 2^-23) has a float32 log2 of exactly 4, so the code is 4 + 127, not 5 + 127.
    CHECK(ceil_log2_f32(16.0f * (1.0f + FLT_EPSILON)) == 4);
    CHECK(ceil_log2_f32(1.0f + FLT_EPSILON) == 1);
    CHECK(mx_code_torchao_rceil(16.0f * (1.0f + FLT_EPSILON), 1.0f) == 131);  // fmax 1: the quotient is exact
    CHECK(mx_code_roundup(16.0f * (1.0f + FLT_EPSILON), 1.0f) == 132);
    CHECK(mx_code_torchao_rceil(inf, 448.0f) == 0xFE);
    CHECK(mx_code_torchao_rceil(nan, 448.0f) == 0xFF);
    CHECK(mx_code_torchao_rceil(0.0f, 448.0f) == 0);
    CHECK(bits(mx_torchao_rceil_cast_pair(0).scale) == p2(0));
    // The block amax keeps NaN for the torchao rules only.
    CHECK(is_nan(rule_block_amax(ScaleRule::mx_torchao_floor, 3.0f, true)));
    CHECK(rule_block_amax(ScaleRule::mx_roundup, 3.0f, true) == 3.0f);
    CHECK(rule_block_amax(ScaleRule::nvfp4_torchao_single, 3.0f, false) == 3.0f);
}

TEST_CASE("torchao NVFP4 without a per-tensor scale", "[numerics][scale]") {
    // amax 6: block scale 1 (0x38), encode 1, decode 1.
    const Nvfp4Block b = nvfp4_torchao_single_block(6.0f);
    CHECK(b.scale_code == 0x38);
    CHECK(b.encode == 1.0f);
    CHECK(b.decode == 1.0f);
    // Tiny and zero blocks: the scale is clamped to E4M3's smallest normal 2^-6 (0x08).
    CHECK(nvfp4_torchao_single_block(0.0f).scale_code == 0x08);
    CHECK(bits(nvfp4_torchao_single_block(0.0f).encode) == p2(6));
    // Huge blocks: clamped to 448 (0x7E); NaN stays NaN (0x7F).
    CHECK(nvfp4_torchao_single_block(1e30f).scale_code == 0x7E);
    CHECK(nvfp4_torchao_single_block(std::numeric_limits<float>::quiet_NaN()).scale_code == 0x7F);
}
