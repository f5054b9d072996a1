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
#include "panel.hpp"
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
// (exact_width() <= 127 is checked), given by span_sum(k0, k1); 2. times the exact product of
// the two float32 scales into a WideFixed; 3. one rounding to the output, nearest-even.
template <class SpanSum>
std::uint32_t exact_from_sums(const GemmRequest& rq, const Tables& t, std::size_t i, std::size_t j,
                              const SpanSum& span_sum) {
    const int lsb = t.a.min_exp + t.b.min_exp;
    const bool blocks = rq.a.scale_kind == ScaleKind::block;
    const std::size_t span = blocks ? 128 : std::max<std::size_t>(rq.k, 1), kblocks = (rq.k + 127) / 128;
    WideFixed sum;
    for (std::size_t k0 = 0; k0 < rq.k; k0 += span) {
        const __int128 p = span_sum(k0, std::min(rq.k, k0 + span));
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

std::uint32_t exact_element(const GemmRequest& rq, const Tables& t, std::size_t i, std::size_t j) {
    const std::uint8_t* a = rq.a.codes + i * rq.k;
    const std::uint8_t* b = rq.b.codes + j * rq.k;
    const int lsb = t.a.min_exp + t.b.min_exp;
    return exact_from_sums(rq, t, i, j, [&](std::size_t k0, std::size_t k1) {
        __int128 p = 0;
        for (std::size_t k = k0; k < k1; ++k) {
            const CodeValue &x = t.a.code[a[k]], &y = t.b.code[b[k]];
            // times 2^shift as a multiply: a left shift of a negative value is undefined (UBSan)
            p += static_cast<__int128>(x.sig * y.sig) * (static_cast<__int128>(1) << (x.exp + y.exp - lsb));
        }
        return p;
    });
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

// ---- tiles: kTile output columns of one row at once (panel.hpp) ------------------------------
// Each column keeps its own accumulators and goes through exactly the operations, in the same
// k order, that its *_element function above performs; the operands are the same table entries,
// read from the decoded row and panel instead of through the codes. Columns never mix, so every
// output has the bits of element(), and the loops over columns are left to the vectoriser.

// The tile kernels are compiled three times, for AVX-512, AVX2 and the baseline x86-64, and the
// processor picks one when the library loads (GCC's target_clones): wider vectors of the same
// IEEE operations. No contraction in any (-ffp-contract=off; neither target enables FMA on its
// own), and conversions to integers truncate toward zero in all, so all clones give the same
// bits.
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define FP8KIT_GEMM_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FP8KIT_GEMM_CLONES
#endif

// The column whose scale a tile column reads: padding columns (past N) read the last real one,
// so no scale is read out of range (their outputs are dropped).
std::size_t scale_column(const Panel& p, std::size_t jj, std::size_t j) { return p.j0 + std::min(jj + j, p.count - 1); }

// fp32_element for a tile: inner[j] = fl32(inner[j] + fl32(va * vb)) in k order (fp32_add, no
// contraction: -ffp-contract=off), each span scaled by fp32_scale as there.
FP8KIT_GEMM_CLONES void fp32_tile(const GemmRequest& rq, std::size_t i, const DecodedRow& row, const Panel& p,
                                  std::size_t jj, std::uint32_t* out) {
    const bool blocks = rq.a.scale_kind == ScaleKind::block;
    const std::size_t span = blocks ? 128 : std::max<std::size_t>(rq.k, 1), kblocks = (rq.k + 127) / 128;
    float outer[kTile] = {};
    for (std::size_t k0 = 0; k0 < rq.k || k0 == 0; k0 += span) {
        float inner[kTile] = {};
        for (std::size_t k = k0; k < std::min(rq.k, k0 + span); ++k) {
            const float va = row.value[k];
            const float* vb = p.value.data() + k * p.stride + jj;
            for (std::size_t j = 0; j < kTile; ++j) inner[j] = numerics::gemm::fp32_add(inner[j], va, vb[j]);
        }
        for (std::size_t j = 0; j < kTile; ++j) {
            const Scale s = scales_at(rq, i, scale_column(p, jj, j), k0 / 128, kblocks);
            outer[j] = numerics::gemm::fp32_scale(outer[j], s.a, s.b, inner[j], blocks);
        }
        if (!blocks || k0 + span >= rq.k) break;
    }
    for (std::size_t j = 0; j < kTile; ++j) out[j] = to_output(outer[j], rq.out);
}

// exact_element for a tile when exact_width() <= 53: each span's sum of products summed in
// binary64 instead of a 128-bit integer, the same number. Every product of two float32 code
// values is exact in binary64 (at most 2 x 8 significant bits) and a multiple of 2^lsb, and
// every partial sum is such a multiple below 2^(width - 1) units (exact_width's bound), so no
// addition rounds; the sum in units of 2^lsb is then an exact integer, converted without loss.
FP8KIT_GEMM_CLONES void exact_tile(const GemmRequest& rq, const Tables& t, std::size_t i, const DecodedRow& row,
                                   const Panel& p, std::size_t jj, std::uint32_t* out) {
    const int lsb = t.a.min_exp + t.b.min_exp;
    const bool blocks = rq.a.scale_kind == ScaleKind::block;
    const std::size_t span = blocks ? 128 : std::max<std::size_t>(rq.k, 1);
    const std::size_t spans = (rq.k + span - 1) / span;
    std::vector<std::int64_t> units(spans * kTile);
    for (std::size_t s = 0; s < spans; ++s) {
        double sum[kTile] = {};
        for (std::size_t k = s * span; k < std::min(rq.k, (s + 1) * span); ++k) {
            const double va = row.value[k];
            const float* vb = p.value.data() + k * p.stride + jj;
            for (std::size_t j = 0; j < kTile; ++j) sum[j] += va * static_cast<double>(vb[j]);
        }
        for (std::size_t j = 0; j < kTile; ++j)
            units[s * kTile + j] = static_cast<std::int64_t>(std::ldexp(sum[j], -lsb));
    }
    for (std::size_t j = 0; j < kTile && jj + j < p.count; ++j)
        out[j] = exact_from_sums(rq, t, i, p.j0 + jj + j, [&](std::size_t k0, std::size_t) {
            return static_cast<__int128>(units[k0 / span * kTile + j]);
        });
}

// aligned_step (numerics/gemm_model.hpp) on a 1 x kTile tile for the models of aligned_fast()
// (align=trunc, sticky=0, bits <= 29), with the products as binary64 numbers. Per column, the
// same quantities as there, equal number for number:
//  - the largest exponent e: float_exponent of the accumulator, then for each product its
//    align_exp: fa + fb (nominal), or floor(log2 |a b|) (actual) read from the exponent field of
//    the binary64 product a * b (exact: at most 2 x 8 significant bits; a normal binary64 for
//    any two FP8 codes), kNoExponent for a zero product as product() gives;
//  - each product's aligned term: align_halves truncates |sig| * 2^(exp - unit) toward zero and
//    doubles it with the sign; here (a * b) * 2^-unit is exact (a power-of-two scaling far
//    from binary64's limits) and below 2^(bits + 1) <= 2^30 in magnitude (the product is below
//    2^(e + 2), unit = e + 1 - bits), so the conversion to int32, which truncates toward zero,
//    gives the same integer;
//  - the sum h of the halves: the products' truncated terms summed in binary64, integers
//    below 2^30 each and below 2^42 together (group <= 4096), so the binary64 sum is the exact
//    integer sum; doubled and added to the accumulator's halves in int64 (integer additions,
//    no overflow: their order does not matter);
//  - the end: finish_step<int64_t> of the same h and unit, or 0 for an empty step.
FP8KIT_GEMM_CLONES void aligned_fast_step(float (&c)[kTile], int n, const float* av, const std::int32_t* afe,
                                          const float* bv, const std::int32_t* bfe, std::size_t stride,
                                          const numerics::gemm::ModelParams& m) {
    namespace ng = numerics::gemm;
    std::int32_t e[kTile];
    for (std::size_t j = 0; j < kTile; ++j) e[j] = ng::float_exponent(c[j]);
    if (m.nominal_exponent) {
        for (int q = 0; q < n; ++q) {
            const std::int32_t fa = afe[q];
            const std::int32_t* fb = bfe + q * stride;
#pragma omp simd
            for (std::size_t j = 0; j < kTile; ++j) e[j] = std::max(e[j], fa + fb[j]);
        }
    } else {
        for (int q = 0; q < n; ++q) {
            const double va = av[q];
            const float* b = bv + q * stride;
#pragma omp simd
            for (std::size_t j = 0; j < kTile; ++j) {
                const double prod = va * static_cast<double>(b[j]);
                const auto field = static_cast<std::int32_t>((bit_cast<std::uint64_t>(prod) >> 52) & 0x7FF);
                e[j] = std::max(e[j], prod != 0 ? field - 1023 : ng::kNoExponent);
            }
        }
    }
    // kept[j]: the sum of the products' truncated terms (halves / 2), an exact integer.
    double kept[kTile] = {}, inv_unit[kTile];
    for (std::size_t j = 0; j < kTile; ++j) {
        // 2^-unit; an empty step (every product zero, e far below) scales zeros by 1 instead.
        const int field = ng::step_is_empty(e[j]) ? 1023 : 1023 - ng::step_unit(e[j], m);
        inv_unit[j] = bit_cast<double>(static_cast<std::uint64_t>(field) << 52);
    }
    for (int q = 0; q < n; ++q) {
        const double va = av[q];
        const float* b = bv + q * stride;
#pragma omp simd
        for (std::size_t j = 0; j < kTile; ++j)
            kept[j] += static_cast<double>(static_cast<std::int32_t>((va * static_cast<double>(b[j])) * inv_unit[j]));
    }
    for (std::size_t j = 0; j < kTile; ++j) {
        if (ng::step_is_empty(e[j])) {
            c[j] = 0.0f;
            continue;
        }
        const int unit = ng::step_unit(e[j], m);
        const ng::FloatTerm t = ng::float_term(c[j]);
        const std::int64_t h =
            ng::align_halves<std::int64_t>(t.sig, t.exp, unit, m) + 2 * static_cast<std::int64_t>(kept[j]);
        c[j] = ng::finish_step<std::int64_t>(h, unit, m);
    }
}

// aligned_range for a tile: aligned_step on a 1 x kTile tile (the CUDA model's tiles: each
// output's step reads only its own accumulator and products; aligned_fast_step where it
// applies), then promote per column.
void aligned_range_tile(const GemmRequest& rq, const numerics::gemm::ModelParams& m, bool fast, std::size_t i,
                        const DecodedRow& row, const Panel& p, std::size_t jj, std::size_t k_begin, std::size_t k_end,
                        float (&outer)[kTile]) {
    namespace ng = numerics::gemm;
    const std::size_t chunk = ng::chunk_size(m, rq.k, rq.a.scale_kind), kblocks = (rq.k + 127) / 128;
    const bool scale_each = ng::scale_each_chunk(m, rq.a.scale_kind);
    for (float& o : outer) o = 0;
    for (std::size_t c0 = k_begin; c0 < k_end; c0 += chunk) {
        float inner[1][kTile] = {};
        const std::size_t c1 = std::min(k_end, c0 + chunk);
        for (std::size_t k0 = c0; k0 < c1; k0 += m.group) {
            const int n = static_cast<int>(std::min<std::size_t>(m.group, c1 - k0));
            if (fast) {
                const std::size_t at = k0 * p.stride + jj;
                aligned_fast_step(inner[0], n, row.value + k0, row.field_exp + k0, p.value.data() + at,
                                  p.field_exp.data() + at, p.stride, m);
                continue;
            }
            const ng::CodeTerm* b = p.term.data() + k0 * p.stride + jj;
            const auto load_a = [&](int q, int) { return row.term[k0 + q]; };
            const auto load_b = [&](int q, int j) { return b[q * p.stride + j]; };
            ng::aligned_step<std::int64_t, 1, static_cast<int>(kTile)>(inner, n, load_a, load_b, m);
        }
        for (std::size_t j = 0; j < kTile; ++j) {
            const Scale s = scales_at(rq, i, scale_column(p, jj, j), c0 / 128, kblocks);
            outer[j] = ng::promote(outer[j], inner[0][j], c0 == k_begin, scale_each, s.a * s.b, m);
        }
    }
}

// aligned_element for a tile: the split-K ranges reduced per column, then the epilogue.
void aligned_tile(const GemmRequest& rq, const AccumModel& model, std::size_t i, const DecodedRow& row, const Panel& p,
                  std::size_t jj, std::uint32_t* out) {
    namespace ng = numerics::gemm;
    const ng::ModelParams m = params_of(model);
    const std::size_t split = ng::split_size(m, rq.k);
    const bool fast = aligned_fast(model);
    float outer[kTile] = {}, part[kTile];
    for (std::size_t s0 = 0; s0 < rq.k; s0 += split) {
        aligned_range_tile(rq, m, fast, i, row, p, jj, s0, std::min(rq.k, s0 + split), part);
        for (std::size_t j = 0; j < kTile; ++j) outer[j] = ng::reduce_split(outer[j], part[j], s0 == 0);
    }
    const bool rowwise = rq.a.scale_kind == ScaleKind::row || rq.b.scale_kind == ScaleKind::row;
    for (std::size_t j = 0; j < kTile; ++j) {
        if (!ng::scale_each_chunk(m, rq.a.scale_kind)) {
            const Scale s = scales_at(rq, i, scale_column(p, jj, j), 0, (rq.k + 127) / 128);
            outer[j] = ng::aligned_epilogue(outer[j], s.a, s.b, rowwise);
        }
        out[j] = to_output(outer[j], rq.out);
    }
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

void tile(const GemmRequest& rq, const AccumModel& m, const Tables& t, std::size_t i, const DecodedRow& row,
          const Panel& p, std::size_t jj, std::uint32_t* out) {
    switch (m.kind) {
        case AccumKind::exact:
            if (exact_width(t.a, t.b, rq.k) <= 53) return exact_tile(rq, t, i, row, p, jj, out);
            // Wider sums keep the 128-bit integer loop of exact_element.
            for (std::size_t j = 0; j < kTile && jj + j < p.count; ++j) out[j] = exact_element(rq, t, i, p.j0 + jj + j);
            return;
        case AccumKind::fp32: return fp32_tile(rq, i, row, p, jj, out);
        case AccumKind::aligned: return aligned_tile(rq, m, i, row, p, jj, out);
    }
}

}  // namespace fp8kit::gemm::detail
