// The producers' weight quantisation rules (docs/inference.md: formula and source file of each).
// Every cast goes through emu::encode (bit-exact); every division is one float32 operation, as
// torch performs it on float32 tensors; a bfloat16 intermediate is rounded as torch rounds it (RNE).
// A tensor divided by a Python number goes through by_scalar: a division on the CPU, a multiply
// by the float32 reciprocal on CUDA (Arithmetic, producer_rules.hpp).
#include "checkpoint/producer_rules.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/emu/formats.hpp"
#include "fp8kit/numerics/scale_rules.hpp"
#include "convert/float_bits.hpp"
#include "checkpoint/modelopt_presets.hpp"
#include "producers/modelopt_nvfp4.hpp"

namespace fp8kit::checkpoint::detail {
namespace {

std::uint32_t bits(float f) { return fp8kit::detail::bits_of(f); }
float decode_fmt(Format f, std::uint8_t c) { return fp8kit::detail::decode_f32(f, c); }
using fp8kit::detail::round_to_bf16;
float round_scale(float s, const std::string& dtype) { return dtype == "BF16" ? round_to_bf16(s) : s; }

// `tensor / python_number` as torch computes it, in float32 (its opmath type also for bfloat16
// tensors; the caller rounds a bfloat16 result). CUDA: ATen native/cuda/BinaryDivTrueKernel.cu
// div_true_kernel_cuda, when the divisor is a CPU scalar: inv_b = opmath_t(1.0) / b, then
// a * inv_b (MulFunctor). CPU: native/cpu/BinaryOpsKernel.cpp div_true_kernel, a / b.
float by_scalar(float a, float b, Arithmetic ar) { return ar == Arithmetic::cuda ? a * (1.0f / b) : a / b; }
Format element_format(Scheme s) { return (s == Scheme::nvfp4 || s == Scheme::mxfp4) ? Format::e2m1 : Format::e4m3; }

std::vector<float> block_amax(const Layer& L, const std::vector<float>& x, const Scales& s) {
    std::vector<float> a(s.grid_rows * s.grid_cols, 0.0f);
    const std::uint64_t br = s.block_rows, bc = s.block_cols;
    for (std::uint64_t r = 0; r < L.rows; ++r)
        for (std::uint64_t c = 0; c < L.cols; ++c) {
            float& m = a[(r / br) * s.grid_cols + c / bc];
            m = std::max(m, std::fabs(x[r * L.cols + c]));
        }
    return a;
}

// compressed-tensors' MX scale (quantization/utils/mxfp_utils.py generate_mx_scales and
// round_to_power_2): add half of the element format's last mantissa step to the bits of amax
// and keep sign and exponent (a power of two, rounded up once the mantissa reaches 1.75), then
// 127 + log2(that) - floor(log2(max)). generate_mx_scales passes E2M1's mantissa width (1) for
// every element format but FP6 E2M3: MXFP8's threshold is 1.75 too, not E4M3's 1.9375 (0.20.0;
// checked on data/checkpoints/ct_mxfp8, where the E4M3 width gave 813 of 3840 scales differing).
// Exact in float32 for bfloat16 and float32 amaxes alike (the threshold is the same bit).
std::uint8_t ct_mx_code(float amax, Scheme s) {
    if (amax == 0.0f || !std::isfinite(amax)) return 0;  // log2(0) = -inf: not defined by the source
    const int em = 1, offset = s == Scheme::mxfp8 ? 8 : 2;
    const std::uint32_t b = (bits(amax) + (1u << (23 - em - 1))) & 0xFF800000u;
    const int e = int((b >> 23) & 0xFF) - 127;
    const int code = 127 + e - offset;
    return static_cast<std::uint8_t>(std::clamp(code, 0, 254));
}

// ModelOpt MXFP4 (modelopt/torch/quantization/qtensor/mxfp4_tensor.py quantize):
// e = ceil(max(log2(amax / 6), -127)) in float32, code e + 127 (log2 as the C library's log2f).
// On CUDA the division is by_scalar's reciprocal multiply (E2M1_max is the Python float 6.0).
std::uint8_t modelopt_mx_code(float amax, Arithmetic ar) {
    const float d = by_scalar(amax, 6.0f, ar);
    const float e = std::ceil(std::max(std::log2(d), -127.0f));
    return static_cast<std::uint8_t>(std::clamp(int(e) + 127, 0, 255));
}

// ModelOpt's MXFP4 element cast (same file, cast_fp4): ord = how many of the bounds
// {0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5} lie strictly below |x| (ties go toward zero), sign bit
// (2 - sign(x)) // 2, which is 1 for x == 0: zeros are stored as 0x8.
std::uint8_t modelopt_mx_cast(float x) {
    static const float kBounds[] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    std::uint8_t ord = 0;
    for (float b : kBounds) ord += std::fabs(x) > b;
    return static_cast<std::uint8_t>((x > 0 ? 0 : 8) + ord);
}

// ModelOpt MXFP8 (modelopt/torch/quantization/qtensor/mxfp8_tensor.py _compute_e8m0_exponent):
// descale = amax / 448 in float32; e = ceil(log2(descale)) where descale > 0, else -127;
// clamped to [-127, 127]; code e + 127 (log2 as the C library's log2f).
// (E4M3_MAX is the Python float torch.finfo(...).max: by_scalar on CUDA.)
std::uint8_t modelopt_mxfp8_code(float amax, Arithmetic ar) {
    const float d = by_scalar(amax, 448.0f, ar);
    const float e = d > 0.0f ? std::ceil(std::log2(d)) : -127.0f;
    return static_cast<std::uint8_t>(std::clamp(int(e), -127, 127) + 127);
}

// ModelOpt W4A8_AWQ INT4 codes (modelopt/torch/export/quant_utils.py pack_int4_in_uint8):
// (weight / weight_scale).round().clamp(-8, 7): the quotient in float32 (a bfloat16 weight over a
// float32 scale), torch.round rounds half to even (nearbyint under the default rounding mode);
// the code is the two's complement nibble.
std::uint8_t int4_code(float v) {
    const float r = std::clamp(std::nearbyint(v), -8.0f, 7.0f);
    return static_cast<std::uint8_t>(static_cast<int>(r) & 0xF);
}

// ModelOpt INT8 codes (quant_utils.py to_quantized_weight, QUANTIZATION_INT8_SQ / INT8_WO):
// (weight / weights_scaling_factor[:, None]).round().clamp(-128, 127).to(torch.int8): a float32
// quotient (a bfloat16 weight over a float32 [rows, 1] tensor), rounded half to even; the code is
// the two's complement byte.
std::uint8_t int8_code(float v) {
    const float r = std::clamp(std::nearbyint(v), -128.0f, 127.0f);
    return static_cast<std::uint8_t>(static_cast<int>(r) & 0xFF);
}

// ModelOpt's integer weight scale (quant_utils.py get_scaling_factor): amax.float() /
// quantizer.maxbound (2^(num_bits - 1) - 1: 7 for INT4, 127 for INT8; a Python number, by_scalar),
// where export_amax has replaced a zero amax by maxbound (tensor_quantizer.py
// _sanitize_export_amax: "so exported scales stay positive"), giving 1.0.
float modelopt_integer_scale(float amax, float maxbound, Arithmetic ar) {
    return amax == 0.0f ? 1.0f : by_scalar(amax, maxbound, ar);
}

}  // namespace

void set_grid(const Layer& L, Scales& s) {
    s.block_rows = std::max<std::uint64_t>(L.block_rows ? L.block_rows : L.rows, 1);
    s.block_cols = std::max<std::uint64_t>(L.block_cols ? L.block_cols : L.cols, 1);
    s.grid_rows = (L.rows + s.block_rows - 1) / s.block_rows;
    s.grid_cols = (L.cols + s.block_cols - 1) / s.block_cols;
}

float element_max(Scheme s) {
    if (s == Scheme::int8) return 127.0f;
    return int4_packed(s) ? 7.0f : element_format(s) == Format::e2m1 ? 6.0f : 448.0f;
}
float decode_element(Scheme s, std::uint8_t code) {
    if (int4_packed(s)) return float((code & 0x8) ? int(code & 0xF) - 16 : int(code & 0xF));  // signed nibble
    if (s == Scheme::int8) return float(static_cast<std::int8_t>(code));
    return decode_fmt(element_format(s), code);
}

const char* name(BlockRule r) {
    switch (r) {
        case BlockRule::transformers: return "transformers FineGrainedFP8";
        case BlockRule::transformers_ue8m0: return "transformers FineGrainedFP8 ue8m0";
        case BlockRule::ue8m0: return "ue8m0 power-of-two scales";
        case BlockRule::triton_round_up: return "triton_kernels downcast_to_mxfp ROUND_UP, ties to even";
        case BlockRule::triton_round_up_ties_away:
            return "triton_kernels downcast_to_mxfp ROUND_UP, ties away (before triton #8110)";
        default: return "amax / 448";
    }
}

std::vector<BlockRuleChoice> block_rules(bool transformers_config, const std::string& scale_fmt) {
    const bool ue8m0 = scale_fmt == "ue8m0";
    if (transformers_config) {
        const BlockRule r = ue8m0 ? BlockRule::transformers_ue8m0 : BlockRule::transformers;
        return {{r, true}, {r, false}};
    }
    return {{ue8m0 ? BlockRule::ue8m0 : BlockRule::amax_div, false}};
}

std::vector<float> transformers_loaded_weight(const std::vector<float>& x) {
    std::vector<float> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
        y[i] = decode_fmt(Format::e4m3, emu::encode(Format::e4m3, Wide::f32, bits(x[i]), emu::kRneSaturate));
    return y;
}

namespace {
// transformers Fp8Quantize: the float32 multiplier of a block, `_FP8_MAX / safe_max_abs` (1 for
// amax 0). A Python number over a tensor is the tensor's reciprocal times the number
// (torch/_tensor.py __rdiv__: `self.reciprocal() * other`): fl(448 * fl(1 / amax)), which is
// not always fl(448 / amax) (on the E4M3-cast weights of data/checkpoints/tf_fp8_block: 13 of 30 blocks).
float transformers_multiplier(float amax) { return amax > 0.0f ? 448.0f * (1.0f / amax) : 1.0f; }
// transformers Fp8Quantize with scale_fmt "ue8m0": the stored power of two.
float transformers_ue8m0_scale(float amax) {
    const float inv = 1.0f / transformers_multiplier(amax);
    return std::ldexp(1.0f, static_cast<int>(std::ceil(std::log2(std::max(inv, 1.17549435e-38f)))));
}
}  // namespace

std::string variant_name(Producer p, Arithmetic a) {
    return std::string(name(p)) + (a == Arithmetic::cuda ? " (CUDA arithmetic)" : " (CPU arithmetic)");
}

Scales expected_scales(Producer p, const Layer& L, const std::vector<float>& x, const std::string& sd,
                       const std::string& wd, float shared_amax, Arithmetic ar, BlockRule rule) {
    // Only ModelOpt divides a tensor by a Python number in its scales; compressed-tensors divides
    // by tensors it puts on the weight's device (calculate_range's bit range; generate_gparam's
    // `448*6 / amax` is reciprocal() * 2688 on either device), so its CUDA scales are its CPU
    // ones (its CUDA codes are not: expected_codes).
    const Arithmetic mo = p == Producer::modelopt ? ar : Arithmetic::cpu;
    Scales s;
    set_grid(L, s);
    auto amax = block_amax(L, x, s);
    float tensor_amax = 0;
    for (float a : amax) tensor_amax = std::max(tensor_amax, a);
    if (shared_amax >= 0) {
        tensor_amax = shared_amax;
        if ((L.scheme == Scheme::fp8_block || L.scheme == Scheme::fp8_tensor) && amax.size() == 1)
            amax[0] = shared_amax;
    }
    s.block.resize(amax.size());
    switch (L.scheme) {
        case Scheme::fp8_tensor:
        case Scheme::fp8_channel:
        case Scheme::fp8_block:
            // ModelOpt quant_utils.py / DeepSeek: amax / 448 in float32 (ModelOpt: `amax.float() /
            // quantizer.maxbound`, get_scaling_factor; FP8QTensor.quantize `amax / 448.0`: Python
            // numbers). compressed-tensors calculate_qparams: max_val_pos / 448 in the weight's
            // dtype (BF16 scale), a zero scale replaced by the scale dtype's eps (step 5).
            if (L.scheme == Scheme::fp8_block && rule != BlockRule::amax_div) {
                for (std::size_t i = 0; i < amax.size(); ++i)
                    s.block[i] = rule == BlockRule::transformers ? 1.0f / transformers_multiplier(amax[i])
                                 : rule == BlockRule::transformers_ue8m0
                                     ? transformers_ue8m0_scale(amax[i])
                                     : std::exp2(std::ceil(std::log2(std::max(amax[i], 1e-4f) / 448.0f)));
                break;
            }
            for (std::size_t i = 0; i < amax.size(); ++i) {
                float v = round_scale(by_scalar(amax[i], 448.0f, mo), sd);
                if (p == Producer::compressed_tensors && v == 0.0f) v = sd == "BF16" ? 0.0078125f : 1.1920929e-07f;
                s.block[i] = v;
            }
            break;
        case Scheme::nvfp4:
            if (p == Producer::compressed_tensors) {
                // generate_gparam: 448*6 / max(amax, tiny), computed in the dtype of the
                // statistics (the weight's: bfloat16 rounds it), returned as float32; then
                // calculate_qparams: e4m3(clamp(global * (block_amax / 6))), the quotient again in
                // the weight's dtype; a zero scale -> eps of E4M3 (0.125).
                const float a = std::max(tensor_amax, 1.17549435e-38f);
                // torch evaluates `scalar / tensor` as tensor.reciprocal() * scalar
                // (torch/_tensor.py __rdiv__): two roundings in the tensor's dtype.
                float g = round_scale(2688.0f * round_scale(1.0f / a, wd), wd);
                if (!std::isfinite(g)) g = 1.0f;
                s.global = g;
                for (std::size_t i = 0; i < amax.size(); ++i) {
                    float v = decode_fmt(Format::e4m3,
                                         emu::encode(Format::e4m3, Wide::f32, bits(g * round_scale(amax[i] / 6.0f, wd)),
                                                     emu::kRneSaturate));
                    s.block[i] = v == 0.0f ? 0.125f : v;
                }
            } else {
                // ModelOpt nvfp4_tensor.py: weight_scale_2 = amax / (6*448); per-block
                // scale = block_amax / (6 * weight_scale_2), clamped to [2^-9, 448], 0 -> 1.0, E4M3.
                // (`global_amax.float() / (E2M1_MAX * m_fp8)`: a Python number, by_scalar on CUDA;
                // the per-block division is by a tensor.)
                // The rule is producers/modelopt_nvfp4.hpp's; an all-zero weight (g == 0) gets
                // block scales of 1.0, the rule's zero case, instead of 0 / 0.
                // W4A8_NVFP4_FP8: amax / 448 instead (modelopt_presets.hpp modelopt_fp8_stage_scale_2).
                const float g = modelopt_fp8_stage_scale_2(L)
                                    ? by_scalar(tensor_amax, 448.0f, mo)
                                    : producers::modelopt_nvfp4_scale_2(tensor_amax, mo == Arithmetic::cuda);
                s.global = g;
                for (std::size_t i = 0; i < amax.size(); ++i)
                    s.block[i] = decode_fmt(Format::e4m3, g == 0.0f ? producers::modelopt_e4m3_block_code(1.0f)
                                                                    : producers::modelopt_nvfp4_block_code(amax[i], g));
            }
            break;
        case Scheme::w4a8:
            // ModelOpt W4A8_AWQ (modelopt/torch/export/quant_utils.py get_weight_scaling_factor ->
            // get_scaling_factor(weight_quantizer[0])): weight_scale = amax / 7 per group, float32
            // (maxbound of a 4-bit integer quantizer, 2^3 - 1); weight_scale_2 =
            // get_scaling_factor(weight_quantizer[1]) = amax / 448 of the FP8 stage, whose amax is
            // the weight's, shared over q/k/v and gate/up (preprocess_linear_fusion).
            for (std::size_t i = 0; i < amax.size(); ++i) s.block[i] = by_scalar(amax[i], 7.0f, mo);
            s.global = by_scalar(tensor_amax, 448.0f, mo);
            break;
        case Scheme::int4:
        case Scheme::int8:
            // ModelOpt W4A16_AWQ: amax / 7 per group; W8A16 / W8A8_SQ_PER_CHANNEL: amax / 127 per
            // output row (the weight quantizer's axis 0), float32 (modelopt_integer_scale).
            for (std::size_t i = 0; i < amax.size(); ++i)
                s.block[i] = modelopt_integer_scale(amax[i], element_max(L.scheme), mo);
            break;
        case Scheme::mxfp8:
            if (p == Producer::modelopt) {
                for (std::size_t i = 0; i < amax.size(); ++i)
                    s.block[i] = decode_fmt(Format::e8m0, modelopt_mxfp8_code(amax[i], mo));
                break;
            }
            [[fallthrough]];
        case Scheme::mxfp4:
            if (p == Producer::gpt_oss && L.scheme == Scheme::mxfp4 &&
                (rule == BlockRule::triton_round_up || rule == BlockRule::triton_round_up_ties_away)) {
                for (std::size_t i = 0; i < amax.size(); ++i)
                    s.block[i] = decode_fmt(Format::e8m0, numerics::mx_code_triton_round_up(amax[i], 6.0f));
                break;
            }
            for (std::size_t i = 0; i < amax.size(); ++i)
                s.block[i] =
                    decode_fmt(Format::e8m0,
                               p == Producer::modelopt ? modelopt_mx_code(amax[i], mo)
                               : p == Producer::compressed_tensors
                                   ? ct_mx_code(amax[i], L.scheme)
                                   : numerics::mx_code_floor(amax[i], numerics::format_emax(element_format(L.scheme))));
            break;
        default: break;
    }
    return s;
}

float dequant_factor(Producer p, const Layer& L, const Scales& s, std::uint64_t r, std::uint64_t c) {
    const float b = s.block[(r / s.block_rows) * s.grid_cols + c / s.block_cols];
    if (L.scheme != Scheme::nvfp4) return b;
    // compressed-tensors divides the block scale by its global scale; ModelOpt multiplies.
    return p == Producer::compressed_tensors ? b / s.global : b * s.global;
}

std::vector<std::uint8_t> expected_codes(Producer p, const Layer& L, const std::vector<float>& x, const Scales& s,
                                         const std::string& sd, const std::string& wd, Arithmetic ar, BlockRule rule,
                                         bool scalar_scale) {
    std::vector<std::uint8_t> q(L.rows * L.cols);
    // transformers multiplies by fl(448 / amax) of the block, which 1 / (its stored 1/t) need not
    // give back: the multiplier comes from the original weights. Under ue8m0 it multiplies by
    // 1 / (the stored power of two), exact.
    std::vector<float> mul;
    if (L.scheme == Scheme::fp8_block && rule == BlockRule::transformers) {
        mul = block_amax(L, x, s);
        for (float& m : mul) m = transformers_multiplier(m);
    } else if (L.scheme == Scheme::fp8_block && rule == BlockRule::transformers_ue8m0) {
        mul = s.block;
        for (float& m : mul) m = 1.0f / m;
    }
    const Format f = element_format(L.scheme);
    // triton_kernels before #8110 rounded E2M1 ties away from zero (producer_rules.hpp BlockRule).
    const bool ties_away = p == Producer::gpt_oss && rule == BlockRule::triton_round_up_ties_away;
    const Policy pol =
        ties_away ? Policy{emu::Rounding::nearest_away, emu::kRneSaturateNoNan.overflow, emu::kRneSaturateNoNan.nan}
        : f == Format::e2m1 ? emu::kRneSaturateNoNan
                            : emu::kRneSaturate;
    // triton_kernels multiplies a block of code 0 (amax 0, or amax / 6 below float32's smallest
    // subnormal) by 0, not by 2^127: every element a signed zero.
    const bool triton = p == Producer::gpt_oss && (rule == BlockRule::triton_round_up || ties_away);
    // torch rounds x / scale to the weight's dtype when the scale is a same-kind tensor of that
    // dtype (compressed-tensors: scales in the weight's dtype) or a 0-dim float32 tensor (ModelOpt
    // per-tensor weight_scale: quant_utils.py to_quantized_weight `weight / weights_scaling_factor`).
    // compressed-tensors on CUDA: its Triton kernel (forward_helpers.py _quantize_kernel) divides
    // in float32 (`tl.div_rn(input.to(tl.float32), scale.to(tl.float32))`), clamps, and casts
    // with `.to(tl.float8e4nv)` (round to nearest even) or _round_to_fp4 (fp4_utils.py: E2M1's
    // nearest-even bounds): no bfloat16 quotient.
    const bool bf16_mid = (p == Producer::compressed_tensors && sd == "BF16" && ar == Arithmetic::cpu) ||
                          (p == Producer::modelopt && L.scheme == Scheme::fp8_tensor && wd == "BF16" && scalar_scale);
    // ModelOpt FP8 per-tensor on CUDA: to_quantized_weight moves the 0-dim float32 weight_scale to
    // the weight's device first (quant_utils.py `weights_scaling_factor.to(weight.device)`), so
    // it is no CPU scalar: the CUDA kernel (BinaryDivTrueKernel.cu, gpu_kernel_with_scalars with
    // DivFunctor) reads it as the common dtype, bfloat16, rounding it before the division. The
    // CPU kernel keeps a scalar operand in float32 (cpu/BinaryOpsKernel.cpp div_true_kernel,
    // iter.original_scalar_value<opmath_t>). Shown by data/checkpoints/gpu_modelopt_fp8: q_proj's
    // and v_proj's scales are the same on both devices, yet 374 and 117 codes differ, all of them
    // reproduced by this rule.
    const bool bf16_divisor = ar == Arithmetic::cuda && p == Producer::modelopt && L.scheme == Scheme::fp8_tensor &&
                              wd == "BF16" && scalar_scale;
    // (ModelOpt FP8_PB_WO goes through FP8QTensor.quantize, whose expanded scale is not 0-dim:
    // float32 quotient, also for a weight of one block.)
    const bool mo_mx = p == Producer::modelopt && L.scheme == Scheme::mxfp4;
    const bool int4 = int4_packed(L.scheme), int8 = L.scheme == Scheme::int8;
    const std::int64_t rows = static_cast<std::int64_t>(L.rows);
#pragma omp parallel for schedule(static) if (q.size() > (1u << 16))
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < L.cols; ++c) {
            const float d = dequant_factor(p, L, s, r, c);
            float v = mul.empty()
                          ? x[r * L.cols + c] / (bf16_divisor ? round_to_bf16(d) : d)
                          : std::clamp(x[r * L.cols + c] * mul[(r / s.block_rows) * s.grid_cols + c / s.block_cols],
                                       -448.0f, 448.0f);
            if (bf16_mid) v = round_to_bf16(v);  // x / scale computed in bfloat16, then cast to E4M3
            if (triton && d == 0x1p-127f) v = x[r * L.cols + c] * 0.0f;
            q[r * L.cols + c] = int4    ? int4_code(v)
                                : int8  ? int8_code(v)
                                : mo_mx ? modelopt_mx_cast(v)
                                        : emu::encode(f, Wide::f32, bits(v), pol);
        }
    return q;
}

}  // namespace fp8kit::checkpoint::detail
