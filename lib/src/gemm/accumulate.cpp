// The accumulation models, one output element at a time. Compiled with -ffp-contract=off: every
// float32 expression is the IEEE operation it reads as (no fused multiply-add).
#include "accumulate.hpp"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstring>
#include <vector>

#include "convert/float_bits.hpp"
#include "fp8kit/emu/emu.hpp"
#include "wide_fixed.hpp"

namespace fp8kit::gemm::detail {
namespace {

using fp8kit::detail::bit_cast;

struct Scale {
    float a, b;
};

Scale scales_at(const GemmRequest& rq, std::size_t i, std::size_t j, std::size_t kb, std::size_t kblocks) {
    return {rq.a.scales[scale_index(rq.a, false, i, kb, kblocks)],
            rq.b.scales[scale_index(rq.b, true, j, kb, kblocks)]};
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
        acc = numerics::gemm::special_add(acc, t.a.code[a[k]].value, s.a, t.b.code[b[k]].value, s.b);
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
            // times 2^shift as a multiply: a left shift of a negative value is undefined (UBSan)
            p += static_cast<__int128>(x.sig * y.sig) * (static_cast<__int128>(1) << (x.exp + y.exp - lsb));
        }
        const Scale s = scales_at(rq, i, j, k0 / 128, kblocks);
        const auto ua = emu::detail::unpack<emu::Binary32>(bit_cast<std::uint32_t>(s.a));
        const auto ub = emu::detail::unpack<emu::Binary32>(bit_cast<std::uint32_t>(s.b));
        if (ua.kind != emu::detail::Unpacked::finite || ub.kind != emu::detail::Unpacked::finite) {
            if (ua.kind == emu::detail::Unpacked::zero || ub.kind == emu::detail::Unpacked::zero) continue;
            return to_output(static_cast<float>(static_cast<double>(p)) * s.a * s.b, rq.out);  // NaN/Inf scale
        }
        sum.add_product(p, ua.significand * ub.significand, ua.negative != ub.negative,
                        lsb + ua.exponent + ub.exponent);
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
        for (std::size_t k = k0; k < std::min(rq.k, k0 + span); ++k)
            inner = numerics::gemm::fp32_add(inner, t.a.code[a[k]].value, t.b.code[b[k]].value);
        const Scale s = scales_at(rq, i, j, k0 / 128, kblocks);
        outer = numerics::gemm::fp32_scale(outer, s.a, s.b, inner, blocks);
        if (!blocks || k0 + span >= rq.k) break;
    }
    return to_output(outer, rq.out);
}

// aligned, one range of k [k_begin, k_end) as one CTA accumulates it: steps of `group` products
// inside chunks (promotion interval, 128-blocks for block scales); every chunk's partial sum goes
// to the float32 outer sum (numerics::gemm::promote). The step is numerics::gemm::aligned_step
// on a 1 x 1 tile, the CUDA model's code.
float aligned_range(const GemmRequest& rq, const numerics::gemm::ModelParams& m, const Tables& t, std::size_t i,
                    std::size_t j, std::size_t k_begin, std::size_t k_end) {
    namespace ng = numerics::gemm;
    const std::uint8_t* a = rq.a.codes + i * rq.k;
    const std::uint8_t* b = rq.b.codes + j * rq.k;
    const std::size_t chunk = ng::chunk_size(m, rq.k, rq.a.scale_kind), kblocks = (rq.k + 127) / 128;
    const bool scale_each = ng::scale_each_chunk(m, rq.a.scale_kind);
    float outer = 0;
    for (std::size_t c0 = k_begin; c0 < k_end; c0 += chunk) {
        float inner[1][1] = {{0.0f}};
        const std::size_t c1 = std::min(k_end, c0 + chunk);
        for (std::size_t k0 = c0; k0 < c1; k0 += m.group) {
            const int n = static_cast<int>(std::min<std::size_t>(m.group, c1 - k0));
            const auto load_a = [&](int q, int) { return t.a.term[a[k0 + q]]; };
            const auto load_b = [&](int q, int) { return t.b.term[b[k0 + q]]; };
            ng::aligned_step<std::int64_t, 1, 1>(inner, n, load_a, load_b, m);
        }
        const Scale s = scales_at(rq, i, j, c0 / 128, kblocks);
        outer = ng::promote(outer, inner[0][0], c0 == k_begin, scale_each, s.a * s.b, m);
    }
    return outer;
}

// aligned: K whole, or cut into split-K ranges whose float32 partial sums are added in k order
// (cuBLASLt's splitKreduce_kernel, measured: docs/gemm.md "Split-K"); then the epilogue.
std::uint32_t aligned_element(const GemmRequest& rq, const AccumModel& model, const Tables& t, std::size_t i,
                              std::size_t j) {
    namespace ng = numerics::gemm;
    const ng::ModelParams m = params_of(model);
    const std::size_t split = ng::split_size(m, rq.k);
    float outer = 0;
    for (std::size_t s0 = 0; s0 < rq.k; s0 += split)
        outer = ng::reduce_split(outer, aligned_range(rq, m, t, i, j, s0, std::min(rq.k, s0 + split)), s0 == 0);
    if (!ng::scale_each_chunk(m, rq.a.scale_kind)) {
        const Scale s = scales_at(rq, i, j, 0, (rq.k + 127) / 128);
        const bool rowwise = rq.a.scale_kind == ScaleKind::row || rq.b.scale_kind == ScaleKind::row;
        outer = ng::aligned_epilogue(outer, s.a, s.b, rowwise);
    }
    return to_output(outer, rq.out);
}

}  // namespace

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
