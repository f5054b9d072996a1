// One-pass magnitude histogram and its evaluation for many scales (see the header for the
// exactness argument).
#include <algorithm>
#include <cfloat>
#include <array>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "convert/float_bits.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/stats/magnitude_histogram.hpp"

namespace fp8kit {
namespace {

constexpr int kM = MagnitudeHistogram::kMantBits;
constexpr std::uint32_t kTailMask = (1u << (23 - kM)) - 1;
constexpr double kEps = 0x1p-53;

using detail::bits_of;
using detail::float_of;

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

// Lower edge of a bin as a binary64: (2^kM + top) * 2^(e - kM); from the bits where it is a
// normal float32 (the common case, and far cheaper than ldexp).
double bin_lo(std::size_t bin) {
    const std::size_t k = bin / 2;
    const int e = static_cast<int>(k >> kM) + MagnitudeHistogram::kMinExp;
    const auto top = static_cast<std::uint32_t>(k & ((1u << kM) - 1));
    if (e >= -126) return float_of((static_cast<std::uint32_t>(e + 127) << 23) | (top << (23 - kM)));
    return std::ldexp(static_cast<double>((1u << kM) + top), e - kM);
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

MagnitudeHistogram::MagnitudeHistogram() : blocks_(static_cast<std::size_t>(kMaxExp - kMinExp + 1)) {}
MagnitudeHistogram::~MagnitudeHistogram() = default;
MagnitudeHistogram::MagnitudeHistogram(MagnitudeHistogram&&) noexcept = default;
MagnitudeHistogram& MagnitudeHistogram::operator=(MagnitudeHistogram&&) noexcept = default;

namespace {
// Raw bits of element i as float32 bits (f16 and bf16 widen exactly).
std::uint32_t f32_bits_at(const unsigned char* p, Wide type, std::size_t i) {
    std::uint32_t u;
    if (type == Wide::f32) {
        std::memcpy(&u, p + 4 * i, 4);
        return u;
    }
    std::uint16_t h;
    std::memcpy(&h, p + 2 * i, 2);
    return type == Wide::bf16 ? static_cast<std::uint32_t>(h) << 16
                              : emu::convert<emu::Binary16, emu::Binary32>(h, emu::kDecodePolicy);
}
}  // namespace

void MagnitudeHistogram::add_one(std::uint32_t u, std::uint64_t k) {
    const std::uint32_t mag = u & 0x7FFFFFFFu;
    if (mag == 0) {
        zeros_ += k;
        return;
    }
    if (mag >= 0x7F800000u) {
        (mag == 0x7F800000u ? inf_ : nan_) += k;
        return;
    }
    const std::size_t b = bin_of(mag);
    const double x = float_of(mag);
    const double u_ = x - bin_lo(b);  // exact: same binade as the edge
    auto& blk = blocks_[b / kPerExp];
    if (!blk) blk = std::make_unique<Block>();
    const std::size_t j = b % kPerExp;
    blk->n[j] += k;
    if (k == 1) {  // the common path: the same operations as ever (byte-identical sums)
        blk->s1[j] += u_;
        blk->s2[j] += u_ * u_;
    } else {
        const double kd = static_cast<double>(k);
        blk->s1[j] += kd * u_;
        blk->s2[j] += kd * (u_ * u_);
    }
    if (x > amax_) amax_ = x;
}

void MagnitudeHistogram::check_add(Wide type) const {
    if (finished_) throw std::logic_error("MagnitudeHistogram::add after finish()");
    if (type == Wide::f64)
        throw std::invalid_argument("MagnitudeHistogram: f64 data is not exactly a float32 (use compute_stats)");
}

void MagnitudeHistogram::add(const void* data, Wide type, std::size_t n) {
    check_add(type);
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < n; ++i) add_one(f32_bits_at(p, type, i), 1);
    numel_ += n;
}

void MagnitudeHistogram::add_repeated(const void* data, Wide type, std::uint64_t repeat) {
    check_add(type);
    if (repeat == 0) return;
    add_one(f32_bits_at(static_cast<const unsigned char*>(data), type, 0), repeat);
    numel_ += repeat;
}

void MagnitudeHistogram::collect(Sparse& out) const {
    for (std::size_t e = 0; e < blocks_.size(); ++e) {
        if (!blocks_[e]) continue;
        const Block& b = *blocks_[e];
        for (std::size_t j = 0; j < kPerExp; ++j)
            if (b.n[j]) {
                out.bin.push_back(static_cast<std::uint32_t>(e * kPerExp + j));
                out.n.push_back(b.n[j]);
                out.s1.push_back(b.s1[j]);
                out.s2.push_back(b.s2[j]);
            }
    }
}

void MagnitudeHistogram::finish() {
    if (finished_) return;
    collect(sparse_);
    blocks_.clear();
    blocks_.shrink_to_fit();
    finished_ = true;
}

std::size_t MagnitudeHistogram::used_bins() const {
    if (finished_) return sparse_.bin.size();
    Sparse s;
    collect(s);
    return s.bin.size();
}

namespace {

template <class T>
void put_vector(std::string& out, const std::vector<T>& v) {
    const std::uint64_t n = v.size();
    out.append(reinterpret_cast<const char*>(&n), sizeof n);
    out.append(reinterpret_cast<const char*>(v.data()), n * sizeof(T));
}

template <class T>
void get_raw(const std::string& in, std::size_t& pos, T* dst, std::size_t count) {
    if (count > (in.size() - pos) / sizeof(T)) throw std::runtime_error("MagnitudeHistogram::load: truncated bytes");
    std::memcpy(dst, in.data() + pos, count * sizeof(T));
    pos += count * sizeof(T);
}

template <class T>
void get_vector(const std::string& in, std::size_t& pos, std::vector<T>& v) {
    std::uint64_t n = 0;
    get_raw(in, pos, &n, 1);
    if (n > MagnitudeHistogram::kBins) throw std::runtime_error("MagnitudeHistogram::load: too many bins");
    v.resize(n);
    get_raw(in, pos, v.data(), n);
}

}  // namespace

void MagnitudeHistogram::save(std::string& out) const {
    if (!finished_) throw std::logic_error("MagnitudeHistogram::save before finish()");
    const std::uint64_t head[4] = {numel_, zeros_, nan_, inf_};
    out.append(reinterpret_cast<const char*>(head), sizeof head);
    out.append(reinterpret_cast<const char*>(&amax_), sizeof amax_);
    put_vector(out, sparse_.bin), put_vector(out, sparse_.n), put_vector(out, sparse_.s1), put_vector(out, sparse_.s2);
}

MagnitudeHistogram MagnitudeHistogram::load(const std::string& in, std::size_t& pos) {
    MagnitudeHistogram h;
    std::uint64_t head[4];
    get_raw(in, pos, head, 4);
    h.numel_ = head[0], h.zeros_ = head[1], h.nan_ = head[2], h.inf_ = head[3];
    get_raw(in, pos, &h.amax_, 1);
    get_vector(in, pos, h.sparse_.bin), get_vector(in, pos, h.sparse_.n);
    get_vector(in, pos, h.sparse_.s1), get_vector(in, pos, h.sparse_.s2);
    const std::size_t n = h.sparse_.bin.size();
    if (h.sparse_.n.size() != n || h.sparse_.s1.size() != n || h.sparse_.s2.size() != n)
        throw std::runtime_error("MagnitudeHistogram::load: bins and sums disagree");
    for (auto b : h.sparse_.bin)
        if (b >= kBins) throw std::runtime_error("MagnitudeHistogram::load: bin out of range");
    h.blocks_.clear();
    h.blocks_.shrink_to_fit();
    h.finished_ = true;
    return h;
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
        throw std::invalid_argument(
            fmt::format("MagnitudeHistogram: scale {} / scale_inv {} must be finite and > 0", scale, scale_inv));
    Eval ev;
    ev.f = f;
    ev.policy = policy;
    ev.scale = scale;
    ev.scale_inv = scale_inv;
    {  // code values and classes per format, built once (a sweep evaluates thousands of scales)
        struct Table {
            double dec[256];
            std::uint8_t cls[256];
        };
        static const auto tables = [] {
            std::vector<Table> t(std::size(emu::kAllFormats));
            for (std::size_t i = 0; i < t.size(); ++i)
                for (int c = 0; c < 256; ++c) {
                    const auto code = static_cast<std::uint8_t>(c);
                    t[i].dec[c] = decode_value(emu::kAllFormats[i], code);
                    const auto k = classify(emu::kAllFormats[i], code);
                    t[i].cls[c] = k == CodeClass::zero        ? 0
                                  : k == CodeClass::subnormal ? 1
                                  : k == CodeClass::normal    ? 2
                                                              : 3;
                }
            return t;
        }();
        std::size_t i = 0;
        while (i < tables.size() && emu::kAllFormats[i] != f) ++i;
        if (i == tables.size()) throw std::invalid_argument("MagnitudeHistogram: unknown format");
        std::memcpy(ev.dec, tables[i].dec, sizeof ev.dec);
        std::memcpy(ev.cls, tables[i].cls, sizeof ev.cls);
    }
    {  // overflow threshold as statistics.cpp defines overflow: a code past max without saturation.
        // Found by bisection once per (format, rounding, NaN encoding) and kept: a sweep of 10^5
        // small dumped tensors evaluates millions of scales, and the bisection's 31 encodes
        // cost more than a small histogram's evaluation. Any thread computes the same value.
        const Policy nosat{policy.rounding, Overflow::no_saturate, policy.nan};
        static std::array<std::atomic<std::uint64_t>, emu::kNumFormats * 8 * 8> known{};  // limit | 1 << 32
        std::size_t fi = 0;
        while (fi < std::size(emu::kAllFormats) && emu::kAllFormats[fi] != f) ++fi;
        const auto r = static_cast<std::size_t>(policy.rounding), n = static_cast<std::size_t>(policy.nan);
        const bool cacheable = fi < std::size(emu::kAllFormats) && r < 8 && n < 8;
        const std::size_t key = (fi * 8 + r) * 8 + n;
        const std::uint64_t k = cacheable ? known[key].load(std::memory_order_relaxed) : 0;
        if (k) {
            ev.limit = static_cast<std::uint32_t>(k);
        } else {
            std::uint32_t lo = 0, hi = 0x7F800000u;
            while (hi - lo > 1) {
                const std::uint32_t mid = lo + (hi - lo) / 2;
                (emu::overflows(f, Wide::f32, mid, nosat) ? hi : lo) = mid;
            }
            ev.limit = lo;
            if (cacheable) known[key].store(std::uint64_t{lo} | (std::uint64_t{1} << 32), std::memory_order_relaxed);
        }
    }

    Result r;
    r.numel = numel_;
    r.zeros = zeros_;
    r.nan = nan_;
    r.inf = inf_;
    r.amax = amax_;
    double under = 0, sub = 0, over = 0;  // estimates (ambiguous bins add fractions)
    double bins_touched = 0;
    bool have_prev = false;
    std::pair<std::uint8_t, bool> prev_outcome{0, false};
    Sparse local;
    if (!finished_) collect(local);
    const Sparse& sp = finished_ ? sparse_ : local;
    for (std::size_t i = 0; i < sp.bin.size(); ++i) {
        const std::size_t b = sp.bin[i];
        const std::uint64_t n = sp.n[i];
        ++bins_touched;
        const double lo = bin_lo(b);
        const double nd = static_cast<double>(n);
        const double S1 = sp.s1[i], S2 = sp.s2[i];
        r.sum_x2 += nd * lo * lo + 2 * lo * S1 + S2;
        // Smallest and largest float32 this bin can hold.
        float a, z;
        if ((b & 1) == 0) {
            a = z = static_cast<float>(lo);
        } else {
            const int e = static_cast<int>((b / 2) >> kM) + kMinExp;
            const double hi_edge = lo + std::ldexp(1.0, e - kM);
            a = std::nextafter(static_cast<float>(lo), INFINITY);
            z = std::nextafter(static_cast<float>(hi_edge), 0.0f);  // 2^128 -> Inf -> FLT_MAX
        }
        // The outcome is monotone in |x| and bins come in increasing order: when the previous
        // bin's largest value already has this bin's top outcome, so does everything between.
        const auto cz = ev.at(z);
        const auto ca = have_prev && prev_outcome == cz ? cz : ev.at(a);
        have_prev = true;
        prev_outcome = cz;
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
