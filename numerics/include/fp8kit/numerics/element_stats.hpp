// The statistics of one element, written once for every loop that computes them: lib's general
// loop, lib's AVX-512 loop (same predicates on the bits, checked bit for bit against the general
// loop) and the CUDA kernel. docs/statistics.md defines each number. With s = fl32(x * scale),
// q = encode(s) under the policy and x^ = decode(q) * scale_inv in binary64:
//   nan, inf         x is NaN / +-Inf (kept out of every sum and extreme)
//   zero             x == +-0
//   underflow        x finite nonzero and q is a zero code
//   subnormal        x finite nonzero and q is a nonzero subnormal code
//   overflow         x finite and s rounds past the largest finite value under the policy's rounding
//                    (whatever the overflow policy then does with it)
//   te_overflow      |x| > fl32(fmax * scale_inv) (TransformerEngine's overflows%; NaN never)
//   nonzero_x/_q     count_nonzero of x and of decode(q) (NaN counts): te_underflow is their difference
//   x2, err2         x^2 and (x - x^)^2 in binary64; err2 is +Inf when q is NaN/Inf for a finite x
//   histogram        the bin of s: 0 for +-0, 1 + (e + 149) for floor(log2|s|) = e in [-149, 127]
//                    (float32 subnormals from the leading bit), 278 for NaN/Inf
// The result types (StatsScalars: what a loop adds up; QuantStats: with the histogram) are the
// ones lib returns and the CUDA kernel fills.
#pragma once

#include <array>
#include <cmath>
#include <cstdint>
#include <limits>

#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::numerics {

// ---- exponent histogram -------------------------------------------------------------------

inline constexpr int kHistogramMinExp = -149;
inline constexpr int kHistogramMaxExp = 127;
inline constexpr int kHistogramZeroBin = 0;
inline constexpr int kHistogramNonfiniteBin = kHistogramMaxExp - kHistogramMinExp + 2;  // 278
inline constexpr int kHistogramBins = kHistogramNonfiniteBin + 1;                       // 279

FP8KIT_HD constexpr int histogram_bin_of_exponent(int e) { return e - kHistogramMinExp + 1; }
FP8KIT_HD constexpr int histogram_exponent(int bin) { return bin + kHistogramMinExp - 1; }

// Bin of a float32 from its bits.
FP8KIT_HD int histogram_bin(std::uint32_t bits) {
    const std::uint32_t mag = bits & 0x7FFFFFFFu;
    if (mag == 0u) return kHistogramZeroBin;
    if (mag >= 0x7F800000u) return kHistogramNonfiniteBin;
    return histogram_bin_of_exponent(floor_log2(float_of(mag)));
}

// ---- codes --------------------------------------------------------------------------------

enum class CodeKind : std::uint8_t { zero, subnormal, normal, special /* NaN or Inf */ };

// What a code of an element format decodes to, from the float32 bits it decodes to (for a
// caller that has them already).
FP8KIT_HD CodeKind code_kind_of_decoded(Format f, std::uint32_t decoded_bits) {
    const std::uint32_t mag = decoded_bits & 0x7FFFFFFFu;
    if (mag == 0u) return CodeKind::zero;
    if (mag >= 0x7F800000u) return CodeKind::special;
    const int emin = emu::with_format(f, [](auto fmt) { return decltype(fmt)::emin; });
    return floor_log2(float_of(mag)) < emin ? CodeKind::subnormal : CodeKind::normal;
}

// What a code of an element format decodes to.
FP8KIT_HD CodeKind code_kind(Format f, std::uint8_t code) {
    return code_kind_of_decoded(f, static_cast<std::uint32_t>(emu::decode(f, emu::Wide::f32, code)));
}

// The policy with overflow left unsaturated: a code that is NaN/Inf under it marks an overflow.
FP8KIT_HD emu::Policy no_saturate(emu::Policy p) {
    p.overflow = emu::Overflow::no_saturate;
    return p;
}

// Under a deterministic rounding, overflow is monotone in |s| for a fixed sign: the largest
// float32 magnitude (bits) of sign `negative` that still converts to a finite code (binary search).
FP8KIT_HD std::uint32_t overflow_limit(Format f, emu::Policy p, bool negative) {
    std::uint32_t lo = 0, hi = 0x7F800000u;  // lo never overflows, hi (Inf) always does
    while (hi - lo > 1) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        // emu's definition of an overflow: the Inf/NaN code of a non-saturating conversion, or,
        // for formats with neither (FP4/FP6), a rounding past the largest finite value.
        (emu::overflows(f, emu::Wide::f32, mid | (negative ? 0x80000000u : 0u), p, 0) ? hi : lo) = mid;
    }
    return lo;
}

// ---- the element step ---------------------------------------------------------------------

// What the element step reads besides the element: fixed per (format, policy, scale).
struct ElementConsts {
    double scale_inv;        // exact binary64 value of the float32 scale_inv
    float te_threshold;      // fl32(fmax * scale_inv)
    std::uint32_t limit[2];  // overflow_limit(format, policy, sign) (deterministic rounding)
    std::uint32_t max_bits;  // bits of format_max(format)
};

// The scale-dependent part, for a new scale_inv (per block) with the same format and policy.
FP8KIT_HD void rescale(ElementConsts& c, float scale_inv) {
    c.scale_inv = static_cast<double>(scale_inv);
    c.te_threshold = mul_rn(float_of(c.max_bits), scale_inv);
}

FP8KIT_HD ElementConsts element_consts(Format f, emu::Policy p, float scale_inv) {
    ElementConsts c{};
    c.limit[0] = overflow_limit(f, p, false);
    c.limit[1] = overflow_limit(f, p, true);
    c.max_bits = bits_of(format_max(f));
    rescale(c, scale_inv);
    return c;
}

// Deterministic rounding: does s (bits of fl32(x * scale), x finite) round past the largest
// finite value? Stochastic rounding: only |s| above max finite can; confirm with the element's
// own random bits by encoding under no_saturate (stochastic_overflows).
FP8KIT_HD bool overflows(const ElementConsts& c, std::uint32_t s) { return (s & 0x7FFFFFFFu) > c.limit[s >> 31]; }
FP8KIT_HD bool stochastic_overflows(const ElementConsts& c, Format f, emu::Policy p, std::uint32_t s,
                                    std::uint32_t random) {
    if ((s & 0x7FFFFFFFu) <= c.max_bits) return false;
    return emu::overflows(f, emu::Wide::f32, s, p, random);
}

// One element's contribution (see the top of this file).
struct Element {
    bool nan = false, inf = false, zero = false, underflow = false, subnormal = false, overflow = false,
         te_overflow = false, nonzero_x = false, nonzero_q = false;
    bool finite = false;  // x finite: joins amax, min_nonzero and the sums
    double abs_x = 0;     // |x| when finite
    double x2 = 0, err2 = 0;
};

// x: the input's exact value (float, or double for binary64 inputs); kind and decoded: code_kind
// and the decoded value of q; overflowed(): overflows / stochastic_overflows for s, asked only
// for finite x.
template <class X, class Overflowed>
FP8KIT_HD Element element_step(X x, CodeKind kind, double decoded, const ElementConsts& c, Overflowed&& overflowed) {
    Element r;
    const X ax = x < X(0) ? -x : x;
    r.nonzero_x = !(x == X(0));  // NaN counts as nonzero
    r.nonzero_q = !(decoded == 0.0);
    if (x != x) {
        r.nan = true;
        return r;
    }
    r.te_overflow = ax > c.te_threshold;
    if (!(ax - ax == X(0))) {  // Inf (NaN was handled above)
        r.inf = true;
        return r;
    }
    r.finite = true;
    r.abs_x = static_cast<double>(ax);
    if (ax == X(0)) {
        r.zero = true;
    } else {
        r.underflow = kind == CodeKind::zero;
        r.subnormal = kind == CodeKind::subnormal;
    }
    r.overflow = overflowed();
    const double xd = static_cast<double>(x);
    const double xh = decoded * c.scale_inv;  // exact: a short code value times a float
    const double e = xd - xh;
    r.x2 = xd * xd;
    r.err2 = (xh - xh == 0.0) ? e * e : static_cast<double>(float_of(0x7F800000u));
    return r;
}

// ---- results ------------------------------------------------------------------------------

// What an element loop adds up (everything but the histogram). POD: kernels fill it too.
struct StatsScalars {
    std::uint64_t numel = 0;
    std::uint64_t zeros = 0;        // inputs equal to +-0
    std::uint64_t nan = 0;          // NaN inputs
    std::uint64_t inf = 0;          // +-Inf inputs
    std::uint64_t underflow = 0;    // nonzero inputs whose code is +-0 (NaN/Inf inputs never)
    std::uint64_t subnormal = 0;    // nonzero inputs whose code is a nonzero subnormal
    std::uint64_t overflow = 0;     // finite inputs with fl32(x*scale) rounding past max finite
    std::int64_t te_underflow = 0;  // TE: count_nonzero(x) - count_nonzero(decode(q))
    std::uint64_t te_overflow = 0;  // TE: #{|x| > fl32(fmax * scale_inv)} (NaN never counted)
    double amax = 0;                // max |x| over finite x (0 when none)
    double min_nonzero = 0;         // min nonzero finite |x| (0 when none)
    double sum_x2 = 0;              // sum over finite x of x^2, binary64
    double sum_err2 = 0;            // sum over finite x of (x - x^)^2, binary64 (+Inf: see err2)
};

// Counts add, minima take the min, maxima the max, sums add (in the caller's fixed order).
FP8KIT_HD void merge(StatsScalars& st, const StatsScalars& o) {
    st.numel += o.numel;
    st.zeros += o.zeros;
    st.nan += o.nan;
    st.inf += o.inf;
    st.underflow += o.underflow;
    st.subnormal += o.subnormal;
    st.overflow += o.overflow;
    st.te_underflow += o.te_underflow;
    st.te_overflow += o.te_overflow;
    if (o.amax > st.amax) st.amax = o.amax;
    if (o.min_nonzero != 0.0 && (st.min_nonzero == 0.0 || o.min_nonzero < st.min_nonzero))
        st.min_nonzero = o.min_nonzero;
    st.sum_x2 += o.sum_x2;
    st.sum_err2 += o.sum_err2;
}

// The statistics of a tensor: lib's compute_stats result and the CUDA kernel's (host type).
struct QuantStats : StatsScalars {
    std::array<std::uint64_t, kHistogramBins> exp_hist{};  // bins of s, see histogram_bin

    std::uint64_t finite() const { return numel - nan - inf; }
    // sum_err2 / finite(); NaN when there is no finite input.
    double mse() const {
        const std::uint64_t n = finite();
        return n == 0 ? std::numeric_limits<double>::quiet_NaN() : sum_err2 / static_cast<double>(n);
    }
    // 10 log10(sum_x2 / sum_err2); +Inf when sum_err2 == 0, -Inf when sum_x2 == 0 < sum_err2.
    double sqnr_db() const {
        if (sum_err2 == 0.0) return std::numeric_limits<double>::infinity();
        if (sum_x2 == 0.0) return -std::numeric_limits<double>::infinity();
        return 10.0 * std::log10(sum_x2 / sum_err2);
    }
    // log2(amax) - log2(min_nonzero); 0 when there is no nonzero finite input.
    double dynamic_range_binades() const {
        if (min_nonzero == 0.0) return 0.0;
        return std::log2(amax) - std::log2(min_nonzero);
    }
    void merge(const QuantStats& o) {
        numerics::merge(*this, o);
        for (int b = 0; b < kHistogramBins; ++b)
            exp_hist[static_cast<std::size_t>(b)] += o.exp_hist[static_cast<std::size_t>(b)];
    }
};

}  // namespace fp8kit::numerics
