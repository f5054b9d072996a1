// The accumulation models, one output element at a time. Compiled with -ffp-contract=off: every
// float32 expression is the IEEE operation it reads as (no fused multiply-add).
#include "accumulate.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "wide_fixed.hpp"

namespace fp8kit::gemm::detail {
namespace {

template <class To, class From>
To bit_cast(const From& f) {  // C++17
    static_assert(sizeof(To) == sizeof(From));
    To t;
    std::memcpy(&t, &f, sizeof t);
    return t;
}

struct Scale {
    float a, b;
};

Scale scales_at(const GemmRequest& rq, std::size_t i, std::size_t j, std::size_t kb, std::size_t kblocks) {
    return {rq.a.scales[scale_index(rq.a, false, i, kb, kblocks)], rq.b.scales[scale_index(rq.b, true, j, kb, kblocks)]};
}

// NaN or Inf among the products: IEEE float32 arithmetic decides (a NaN code or Inf*0 gives NaN,
// Inf with the other sign too); every model returns this. Finite FP8 products cannot overflow
// a float32 sum, so the result is non-finite exactly when a special code takes part.
bool special_result(const GemmRequest& rq, const Tables& t, std::size_t i, std::size_t j, std::uint32_t& out) {
    if (!t.a.any_special && !t.b.any_special) return false;
    const std::uint8_t* a = rq.a.codes + i * rq.k;
    const std::uint8_t* b = rq.b.codes + j * rq.k;
    bool any = false;
    for (std::size_t k = 0; k < rq.k && !any; ++k) any = t.a.code[a[k]].special || t.b.code[b[k]].special;
    if (!any) return false;
    const std::size_t kblocks = (rq.k + 127) / 128;
    float acc = 0;
    for (std::size_t k = 0; k < rq.k; ++k) {
        const Scale s = scales_at(rq, i, j, k / 128, kblocks);
        acc += (t.a.code[a[k]].value * s.a) * (t.b.code[b[k]].value * s.b);
    }
    out = to_output(acc, rq.out);
    return true;
}

// exact: 1. each k-block's sum of code products as a 128-bit integer in units of 2^(qa + qb)
// (exact_width() <= 127 is checked); 2. times the exact product of the two float32 scales into a
// WideFixed; 3. one rounding to the output, nearest-even.
std::uint32_t exact_element(const GemmRequest& rq, const Tables& t, std::size_t i, std::size_t j) {
    const std::uint8_t* a = rq.a.codes + i * rq.k;
    const std::uint8_t* b = rq.b.codes + j * rq.k;
    const int lsb = t.a.min_exp + t.b.min_exp;
    const bool blocks = rq.a.scale_kind == ScaleKind::block;
    const std::size_t span = blocks ? 128 : std::max<std::size_t>(rq.k, 1), kblocks = (rq.k + 127) / 128;
    WideFixed sum;
    for (std::size_t k0 = 0; k0 < rq.k; k0 += span) {
        __int128 p = 0;
        for (std::size_t k = k0; k < std::min(rq.k, k0 + span); ++k) {
            const CodeValue &x = t.a.code[a[k]], &y = t.b.code[b[k]];
            p += static_cast<__int128>(x.sig * y.sig) << (x.exp + y.exp - lsb);
        }
        const Scale s = scales_at(rq, i, j, k0 / 128, kblocks);
        const auto ua = emu::detail::unpack<emu::Binary32>(bit_cast<std::uint32_t>(s.a));
        const auto ub = emu::detail::unpack<emu::Binary32>(bit_cast<std::uint32_t>(s.b));
        if (ua.kind != emu::detail::Unpacked::finite || ub.kind != emu::detail::Unpacked::finite) {
            if (ua.kind == emu::detail::Unpacked::zero || ub.kind == emu::detail::Unpacked::zero) continue;
            return to_output(static_cast<float>(static_cast<double>(p)) * s.a * s.b, rq.out);  // NaN/Inf scale
        }
        sum.add_product(p, ua.significand * ub.significand, ua.negative != ub.negative, lsb + ua.exponent + ub.exponent);
    }
    return round_output(sum.to_double_sticky(), rq.out);
}

// fp32: exact products (float32 holds every product of two codes), float32 sums in k order.
// Block scales: each 128-block's sum is scaled and added to the outer sum (as `promotion`).
std::uint32_t fp32_element(const GemmRequest& rq, const Tables& t, std::size_t i, std::size_t j) {
    const std::uint8_t* a = rq.a.codes + i * rq.k;
    const std::uint8_t* b = rq.b.codes + j * rq.k;
    const bool blocks = rq.a.scale_kind == ScaleKind::block;
    const std::size_t span = blocks ? 128 : std::max<std::size_t>(rq.k, 1), kblocks = (rq.k + 127) / 128;
    float outer = 0;
    for (std::size_t k0 = 0; k0 < rq.k || k0 == 0; k0 += span) {
        float inner = 0;
        for (std::size_t k = k0; k < std::min(rq.k, k0 + span); ++k) inner += t.a.code[a[k]].value * t.b.code[b[k]].value;
        const Scale s = scales_at(rq, i, j, k0 / 128, kblocks);
        const float sab = s.a * s.b;
        if (!blocks) return to_output(sab * inner, rq.out);
        outer = outer + sab * inner;
        if (k0 + span >= rq.k) break;
    }
    return to_output(outer, rq.out);
}

// aligned, one range of k [k_begin, k_end) as one CTA accumulates it: steps of `group` products
// inside chunks (promotion interval, 128-blocks for block scales); every chunk's partial sum goes
// to the float32 outer sum, scaled there when `scale_each` (promotion or block scales).
float aligned_range(const GemmRequest& rq, const AccumModel& m, const Tables& t, std::size_t i, std::size_t j,
                    std::size_t k_begin, std::size_t k_end, bool scale_each) {
    const std::uint8_t* a = rq.a.codes + i * rq.k;
    const std::uint8_t* b = rq.b.codes + j * rq.k;
    std::size_t chunk = m.promote > 0 ? static_cast<std::size_t>(m.promote) : std::max<std::size_t>(rq.k, 1);
    if (rq.a.scale_kind == ScaleKind::block) chunk = std::min<std::size_t>(chunk, 128);  // a block's scales end its partial sum
    const std::size_t kblocks = (rq.k + 127) / 128;
    std::vector<float> p(static_cast<std::size_t>(m.group));
    std::vector<int> e(static_cast<std::size_t>(m.group));
    float outer = 0;
    bool first = true;
    for (std::size_t c0 = k_begin; c0 < k_end; c0 += chunk) {
        float inner = 0;
        const std::size_t c1 = std::min(k_end, c0 + chunk);
        for (std::size_t k0 = c0; k0 < c1; k0 += m.group) {
            const int n = static_cast<int>(std::min<std::size_t>(m.group, c1 - k0));
            for (int q = 0; q < n; ++q) {
                const CodeValue &x = t.a.code[a[k0 + q]], &y = t.b.code[b[k0 + q]];
                p[q] = x.value * y.value;
                e[q] = m.nominal_exponent ? x.field_exp + y.field_exp : (p[q] != 0 ? std::ilogb(p[q]) : 0);
            }
            inner = aligned_step(inner, p.data(), e.data(), n, m);
        }
        const Scale s = scales_at(rq, i, j, c0 / 128, kblocks);
        if (scale_each && m.promote_fma) {
            // One rounding: cuBLASLt's block-scaled kernel (measured, docs/gemm.md "Block scales").
            // fma(s, c, 0) is fl32(s * c), so the first chunk needs no case of its own.
            outer = std::fma(s.a * s.b, inner, outer);
        } else {
            const float term = scale_each ? (s.a * s.b) * inner : inner;
            // The first partial sum is taken as it is (the accumulator starts from it, no 0 + x).
            outer = first ? term : outer + term;
        }
        first = false;
    }
    return outer;
}

// aligned: K whole, or cut into split-K ranges whose float32 partial sums are added in k order
// (cuBLASLt's splitKreduce_kernel, measured: docs/gemm.md "Split-K"); then the epilogue.
std::uint32_t aligned_element(const GemmRequest& rq, const AccumModel& m, const Tables& t, std::size_t i, std::size_t j) {
    const bool scale_each = rq.a.scale_kind == ScaleKind::block || m.scale_at == ScaleAt::promotion;
    const std::size_t split = m.split_k > 0 ? static_cast<std::size_t>(m.split_k) : std::max<std::size_t>(rq.k, 1);
    float outer = 0;
    for (std::size_t s0 = 0; s0 < rq.k; s0 += split) {
        const float part = aligned_range(rq, m, t, i, j, s0, std::min(rq.k, s0 + split), scale_each);
        outer = s0 == 0 ? part : outer + part;
    }
    if (!scale_each) {
        // Measured on an H100 (docs/gemm.md): cuBLASLt's tensorwise kernels multiply by
        // fl32(sa * sb); its rowwise (outer-vector scale) kernel by sb, then by sa.
        const Scale s = scales_at(rq, i, j, 0, (rq.k + 127) / 128);
        const bool rowwise = rq.a.scale_kind == ScaleKind::row || rq.b.scale_kind == ScaleKind::row;
        outer = rowwise ? (outer * s.b) * s.a : (s.a * s.b) * outer;
    }
    return to_output(outer, rq.out);
}

}  // namespace

float aligned_step(float acc, const float* p, const int* pe, int n, const AccumModel& m) {
    // 1. The largest exponent among the non-zero terms (the accumulator is a term too, with its
    // own exponent; a product brings its nominal or actual exponent, pe).
    int e = INT_MIN;
    if (acc != 0) e = std::ilogb(acc);
    for (int q = 0; q < n; ++q)
        if (p[q] != 0) e = std::max(e, pe[q]);
    if (e == INT_MIN) return acc + 0.0f;
    // 2. Align: units of 2^(e + 1 - bits); each term keeps its integer part (truncated toward zero
    // floored, or rounded to nearest-even), plus a half unit as sticky bit when bits were lost. Counted in
    // half units so the sticky bit is an integer too.
    const int unit = e + 1 - m.align_bits;
    std::int64_t halves = 0;
    auto take = [&](float v) {
        if (v == 0) return;
        const double x = std::ldexp(static_cast<double>(v), -unit);
        const double kept = m.align == AlignRound::nearest_even ? std::nearbyint(x)
                            : m.align == AlignRound::floor      ? std::floor(x)
                                                                : std::trunc(x);
        halves += 2 * static_cast<std::int64_t>(kept);
        if (m.sticky && kept != x) halves += x < kept ? -1 : 1;
    };
    take(acc);
    for (int q = 0; q < n; ++q) take(p[q]);
    // 3. The exact sum (|halves| < 2^53: check_request), truncated toward zero to sum_bits
    // significant bits, then rounded to float32 by emu::convert.
    double sum = std::ldexp(static_cast<double>(halves), unit - 1);
    if (m.sum_bits > 0 && sum != 0) {
        const int keep = std::ilogb(sum) + 1 - m.sum_bits;
        sum = std::ldexp(std::trunc(std::ldexp(sum, -keep)), keep);
    }
    const emu::Policy pol{m.step_round == StepRound::toward_zero ? emu::Rounding::toward_zero : emu::Rounding::nearest_even,
                          emu::Overflow::no_saturate, emu::NanEncoding::signed_quiet};
    const auto bits = static_cast<std::uint32_t>(emu::convert<emu::Binary64, emu::Binary32>(bit_cast<std::uint64_t>(sum), pol));
    return bit_cast<float>(bits);
}

std::uint32_t element(const GemmRequest& rq, const AccumModel& m, const Tables& t, std::size_t i, std::size_t j) {
    std::uint32_t special = 0;
    if (special_result(rq, t, i, j, special)) return special;
    switch (m.kind) {
        case AccumKind::exact: return exact_element(rq, t, i, j);
        case AccumKind::fp32: return fp32_element(rq, t, i, j);
        case AccumKind::aligned: return aligned_element(rq, m, t, i, j);
    }
    return 0;
}

}  // namespace fp8kit::gemm::detail
