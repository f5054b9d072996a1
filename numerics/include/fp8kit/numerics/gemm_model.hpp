// The accumulation rules of fp8kit's reference GEMM (docs/gemm.md, "Models"), written once for
// the CPU model (lib/src/gemm/accumulate.cpp) and the CUDA model (cuda/src/gemm_model.cu):
// how a code is read as an integer term, the aligned step (alignment to the step's largest
// exponent, truncation, the step's sum truncated to sum_bits and rounded to float32), the
// promotion of a partial sum, the split-K reduction, the epilogue and the output rounding.
// Every float32 expression here is the IEEE operation it reads as: lib compiles with
// -ffp-contract=off and the CUDA library with -fmad=false; the one fused multiply-add is
// written as one (fma_f32).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

// Full unrolling of the tile loops on the device (registers, not local memory); nothing on the host.
#if defined(__CUDA_ARCH__)
#define FP8KIT_GEMM_UNROLL _Pragma("unroll")
#else
#define FP8KIT_GEMM_UNROLL
#endif

namespace fp8kit::numerics::gemm {

// Scales: one per tensor, one per row, or blocks (A 1x128: M x ceil(K/128); B 128x128:
// ceil(N/128) x ceil(K/128); row-major). Output: float32, or bfloat16 in the low 16 bits.
enum class ScaleKind { tensor, row, block };
enum class OutType { f32, bf16 };
enum class AccumKind { exact, fp32, aligned };
enum class StepRound { toward_zero, nearest_even };
// How a term keeps its bits above the alignment unit: drop the rest (toward zero, sign-magnitude),
// floor (toward -Inf: a right shift of a two's-complement significand), or nearest-even.
enum class AlignRound { toward_zero, floor, nearest_even };
// When the scale product multiplies the sum: once in the epilogue, or at every promotion.
enum class ScaleAt { epilogue, promotion };

// The parameters of a model in plain types (lib's AccumModel without its name), so a kernel can
// take them by value. docs/gemm.md defines each.
struct ModelParams {
    AccumKind kind = AccumKind::aligned;
    int group = 32;
    int align_bits = 14;
    bool nominal_exponent = true;
    int sum_bits = 14;
    AlignRound align = AlignRound::toward_zero;
    bool sticky = false;
    StepRound step_round = StepRound::toward_zero;
    int promote = 0;
    ScaleAt scale_at = ScaleAt::epilogue;
    int split_k = 0;
    bool promote_fma = true;
};

// ---- codes as integer terms -----------------------------------------------------------------

// The exponent of nothing: far below every real exponent, so a zero term never wins a maximum
// (a sum of two of these is still far below; see step_is_empty).
inline constexpr int kNoExponent = -(1 << 20);

// A code decoded once: value = sig * 2^exp (sig signed, 0 for zero, NaN and Inf);
// field_exp: the exponent of its exponent field (floor(log2|value|) for normal codes, the
// format's emin for subnormal ones); special: NaN or Inf. A zero (and NaN/Inf, whose elements
// are computed apart) has exp = field_exp = kNoExponent: it never wins the step's maximum and
// its alignment is a right shift past every bit (no shift by more than the integer's width).
struct CodeTerm {
    std::int32_t sig;
    std::int32_t exp;
    std::int32_t field_exp;
    std::int32_t special;
};
FP8KIT_HD constexpr CodeTerm zero_term() { return CodeTerm{0, kNoExponent, kNoExponent, 0}; }

// Read through emu's unpack: no format rule is typed here.
template <class F>
FP8KIT_HD CodeTerm code_term(std::uint32_t code) {
    const auto u = emu::detail::unpack<F>(code);
    CodeTerm t = zero_term();
    if (u.kind == emu::detail::Unpacked::nan || u.kind == emu::detail::Unpacked::infinity) {
        t.special = 1;
        return t;
    }
    if (u.kind == emu::detail::Unpacked::zero) return t;
    t.sig = static_cast<std::int32_t>(u.significand) * (u.negative ? -1 : 1);
    t.exp = u.exponent;
    const int lead = u.exponent + emu::detail::highest_bit(static_cast<std::uint64_t>(u.significand));
    t.field_exp = lead > F::emin ? lead : F::emin;
    return t;
}

// A product of two codes, exact: sig * 2^exp; align_exp is the exponent it brings to the step's
// maximum: ea + eb (the exponent fields: exp=nominal) or floor(log2|a b|) (exp=actual);
// kNoExponent or below for a zero product.
struct Product {
    std::int32_t sig;
    std::int32_t exp;
    std::int32_t align_exp;
};

FP8KIT_HD Product product(const CodeTerm& a, const CodeTerm& b, bool nominal) {
    Product p;
    p.sig = a.sig * b.sig;
    p.exp = a.exp + b.exp;
    if (nominal) {
        p.align_exp = a.field_exp + b.field_exp;
    } else {
        const std::uint32_t mag = static_cast<std::uint32_t>(p.sig < 0 ? -p.sig : p.sig);
        p.align_exp = mag != 0 ? p.exp + emu::detail::highest_bit(mag) : kNoExponent;
    }
    return p;
}

// ---- float32 and binary64 bits --------------------------------------------------------------

FP8KIT_HD std::uint64_t bits_of_f64(double v) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint64_t>(__double_as_longlong(v));
#else
    std::uint64_t u;
    std::memcpy(&u, &v, 8);
    return u;
#endif
}

FP8KIT_HD double f64_of(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
    return __longlong_as_double(static_cast<long long>(u));
#else
    double v;
    std::memcpy(&v, &u, 8);
    return v;
#endif
}

// A finite float32 as sig * 2^exp (sig signed, |sig| < 2^24); zero: exp = kNoExponent, as a
// zero code's.
struct FloatTerm {
    std::int32_t sig;
    std::int32_t exp;
};

FP8KIT_HD FloatTerm float_term(float c) {
    const std::uint32_t u = bits_of(c);
    const auto field = static_cast<int>((u >> 23) & 0xFFu);
    const auto man = static_cast<std::int32_t>(u & 0x7FFFFFu);
    FloatTerm t;
    t.sig = field ? (man | 0x800000) : man;
    t.exp = (field ? field : 1) - 127 - 23;
    if (u >> 31) t.sig = -t.sig;
    if (t.sig == 0) t.exp = kNoExponent;
    return t;
}

// floor(log2|c|) of a finite float32; kNoExponent for zero.
FP8KIT_HD int float_exponent(float c) {
    const FloatTerm t = float_term(c);
    if (t.sig == 0) return kNoExponent;
    return t.exp + emu::detail::highest_bit(static_cast<std::uint32_t>(t.sig < 0 ? -t.sig : t.sig));
}

// ---- the aligned step (docs/gemm.md, "aligned", steps 1-4) -----------------------------------

// A step with no non-zero term (the accumulator and every product zero) gives +0.
FP8KIT_HD bool step_is_empty(int e) { return e < kNoExponent / 2; }
// The alignment unit of a step whose largest exponent is e: 2^(e + 1 - bits).
FP8KIT_HD int step_unit(int e, const ModelParams& m) { return e + 1 - m.align_bits; }

// The term sig * 2^exp aligned to units of 2^unit, in half units (so the sticky half unit is an
// integer): trunc / floor / round_ne of the term, plus, with sticky, half a unit toward the lost
// part when bits were lost. Int: int64_t always fits (check_request: bits + log2(group + 1) + 2
// <= 53); int32_t fits when bits + log2(group + 1) + 4 <= 31 (the kernel's fast path).
template <class Int>
FP8KIT_HD Int align_halves(std::int32_t sig, int exp, int unit, const ModelParams& m) {
    constexpr int kWidth = 8 * static_cast<int>(sizeof(Int)) - 1;
    const bool neg = sig < 0;
    const Int mag = static_cast<Int>(neg ? -static_cast<Int>(sig) : static_cast<Int>(sig));
    const int sh = exp - unit;
    Int kept;
    bool lost = false, up = false;  // up: the magnitude was rounded up
    if (sh >= 0) {
        kept = mag << sh;
    } else {
        const int r = -sh < kWidth ? -sh : kWidth;  // every |term| < 2^kWidth: r = kWidth drops all
        kept = mag >> r;
        const Int rest = mag - (kept << r);
        lost = rest != 0;
        if (m.align == AlignRound::floor) {
            up = neg && lost;
        } else if (m.align == AlignRound::nearest_even) {
            const Int half = static_cast<Int>(Int{1} << (r - 1));
            up = rest > half || (rest == half && (kept & 1) != 0);
        }
        kept += up ? 1 : 0;
    }
    Int halves = 2 * kept;
    if (m.sticky && lost) halves += up ? -1 : 1;
    return neg ? -halves : halves;
}

// The end of a step: the exact sum (halves * 2^(unit - 1), a binary64 exactly: |halves| < 2^53
// and the exponents of FP8 products are far inside binary64's range), truncated toward zero to
// sum_bits significant bits (the low bits of the binary64 significand cleared), then rounded
// to float32 by `step` through emu::convert (float32's exponent range, subnormals, overflow).
template <class Int>
FP8KIT_HD float finish_step(Int halves, int unit, const ModelParams& m) {
    const double scale = f64_of(static_cast<std::uint64_t>(unit - 1 + 1023) << 52);
    std::uint64_t bits = bits_of_f64(static_cast<double>(halves) * scale);
    if (m.sum_bits > 0 && m.sum_bits < 53) bits &= ~((std::uint64_t{1} << (53 - m.sum_bits)) - 1);
    const emu::Policy pol{
        m.step_round == StepRound::toward_zero ? emu::Rounding::toward_zero : emu::Rounding::nearest_even,
        emu::Overflow::no_saturate, emu::NanEncoding::signed_quiet};
    return float_of(static_cast<std::uint32_t>(emu::convert<emu::Binary64, emu::Binary32>(bits, pol)));
}

// One step for a TM x TN tile of outputs (the CPU model is the 1 x 1 tile): c[i][j] and the n
// products a(q, i) x b(q, j), q < n. 1: the largest exponent; 2-3: every term aligned and the
// aligned terms summed exactly; 4: finish_step. a(q, i) and b(q, j) return CodeTerms.
template <class Int, int TM, int TN, class LoadA, class LoadB>
FP8KIT_HD void aligned_step(float (&c)[TM][TN], int n, const LoadA& a, const LoadB& b, const ModelParams& m) {
    int e[TM][TN];
    FP8KIT_GEMM_UNROLL for (int i = 0; i < TM; ++i) FP8KIT_GEMM_UNROLL for (int j = 0; j < TN; ++j) e[i][j] =
        float_exponent(c[i][j]);
    for (int q = 0; q < n; ++q) {
        CodeTerm x[TM], y[TN];
        FP8KIT_GEMM_UNROLL for (int i = 0; i < TM; ++i) x[i] = a(q, i);
        FP8KIT_GEMM_UNROLL for (int j = 0; j < TN; ++j) y[j] = b(q, j);
        FP8KIT_GEMM_UNROLL for (int i = 0; i < TM; ++i) FP8KIT_GEMM_UNROLL for (int j = 0; j < TN; ++j) {
            const int pe = product(x[i], y[j], m.nominal_exponent).align_exp;
            e[i][j] = pe > e[i][j] ? pe : e[i][j];
        }
    }
    Int h[TM][TN];
    FP8KIT_GEMM_UNROLL for (int i = 0; i < TM; ++i) FP8KIT_GEMM_UNROLL for (int j = 0; j < TN; ++j) {
        const FloatTerm t = float_term(c[i][j]);
        h[i][j] = align_halves<Int>(t.sig, t.exp, step_unit(e[i][j], m), m);
    }
    for (int q = 0; q < n; ++q) {
        CodeTerm x[TM], y[TN];
        FP8KIT_GEMM_UNROLL for (int i = 0; i < TM; ++i) x[i] = a(q, i);
        FP8KIT_GEMM_UNROLL for (int j = 0; j < TN; ++j) y[j] = b(q, j);
        FP8KIT_GEMM_UNROLL for (int i = 0; i < TM; ++i) FP8KIT_GEMM_UNROLL for (int j = 0; j < TN; ++j) {
            const Product p = product(x[i], y[j], m.nominal_exponent);
            h[i][j] += align_halves<Int>(p.sig, p.exp, step_unit(e[i][j], m), m);
        }
    }
    FP8KIT_GEMM_UNROLL for (int i = 0; i < TM; ++i) FP8KIT_GEMM_UNROLL for (int j = 0; j < TN; ++j) c[i][j] =
        step_is_empty(e[i][j]) ? 0.0f : finish_step<Int>(h[i][j], step_unit(e[i][j], m), m);
}

// ---- chunks, promotion, split-K, epilogue ---------------------------------------------------

FP8KIT_HD float fma_f32(float a, float b, float c) { return fma_rn(a, b, c); }

// Products per promotion: N_C, or all of K (never promoted); at most 128 with block scales,
// whose scales end a partial sum.
FP8KIT_HD std::size_t chunk_size(const ModelParams& m, std::size_t k, ScaleKind scales) {
    std::size_t chunk = m.promote > 0 ? static_cast<std::size_t>(m.promote) : (k > 0 ? k : 1);
    if (scales == ScaleKind::block && chunk > 128) chunk = 128;
    return chunk;
}
// Products per split-K range (all of K without split-K).
FP8KIT_HD std::size_t split_size(const ModelParams& m, std::size_t k) {
    return m.split_k > 0 ? static_cast<std::size_t>(m.split_k) : (k > 0 ? k : 1);
}
// Whether the scale product multiplies each promoted partial sum (else it waits for the epilogue).
FP8KIT_HD bool scale_each_chunk(const ModelParams& m, ScaleKind scales) {
    return scales == ScaleKind::block || m.scale_at == ScaleAt::promotion;
}

// The end of a chunk: its partial sum c goes to the float32 accumulator `outer`. Scaled there
// (sab = fl32(sa * sb) of the chunk's block) when scale_each: with fma=1 one rounding
// (cuBLASLt's block-scaled kernel, measured: docs/gemm.md "Block scales"; fma(s, c, 0) is
// fl32(s * c), so the first chunk needs no case of its own); else fl32(outer + fl32(s * c)). The
// first unscaled partial sum is taken as it is (no 0 + c).
FP8KIT_HD float promote(float outer, float c, bool first, bool scale_each, float sab, const ModelParams& m) {
    if (scale_each && m.promote_fma) return fma_f32(sab, c, outer);
    const float term = scale_each ? sab * c : c;
    return first ? term : outer + term;
}

// Split-K: the float32 partials added in k order (cuBLASLt's splitKreduce_kernel, measured).
FP8KIT_HD float reduce_split(float total, float part, bool first) { return first ? part : total + part; }

// The epilogue of the aligned model when the scales wait for it. Measured on an H100
// (docs/gemm.md): tensorwise kernels multiply by fl32(sa * sb); the rowwise (outer-vector scale)
// kernel by sb, then by sa.
FP8KIT_HD float aligned_epilogue(float acc, float sa, float sb, bool rowwise) {
    return rowwise ? (acc * sb) * sa : (sa * sb) * acc;
}

// fp32 model: exact products summed in float32 in k order, then the scale (block scales: each
// 128-block's sum scaled and added, from 0).
FP8KIT_HD float fp32_add(float inner, float va, float vb) { return inner + va * vb; }
FP8KIT_HD float fp32_scale(float outer, float sa, float sb, float inner, bool blocks) {
    const float sab = sa * sb;
    return blocks ? outer + sab * inner : sab * inner;
}

// NaN or Inf among the codes of an element: IEEE float32 decides, for every model,
// acc = fl32(acc + fl32(fl32(a * sa) * fl32(b * sb))) in k order from 0.
FP8KIT_HD float special_add(float acc, float va, float sa, float vb, float sb) { return acc + (va * sa) * (vb * sb); }

// Which scale multiplies element (row, k-block) of an operand.
FP8KIT_HD std::size_t scale_index(ScaleKind kind, bool is_b, std::size_t row, std::size_t kblock, std::size_t kblocks) {
    switch (kind) {
        case ScaleKind::tensor: return 0;
        case ScaleKind::row: return row;
        case ScaleKind::block: return (is_b ? row / 128 : row) * kblocks + kblock;
    }
    return 0;
}

// The binary64 sums behind the error measure of validate --gemm (docs/gemm.md, "Validation"):
// per element, over each run of k that one scale pair multiplies (128 products for block scales,
// all K otherwise), the products a * b and their magnitudes are summed in binary64, then each
// run's two sums are multiplied by sa * sb and |sa * sb| and added. Each product is exact (a code
// has at most 8 significant bits); the additions may round, by at most K * 2^-53 of the
// magnitude sum in all, which validate --gemm allows where it measures against these sums. The
// CPU and the GPU both add in k order: the same bits.
FP8KIT_HD void binary64_add_product(double& run_sum, double& run_magnitude, double va, double vb) {
    const double p = va * vb;
    run_sum += p;
    run_magnitude += p < 0 ? -p : p;
}
FP8KIT_HD void binary64_add_run(double& sum, double& magnitude, double run_sum, double run_magnitude, float sa,
                                float sb) {
    const double s = static_cast<double>(sa) * static_cast<double>(sb);  // exact: two 24-bit significands
    sum += s * run_sum;
    magnitude += (s < 0 ? -s : s) * run_magnitude;
}
// The run length of that rule: block scales change every 128 products; other kinds never.
FP8KIT_HD std::size_t binary64_run(ScaleKind kind, std::size_t k) {
    return kind == ScaleKind::block ? 128 : (k > 0 ? k : 1);
}

// The output rounding of a float32 result: its bits, or bfloat16 by nearest-even (emu::convert).
// A NaN result is the canonical quiet NaN 0x7FC00000 (bfloat16 0x7FC0): the sign and payload of
// a NaN depend on the processor (x86 propagates an operand's payload and makes Inf - Inf
// 0xFFC00000, a GPU gives 0x7FFFFFFF), and hardware NaN payloads are not modelled.
FP8KIT_HD std::uint32_t output_bits(float v, OutType out) {
    const std::uint32_t b = is_nan(v) ? 0x7FC00000u : bits_of(v);
    if (out == OutType::f32) return b;
    return static_cast<std::uint32_t>(emu::convert<emu::Binary32, emu::BFloat16>(b, emu::kDecodePolicy));
}

}  // namespace fp8kit::numerics::gemm

#undef FP8KIT_GEMM_UNROLL
