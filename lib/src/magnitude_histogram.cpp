// One-pass magnitude histogram and its evaluation for many scales (see the header for the
// exactness argument).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/format_info.hpp"
#include "fp8kit/magnitude_histogram.hpp"

namespace fp8kit {
namespace {

constexpr int kM = MagnitudeHistogram::kMantBits;
constexpr std::uint32_t kTailMask = (1u << (23 - kM)) - 1;
constexpr double kEps = 0x1p-53;

std::uint32_t bits_of(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}
float float_of(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}

// Bin of a finite nonzero magnitude (bits without sign).
std::size_t bin_of(std::uint32_t mag) {
    std::uint32_t biased = mag >> 23, frac = mag & 0x7FFFFFu;
    int e;
    if (biased != 0) {
        e = static_cast<int>(biased) - 127;
    } else {  // float32 subnormal: normalise so the bits after the leading one line up
        const int p = 31 - __builtin_clz(frac);  // position of the leading one
        e = -149 + p;
        frac = (frac << (23 - p)) & 0x7FFFFFu;
    }
    const std::uint32_t top = frac >> (23 - kM);
    const std::uint32_t tail = (frac & kTailMask) != 0;
    return ((static_cast<std::size_t>(e - MagnitudeHistogram::kMinExp) << kM) | top) * 2 + tail;
}

// Lower edge of a bin as a binary64: (2^kM + top) * 2^(e - kM).
double bin_lo(std::size_t bin) {
    const std::size_t k = bin / 2;
    const int e = static_cast<int>(k >> kM) + MagnitudeHistogram::kMinExp;
    const auto top = static_cast<int>(k & ((1u << kM) - 1));
    return std::ldexp(static_cast<double>((1 << kM) + top), e - kM);
}

struct Eval {
    Format f;
    Policy policy;
    float scale;
    double scale_inv;
    double dec[256];
    std::uint8_t cls[256];  // 0 zero, 1 subnormal, 2 normal, 3 NaN/Inf
    std::uint32_t limit;    // largest float32 magnitude whose code is finite without saturation

    // (code, overflow) of a positive magnitude v: the cast of fl32(v * scale).
    std::pair<std::uint8_t, bool> at(float v) const {
        const std::uint32_t s = bits_of(v * scale);
        return {emu::encode(f, Wide::f32, s, policy), s > limit};
    }
};

}  // namespace

MagnitudeHistogram::MagnitudeHistogram()
    : n_(kBins, 0), s1_(kBins, 0.0), s2_(kBins, 0.0), lo_bin_(kBins), hi_bin_(0) {}

void MagnitudeHistogram::add(const void* data, Wide type, std::size_t n) {
    if (finished_) throw std::logic_error("MagnitudeHistogram::add after finish()");
    if (type == Wide::f64)
        throw std::invalid_argument("MagnitudeHistogram: f64 data is not exactly a float32 (use compute_stats)");
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) {
        std::uint32_t u;
        if (type == Wide::f32) {
            std::memcpy(&u, p + 4 * i, 4);
        } else {
            std::uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            u = type == Wide::bf16 ? static_cast<std::uint32_t>(h) << 16
                                   : emu::convert<emu::Binary16, emu::Binary32>(h, emu::kDecodePolicy);
        }
        const std::uint32_t mag = u & 0x7FFFFFFFu;
        if (mag == 0) { ++zeros_; continue; }
        if (mag >= 0x7F800000u) { ++(mag == 0x7F800000u ? inf_ : nan_); continue; }
        const std::size_t b = bin_of(mag);
        const double x = float_of(mag);
        const double u_ = x - bin_lo(b);  // exact: same binade as the edge
        ++n_[b];
        s1_[b] += u_;
        s2_[b] += u_ * u_;
        if (x > amax_) amax_ = x;
        lo_bin_ = std::min(lo_bin_, b);
        hi_bin_ = std::max(hi_bin_, b);
    }
    numel_ += n;
}

void MagnitudeHistogram::finish() {
    if (finished_) return;
    std::vector<std::uint64_t> n;
    std::vector<double> s1, s2;
    for (std::size_t b = lo_bin_; b <= hi_bin_ && b < kBins; ++b)
        if (n_[b]) {
            bin_.push_back(static_cast<std::uint32_t>(b));
            n.push_back(n_[b]);
            s1.push_back(s1_[b]);
            s2.push_back(s2_[b]);
        }
    n_.swap(n);
    s1_.swap(s1);
    s2_.swap(s2);
    finished_ = true;
}

std::size_t MagnitudeHistogram::used_bins() const {
    if (finished_) return bin_.size();
    std::size_t k = 0;
    for (std::size_t b = lo_bin_; b <= hi_bin_ && b < kBins; ++b) k += n_[b] != 0;
    return k;
}

double MagnitudeHistogram::Result::sqnr_db() const {
    if (sum_err2 == 0) return INFINITY;
    return 10.0 * std::log10(sum_x2 / sum_err2);
}
double MagnitudeHistogram::Result::sqnr_db_lo() const {
    const double e = sum_err2_hi + err2_rounding;
    return e == 0 ? INFINITY : 10.0 * std::log10(sum_x2 / e);
}
double MagnitudeHistogram::Result::sqnr_db_hi() const {
    const double e = sum_err2_lo - err2_rounding;
    return e <= 0 ? INFINITY : 10.0 * std::log10(sum_x2 / e);
}

MagnitudeHistogram::Result MagnitudeHistogram::evaluate(Format f, float scale, float scale_inv,
                                                        const Policy& policy) const {
    if (policy.rounding != Rounding::nearest_even && policy.rounding != Rounding::nearest_away &&
        policy.rounding != Rounding::toward_zero)
        throw std::invalid_argument(fmt::format(
            "MagnitudeHistogram: rounding {} is not symmetric in the sign (use compute_stats)", name(policy.rounding)));
    if (!(scale > 0) || std::isinf(scale) || !(scale_inv > 0) || std::isinf(scale_inv))
        throw std::invalid_argument(fmt::format("MagnitudeHistogram: scale {} / scale_inv {} must be finite and > 0",
                                                scale, scale_inv));
    Eval ev;
    ev.f = f;
    ev.policy = policy;
    ev.scale = scale;
    ev.scale_inv = scale_inv;
    for (int c = 0; c < 256; ++c) {
        const auto code = static_cast<std::uint8_t>(c);
        ev.dec[c] = decode_value(f, code);
        const auto k = classify(f, code);
        ev.cls[c] = k == CodeClass::zero ? 0 : k == CodeClass::subnormal ? 1 : k == CodeClass::normal ? 2 : 3;
    }
    {  // overflow threshold as statistics.cpp defines overflow: a code past max without saturation
        const Policy nosat{policy.rounding, Overflow::no_saturate, policy.nan};
        std::uint32_t lo = 0, hi = 0x7F800000u;
        while (hi - lo > 1) {
            const std::uint32_t mid = lo + (hi - lo) / 2;
            (ev.cls[emu::encode(f, Wide::f32, mid, nosat)] == 3 ? hi : lo) = mid;
        }
        ev.limit = lo;
    }

    Result r;
    r.numel = numel_;
    r.zeros = zeros_;
    r.nan = nan_;
    r.inf = inf_;
    r.amax = amax_;
    double under = 0, sub = 0, over = 0;  // estimates (ambiguous bins add fractions)
    double bins_touched = 0;
    const std::size_t first = finished_ ? 0 : lo_bin_;
    const std::size_t last = finished_ ? bin_.size() : std::min(hi_bin_ + 1, kBins);
    for (std::size_t i = first; i < last; ++i) {
        const std::size_t b = finished_ ? bin_[i] : i;
        const std::uint64_t n = n_[i];
        if (n == 0) continue;
        ++bins_touched;
        const double lo = bin_lo(b);
        const double nd = static_cast<double>(n);
        const double S1 = s1_[i], S2 = s2_[i];
        r.sum_x2 += nd * lo * lo + 2 * lo * S1 + S2;
        // Smallest and largest float32 this bin can hold.
        float a, z;
        if ((b & 1) == 0) {
            a = z = static_cast<float>(lo);
        } else {
            const double hi_edge = lo + std::ldexp(1.0, std::ilogb(lo) - kM);
            a = std::nextafter(static_cast<float>(lo), INFINITY);
            z = std::nextafter(static_cast<float>(hi_edge), 0.0f);  // 2^128 -> Inf -> FLT_MAX
        }
        const auto ca = ev.at(a), cz = ev.at(z);
        if (ca == cz) {  // exact bin
            const std::uint8_t c = ca.first;
            under += ev.cls[c] == 0 ? nd : 0;
            sub += ev.cls[c] == 1 ? nd : 0;
            over += ca.second ? nd : 0;
            const double xh = ev.dec[c] * ev.scale_inv;
            if (!std::isfinite(xh)) {
                r.sum_err2 = r.sum_err2_lo = r.sum_err2_hi = INFINITY;
                continue;
            }
            const double d = xh - lo;
            const double e2 = std::max(0.0, S2 - 2 * d * S1 + nd * d * d);
            r.sum_err2 += e2;
            r.sum_err2_lo += e2;
            r.sum_err2_hi += e2;
            r.err2_rounding += (nd + 4) * kEps * (S2 + 2 * std::fabs(d) * S1 + nd * d * d);
            continue;
        }
        // Ambiguous: cut [a, z] into segments of one (code, overflow) by bisection on the bits
        // (the outcome is monotone in |x|), then assume the elements spread evenly in value for
        // the estimate and take exact per-element extremes for the bounds.
        r.ambiguous += n;
        const double width = static_cast<double>(z) - a;
        double est = 0, e_lo = INFINITY, e_hi = 0;
        bool cls_differs[3] = {false, false, false};
        const auto first = ca;
        std::uint32_t sb = bits_of(a);
        const std::uint32_t zb = bits_of(z);
        while (true) {
            const auto cs = ev.at(float_of(sb));
            std::uint32_t eb = zb;  // last bits with outcome cs
            if (ev.at(float_of(zb)) != cs) {
                std::uint32_t l = sb, h = zb;  // l has cs, h does not
                while (h - l > 1) {
                    const std::uint32_t mid = l + (h - l) / 2;
                    (ev.at(float_of(mid)) == cs ? l : h) = mid;
                }
                eb = l;
            }
            const double x0 = float_of(sb), x1 = float_of(eb);
            // The segment's share of the bin, by value (a single float gets the gap to the next).
            const double x1n = eb == zb ? x1 : static_cast<double>(float_of(eb + 1));
            const double share = width > 0 ? (x1n - x0) / width : 1.0;
            const double k = nd * std::min(1.0, std::max(0.0, share));
            under += ev.cls[cs.first] == 0 ? k : 0;
            sub += ev.cls[cs.first] == 1 ? k : 0;
            over += cs.second ? k : 0;
            cls_differs[0] |= (ev.cls[cs.first] == 0) != (ev.cls[first.first] == 0);
            cls_differs[1] |= (ev.cls[cs.first] == 1) != (ev.cls[first.first] == 1);
            cls_differs[2] |= cs.second != first.second;
            const double xh = ev.dec[cs.first] * ev.scale_inv;
            if (!std::isfinite(xh)) {
                est = e_hi = INFINITY;
            } else {
                // |x - xh| over [x0, x1]: largest at an end, smallest 0 when xh is inside.
                const double m_hi = std::max(std::fabs(x0 - xh), std::fabs(x1 - xh));
                const double m_lo = (xh >= x0 && xh <= x1) ? 0.0 : std::min(std::fabs(x0 - xh), std::fabs(x1 - xh));
                e_hi = std::max(e_hi, m_hi * m_hi);
                e_lo = std::min(e_lo, m_lo * m_lo);
                // Mean of (x - xh)^2 for x even on [x0, x1n).
                const double p = x0 - xh, q = x1n - xh;
                const double mean2 = q > p ? (q * q * q - p * p * p) / (3 * (q - p)) : p * p;
                est += k * mean2;
            }
            if (eb == zb) break;
            sb = eb + 1;
        }
        const double lo_sum = nd * e_lo, hi_sum = nd * e_hi;
        r.sum_err2 += std::min(hi_sum, std::max(lo_sum, est));
        r.sum_err2_lo += lo_sum;
        r.sum_err2_hi += hi_sum;
        r.err2_rounding += 8 * kEps * hi_sum;
        if (cls_differs[0]) r.underflow_uncertain += n;
        if (cls_differs[1]) r.subnormal_uncertain += n;
        if (cls_differs[2]) r.overflow_uncertain += n;
    }
    r.underflow = static_cast<std::uint64_t>(std::llround(under));
    r.subnormal = static_cast<std::uint64_t>(std::llround(sub));
    r.overflow = static_cast<std::uint64_t>(std::llround(over));
    // The sum over bins adds one rounding per bin on top of each bin's own.
    if (std::isfinite(r.sum_err2_hi)) r.err2_rounding += (bins_touched + 2) * kEps * r.sum_err2_hi;
    return r;
}

}  // namespace fp8kit
