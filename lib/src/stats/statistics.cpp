// FP8 statistics (docs/statistics.md). Work is split into fixed-size chunks whose partial
// results are merged in chunk order, so the binary64 sums do not depend on the thread count.
// Codes come from encode_array (the reference conversion or a path proven identical to it) on
// the float32 scaled values; everything else is read from the bits or from 256-entry tables.
#include "convert/float_bits.hpp"
#include "fp8kit/stats/statistics.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "convert/encode_serial.hpp"
#include "stats/statistics_simd.hpp"

namespace fp8kit {
namespace {

std::atomic<StatsPath>& stats_path_ref() {
    static std::atomic<StatsPath> path{StatsPath::fast};
    return path;
}

}  // namespace

void set_stats_path(StatsPath p) { stats_path_ref().store(p); }
StatsPath stats_path() { return stats_path_ref().load(std::memory_order_relaxed); }

namespace {

constexpr std::size_t kChunk = std::size_t{1} << 16;  // elements per partial result

using detail::bits_of;
using detail::float_of;

// Exponent-histogram bin of a float32 from its bits (numerics/element_stats.hpp).
std::size_t hist_bin(std::uint32_t s) { return static_cast<std::size_t>(numerics::histogram_bin(s)); }

// fl32(x * scale) for a binary64 x with a single rounding (nearest-even): the binary64 product
// p is rounded to float32, and where p sits exactly on a float32 midpoint the exact product's
// remainder (from fma) decides, as a single rounding of the exact product would.
float scaled_f64(double x, float scale) {
    const double sc = scale;
    const double p = x * sc;
    const float f = static_cast<float>(p);
    const double err = std::fma(x, sc, -p);
    if (err == 0.0 || std::isnan(p)) return f;
    if (std::isinf(f)) {
        // p rounded up to Inf from exactly the midpoint FLT_MAX + half an ulp: a remainder
        // pulling back toward zero makes the exact product round to FLT_MAX.
        const double mid = 0x1.ffffffp127;
        if (std::fabs(p) == mid && (err < 0) == (p > 0)) return p > 0 ? FLT_MAX : -FLT_MAX;
        return f;
    }
    const double df = f;
    if (df == p) return f;  // p is a float; the remainder is far below half an ulp
    const float g = std::nextafter(f, p > df ? INFINITY : -INFINITY);
    if (std::isinf(g)) return f;
    if (df + static_cast<double>(g) != 2.0 * p) return f;  // not a midpoint: rounding was single
    // On the midpoint: the exact product lies on the side the remainder points to.
    const bool toward_g = (err > 0) == (static_cast<double>(g) > p);
    return toward_g ? g : f;
}

// Everything per format/policy/scale that the element loop reads.
struct Prepared {
    Format format;
    Policy policy;
    std::uint64_t seed;
    float scale;
    numerics::ElementConsts ec;  // scale_inv, TE threshold, overflow limits (numerics)
    double dec[256];             // decoded code values (NaN/Inf for special codes)
    numerics::CodeKind kind[256];
    double dec_err[256];  // dec with NaN codes as +Inf: the error term of a finite input that
                          // got a NaN/Inf code is +Inf either way
    // Code magnitudes (code & 0x7F) 1..sub_max_code are the subnormals, 0 the zero, as in E4M3
    // and E5M2; 0 for formats without that layout or encodings the SIMD encoder does not serve
    // (they take the general loop).
    std::uint32_t sub_max_code;
};

void set_scale(Prepared& p, float scale, float scale_inv) {
    p.scale = scale;
    numerics::rescale(p.ec, scale_inv);
}

Prepared prepare(Format format, float scale, float scale_inv, const Policy& policy, std::uint64_t seed) {
    using numerics::CodeKind;
    Prepared p;
    p.format = format;
    p.policy = policy;
    p.seed = seed;
    // The code tables depend on the format only: built once per format (a sweep of 10^5 small
    // dumped tensors prepares 10 block presets per tensor; 256 decodes each were a tenth of it).
    struct Tables {
        double dec[256], dec_err[256];
        numerics::CodeKind kind[256];
    };
    static const auto tables = [] {
        std::vector<Tables> t(std::size(emu::kAllFormats));
        for (std::size_t i = 0; i < t.size(); ++i)
            for (int c = 0; c < 256; ++c) {
                const auto code = static_cast<std::uint8_t>(c);
                t[i].dec[c] = decode_value(emu::kAllFormats[i], code);
                t[i].dec_err[c] = std::isnan(t[i].dec[c]) ? INFINITY : t[i].dec[c];
                t[i].kind[c] = numerics::code_kind(emu::kAllFormats[i], code);
            }
        return t;
    }();
    std::size_t fi = 0;
    while (fi < tables.size() && emu::kAllFormats[fi] != format) ++fi;
    if (fi < tables.size()) {
        std::memcpy(p.dec, tables[fi].dec, sizeof p.dec);
        std::memcpy(p.dec_err, tables[fi].dec_err, sizeof p.dec_err);
        std::memcpy(p.kind, tables[fi].kind, sizeof p.kind);
    } else {
        for (int c = 0; c < 256; ++c) {
            const auto code = static_cast<std::uint8_t>(c);
            p.dec[c] = decode_value(format, code);
            p.dec_err[c] = std::isnan(p.dec[c]) ? INFINITY : p.dec[c];
            p.kind[c] = numerics::code_kind(format, code);
        }
    }
    p.sub_max_code = 0;
    if (std::strcmp(encode_path(format, Wide::f32, policy), "scalar") != 0) {
        std::uint32_t sub_max = 0;
        while (sub_max + 1 < 0x80 && p.kind[sub_max + 1] == CodeKind::subnormal) ++sub_max;
        bool layout = sub_max > 0;
        for (std::uint32_t code = 0; code < 256; ++code) {
            const std::uint32_t mag = code & 0x7F;
            const CodeKind want = mag == 0                            ? CodeKind::zero
                                  : mag <= sub_max                    ? CodeKind::subnormal
                                  : p.kind[code] == CodeKind::special ? CodeKind::special
                                                                      : CodeKind::normal;
            layout = layout && p.kind[code] == want;
        }
        if (layout) p.sub_max_code = sub_max;
    }
    p.ec = numerics::element_consts(format, policy, scale_inv);
    p.scale = scale;
    return p;
}

// Element accessors: the exact binary64 value of x and fl32(x * scale).
template <Wide W>
struct Elem;
template <>
struct Elem<Wide::f32> {
    static void load(const void* d, std::size_t i, float scale, double& x, std::uint32_t& s) {
        float v;
        std::memcpy(&v, static_cast<const char*>(d) + 4 * i, 4);
        x = v;
        s = bits_of(v * scale);
    }
};
template <>
struct Elem<Wide::f64> {
    static void load(const void* d, std::size_t i, float scale, double& x, std::uint32_t& s) {
        std::memcpy(&x, static_cast<const char*>(d) + 8 * i, 8);
        s = bits_of(scaled_f64(x, scale));
    }
};
template <>
struct Elem<Wide::bf16> {
    static void load(const void* d, std::size_t i, float scale, double& x, std::uint32_t& s) {
        std::uint16_t h;
        std::memcpy(&h, static_cast<const char*>(d) + 2 * i, 2);
        const float v = float_of(static_cast<std::uint32_t>(h) << 16);
        x = v;
        s = bits_of(v * scale);
    }
};
template <>
struct Elem<Wide::f16> {
    static void load(const void* d, std::size_t i, float scale, double& x, std::uint32_t& s) {
        std::uint16_t h;
        std::memcpy(&h, static_cast<const char*>(d) + 2 * i, 2);
        const float v = float_of(emu::convert<emu::Binary16, emu::Binary32>(h, emu::kDecodePolicy));
        x = v;
        s = bits_of(v * scale);
    }
};

// numerics::StatsScalars: QuantStats without the histogram, what one call of an element loop adds
// up. The loops count the histogram into a per-thread Hist (integer counts: any order gives the
// same), so a short run (a 1 x 32 MX block) does not zero and merge 279 bins, and results kept
// per block are small.
using Scalars = numerics::StatsScalars;
using numerics::merge;

// Per-thread buffers for runs of at most `n` elements, with room for the 16-element reads of
// simd::stats_avx512 past the end of a run.
using Hist = std::array<std::uint64_t, kExpHistBins>;

struct Scratch {
    std::vector<double> x;
    std::vector<std::uint32_t> s;
    std::vector<std::uint8_t> q;
    std::vector<std::uint32_t> xb;  // fast path: float32 bits of the inputs of one tile
    explicit Scratch(std::size_t n) : x(n + 16), s(n + 16), q(n + 16), xb(n + 16) {}
};

// float32 bits of every float16 pattern, from the reference conversion (exact), built once.
const std::uint32_t* f16_to_f32_bits() {
    static const std::vector<std::uint32_t> table = [] {
        std::vector<std::uint32_t> t(65536);
        for (std::uint32_t h = 0; h < 65536; ++h)
            t[h] = emu::convert<emu::Binary16, emu::Binary32>(static_cast<std::uint16_t>(h), emu::kDecodePolicy);
        return t;
    }();
    return table.data();
}

// Fast path for float32, bfloat16 and float16 inputs under deterministic rounding, on CPUs with
// AVX-512: tiles of kTile elements are widened to float32 bits, scaled, encoded and handed to
// simd::stats_avx512 (statistics_simd.hpp); the exponent histogram is counted here.
constexpr std::size_t kTile = 2048;  // a multiple of kStatsLanes: lanes follow the chunk index
using simd::kStatsLanes;

template <Wide W>
void load_bits(const void* d, std::size_t first, std::size_t m, std::uint32_t* out) {
    if constexpr (W == Wide::f32) {
        std::memcpy(out, static_cast<const char*>(d) + 4 * first, 4 * m);
    } else {
        const auto* h = reinterpret_cast<const unsigned char*>(d) + 2 * first;
        const std::uint32_t* f16 = W == Wide::f16 ? f16_to_f32_bits() : nullptr;
        for (std::size_t i = 0; i < m; ++i) {
            std::uint16_t v;
            std::memcpy(&v, h + 2 * i, 2);
            out[i] = W == Wide::bf16 ? static_cast<std::uint32_t>(v) << 16 : f16[v];
        }
    }
}

template <Wide W>
void run_fast(const void* data, std::size_t first, std::size_t count, std::uint64_t, const Prepared& p, Scratch& sc,
              Scalars& into, Hist& hist) {
    std::uint32_t* xs = sc.xb.data();
    std::uint32_t* ss = sc.s.data();
    std::uint8_t* qs = sc.q.data();
    // Exponent field of s, counted in 4 copies (element i in copy i % 4): neighbouring values
    // share an exponent, and a single counter would chain every increment through memory. Short
    // runs count straight into hist instead (zeroing and adding up the copies would cost more).
    const bool copies = count >= 1024;
    std::uint32_t by_exp[4][256];  // count <= kChunk fits 32 bits
    if (copies) std::memset(by_exp, 0, sizeof by_exp);
    simd::StatsAcc acc;
    const simd::StatsConsts c{p.ec.scale_inv, bits_of(p.ec.te_threshold) & 0x7FFFFFFFu,
                              p.ec.limit[0],  p.ec.limit[1],
                              p.sub_max_code, p.dec_err};
    const float scale = p.scale;
    for (std::size_t t0 = 0; t0 < count; t0 += kTile) {
        const std::size_t m = std::min(kTile, count - t0);
        load_bits<W>(data, first + t0, m, xs);
        for (std::size_t i = 0; i < m; ++i) ss[i] = bits_of(float_of(xs[i]) * scale);
        detail::encode_array_serial(p.format, Wide::f32, ss, qs, m, p.policy);
        simd::stats_avx512(c, xs, ss, qs, m, acc);
        if (!copies) {
            for (std::size_t i = 0; i < m; ++i) ++hist[hist_bin(ss[i])];
            continue;
        }
        for (std::size_t i = 0; i < m; ++i) ++by_exp[i % 4][(ss[i] >> 23) & 0xFF];
        // Exponent field 0 holds zeros and float32 subnormals; subnormals (x * scale below
        // 2^-126, rare) get their bins from the leading one.
        if (acc.sub_s != 0) {
            for (std::size_t i = 0; i < m; ++i) {
                const std::uint32_t smag = ss[i] & 0x7FFFFFFFu;
                if (smag != 0 && smag < 0x00800000u) ++hist[hist_bin(smag)];
            }
            acc.sub_s = 0;
        }
    }
    if (copies) {
        hist[kExpHistZeroBin] += acc.zero_s;
        for (const auto& copy : by_exp) {
            for (std::uint32_t e = 1; e < 255; ++e) hist[exp_hist_bin(static_cast<int>(e) - 127)] += copy[e];
            hist[kExpHistNonfiniteBin] += copy[255];
        }
    }
    Scalars part;
    for (std::size_t l = 0; l < kStatsLanes; ++l) {
        part.sum_x2 += acc.sx2[l];
        part.sum_err2 += acc.se2[l];
    }
    part.numel = count;
    part.zeros = acc.zeros;
    part.nan = acc.nan;
    part.inf = acc.inf;
    part.underflow = acc.under;
    part.subnormal = acc.sub;
    part.overflow = acc.over;
    part.te_overflow = acc.te_over;
    // count_nonzero(x) - count_nonzero(decode(q)): NaN counts as nonzero on both sides.
    part.te_underflow = static_cast<std::int64_t>(acc.qzero) - static_cast<std::int64_t>(acc.zeros);
    part.amax = float_of(acc.amax);
    part.min_nonzero = acc.min_nonzero == 0xFFFFFFFFu ? 0.0 : float_of(acc.min_nonzero);
    merge(into, part);
}

// Statistics of elements [first, first + count) (count <= kChunk), serial, in index order.
// `index0` is the global index of `first` for stochastic rounding.
template <Wide W>
void run(const void* data, std::size_t first, std::size_t count, std::uint64_t index0, const Prepared& p, Scratch& sc,
         Scalars& into, Hist& hist) {
    double* xs = sc.x.data();
    std::uint32_t* ss = sc.s.data();
    std::uint8_t* qs = sc.q.data();
    for (std::size_t i = 0; i < count; ++i) Elem<W>::load(data, first + i, p.scale, xs[i], ss[i]);
    if (count >= 4096) {
        encode_array(p.format, Wide::f32, ss, qs, count, p.policy, p.seed, index0);
    } else {  // short runs (small blocks): the same conversion without a parallel region per call
        const bool sr = p.policy.rounding == Rounding::stochastic;
        for (std::size_t i = 0; i < count; ++i)
            qs[i] =
                emu::encode(p.format, Wide::f32, ss[i], p.policy, sr ? emu::stochastic_bits(p.seed, index0 + i) : 0);
    }

    Scalars part;
    std::uint64_t zeros = 0, nan = 0, inf = 0, under = 0, sub = 0, over = 0, te_over = 0;
    std::uint64_t nz_x = 0, nz_q = 0;
    double amax = 0, mn = INFINITY, sx2[kStatsLanes] = {}, se2[kStatsLanes] = {};
    const bool stochastic = p.policy.rounding == Rounding::stochastic;
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint32_t s = ss[i];
        const std::uint8_t q = qs[i];
        ++hist[hist_bin(s)];
        const numerics::Element e = numerics::element_step(xs[i], p.kind[q], p.dec[q], p.ec, [&] {
            return stochastic ? numerics::stochastic_overflows(p.ec, p.format, p.policy, s,
                                                               emu::stochastic_bits(p.seed, index0 + i))
                              : numerics::overflows(p.ec, s);
        });
        nz_x += e.nonzero_x;
        nz_q += e.nonzero_q;
        nan += e.nan;
        inf += e.inf;
        te_over += e.te_overflow;
        if (!e.finite) continue;  // NaN or Inf input: counted, kept out of every sum
        zeros += e.zero;
        under += e.underflow;
        sub += e.subnormal;
        over += e.overflow;
        if (!e.zero && e.abs_x < mn) mn = e.abs_x;
        if (e.abs_x > amax) amax = e.abs_x;
        sx2[i % kStatsLanes] += e.x2;
        se2[i % kStatsLanes] += e.err2;
    }
    part.numel = count;
    part.zeros = zeros;
    part.nan = nan;
    part.inf = inf;
    part.underflow = under;
    part.subnormal = sub;
    part.overflow = over;
    part.te_overflow = te_over;
    part.te_underflow = static_cast<std::int64_t>(nz_x) - static_cast<std::int64_t>(nz_q);
    part.amax = amax;
    part.min_nonzero = std::isinf(mn) ? 0.0 : mn;
    for (std::size_t l = 0; l < kStatsLanes; ++l) {
        part.sum_x2 += sx2[l];
        part.sum_err2 += se2[l];
    }
    merge(into, part);
}

using RunFn = void (*)(const void*, std::size_t, std::size_t, std::uint64_t, const Prepared&, Scratch&, Scalars&,
                       Hist&);
bool cpu_has_avx512f() {
#if defined(FP8KIT_X86_SIMD)
    return __builtin_cpu_supports("avx512f");
#else
    return false;
#endif
}

// The general loop (element_step per element) for input type w.
RunFn run_general(Wide w) {
    switch (w) {
        case Wide::f64: return run<Wide::f64>;
        case Wide::f16: return run<Wide::f16>;
        case Wide::bf16: return run<Wide::bf16>;
        case Wide::f32: break;
    }
    return run<Wide::f32>;
}

RunFn run_for(Wide w, const Prepared& p) {
#if defined(FP8KIT_X86_SIMD)
    static const bool avx512 = cpu_has_avx512f();
    if (p.sub_max_code != 0 && p.policy.rounding != Rounding::stochastic && avx512 && stats_path() == StatsPath::fast) {
        switch (w) {
            case Wide::f32: return run_fast<Wide::f32>;
            case Wide::f16: return run_fast<Wide::f16>;
            case Wide::bf16: return run_fast<Wide::bf16>;
            case Wide::f64: break;
        }
    }
#else
    (void)p;
#endif
    return run_general(w);
}

// ---- bfloat16 / float16 arrays by pattern ----------------------------------------------------
// A 16-bit input has 65536 values, and under one scale and a deterministic rounding everything an
// element contributes is a function of its pattern h, except the order of the two binary64 sums.
// So for a large array compute_stats (half_stats) counts how often each pattern occurs (an
// integer count per thread: any order gives the same), derives every count, extreme and the
// exponent histogram from those counts with the general loop's element_step (each pattern once,
// weighted by its count), and adds only the sums per element, in the lanes and chunk order of the
// element loops (simd::half_sums_avx512, err2 looked up per pattern). Counting is one increment
// per element, where the element loop multiplied, encoded and tested each element.
constexpr std::size_t kHalfPatterns = 65536;
// Below this many elements the tables (one multiply, encode and element_step per pattern) and a
// 256 KiB count array per thread cost more than the element loop.
constexpr std::size_t kHalfMin = std::size_t{1} << 21;

struct HalfTables {
    std::vector<std::uint32_t> s;  // bits of fl32(x * scale)
    std::vector<std::uint8_t> q;   // codes of s (encode_array_serial, as run_fast)
    std::vector<double> err2;      // (x - x^)^2 of element_step for finite x, +0.0 otherwise
};

float half_value(Wide w, std::uint32_t h) { return float_of(w == Wide::bf16 ? h << 16 : f16_to_f32_bits()[h]); }

// Fills the tables for patterns [h0, h1) (slices are filled by all threads at once).
void fill_half_tables(Wide w, const Prepared& p, HalfTables& t, std::uint32_t h0, std::uint32_t h1) {
    for (std::uint32_t h = h0; h < h1; ++h) t.s[h] = bits_of(half_value(w, h) * p.scale);
    detail::encode_array_serial(p.format, Wide::f32, t.s.data() + h0, t.q.data() + h0, h1 - h0, p.policy);
    for (std::uint32_t h = h0; h < h1; ++h) {
        const std::uint8_t q = t.q[h];
        const numerics::Element e = numerics::element_step(static_cast<double>(half_value(w, h)), p.kind[q], p.dec[q],
                                                           p.ec, [] { return false; });
        t.err2[h] = e.finite ? e.err2 : 0.0;
    }
}

// Counts, extremes and histogram of patterns [h0, h1), pattern h occurring counts[0][h] +
// counts[1][h] + ... times (one count array per thread), added to `into` and `hist`.
void half_counts(Wide w, const Prepared& p, const HalfTables& t, const std::vector<std::uint32_t*>& counts,
                 std::uint32_t h0, std::uint32_t h1, Scalars& into, Hist& hist) {
    Scalars part;
    std::uint64_t nz_x = 0, nz_q = 0;
    double amax = 0, mn = INFINITY;
    for (std::uint32_t h = h0; h < h1; ++h) {
        std::uint64_t c = 0;
        for (const std::uint32_t* cnt : counts) c += cnt[h];
        if (c == 0) continue;
        const std::uint32_t s = t.s[h];
        const std::uint8_t q = t.q[h];
        hist[hist_bin(s)] += c;
        const numerics::Element e = numerics::element_step(static_cast<double>(half_value(w, h)), p.kind[q], p.dec[q],
                                                           p.ec, [&] { return numerics::overflows(p.ec, s); });
        part.numel += c;
        nz_x += c * e.nonzero_x;
        nz_q += c * e.nonzero_q;
        part.nan += c * e.nan;
        part.inf += c * e.inf;
        part.te_overflow += c * e.te_overflow;
        if (!e.finite) continue;
        part.zeros += c * e.zero;
        part.underflow += c * e.underflow;
        part.subnormal += c * e.subnormal;
        part.overflow += c * e.overflow;
        if (!e.zero && e.abs_x < mn) mn = e.abs_x;
        if (e.abs_x > amax) amax = e.abs_x;
    }
    part.te_underflow = static_cast<std::int64_t>(nz_x) - static_cast<std::int64_t>(nz_q);
    part.amax = amax;
    part.min_nonzero = std::isinf(mn) ? 0.0 : mn;
    merge(into, part);
}

// compute_stats of a bfloat16 / float16 array of n >= kHalfMin elements (n < 2^32: the counts
// are 32-bit) under the fast path's conditions; the same bits as run_fast / run (tests/lib).
QuantStats half_stats(const void* data, Wide w, std::size_t n, const Prepared& p) {
    HalfTables t{std::vector<std::uint32_t>(kHalfPatterns), std::vector<std::uint8_t>(kHalfPatterns),
                 std::vector<double>(kHalfPatterns)};
    const std::size_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<Scalars> sums(chunks);
    std::vector<std::uint32_t*> counts;
    QuantStats total;
    constexpr std::uint32_t kSlices = 64;  // of the 65536 patterns, for filling and counting
#pragma omp parallel
    {
#pragma omp single
        counts.assign(static_cast<std::size_t>(omp_get_num_threads()), nullptr);  // (barrier)
        // Each thread's counts live as long as the thread (OpenMP keeps its threads between
        // calls): no 256 KiB allocation and page faults per call, only zeroing.
        thread_local std::vector<std::uint32_t> mine(kHalfPatterns);
        std::fill(mine.begin(), mine.end(), 0u);
        std::uint32_t* cnt = mine.data();
        counts[static_cast<std::size_t>(omp_get_thread_num())] = cnt;
#pragma omp for schedule(dynamic)
        for (std::uint32_t k = 0; k < kSlices; ++k)
            fill_half_tables(w, p, t, kHalfPatterns / kSlices * k, kHalfPatterns / kSlices * (k + 1));
            // (barrier: the tables are filled)
#pragma omp for schedule(dynamic)
        for (std::ptrdiff_t c = 0; c < static_cast<std::ptrdiff_t>(chunks); ++c) {
            const std::size_t first = static_cast<std::size_t>(c) * kChunk;
            const std::size_t count = std::min(kChunk, n - first);
            const auto* h = reinterpret_cast<const unsigned char*>(data) + 2 * first;
            double sx2[kStatsLanes] = {}, se2[kStatsLanes] = {};
            simd::half_sums_avx512(h, count, w == Wide::bf16, t.err2.data(), sx2, se2);
            for (std::size_t i = 0; i < count; ++i) {
                std::uint16_t v;
                std::memcpy(&v, h + 2 * i, 2);
                ++cnt[v];
            }
            Scalars& part = sums[static_cast<std::size_t>(c)];
            for (std::size_t l = 0; l < kStatsLanes; ++l) {  // as run_fast: lanes in order from 0
                part.sum_x2 += sx2[l];
                part.sum_err2 += se2[l];
            }
        }  // (barrier: every count is in)
        Scalars found;
        Hist hist{};
#pragma omp for schedule(dynamic)
        for (std::uint32_t k = 0; k < kSlices; ++k)
            half_counts(w, p, t, counts, kHalfPatterns / kSlices * k, kHalfPatterns / kSlices * (k + 1), found, hist);
#pragma omp critical(fp8kit_stats_half)
        {
            merge(total, found);  // integers, maxima and minima: exact in any order; sums are 0
            for (std::size_t b = 0; b < kExpHistBins; ++b) total.exp_hist[b] += hist[b];
        }
    }
    for (const auto& part : sums) merge(total, part);  // sums in chunk order
    return total;
}

}  // namespace

const char* stats_loop(Format format, Wide type, const Policy& policy) {
    const Prepared p = prepare(format, 1.0f, 1.0f, policy, 0);
    const RunFn fn = run_for(type, p);
    return fn == run_fast<Wide::f32> || fn == run_fast<Wide::f16> || fn == run_fast<Wide::bf16> ? "avx512" : "general";
}

QuantStats compute_stats(const void* data, Wide type, std::size_t n, const QuantConfig& cfg) {
    if (!(cfg.scale > 0.0f) || std::isinf(cfg.scale))
        throw std::invalid_argument(fmt::format("compute_stats: scale {} must be finite and > 0", cfg.scale));
    const float scale_inv = cfg.scale_inv != 0.0f ? cfg.scale_inv : 1.0f / cfg.scale;
    if (!(scale_inv > 0.0f) || std::isinf(scale_inv))
        throw std::invalid_argument(fmt::format("compute_stats: scale_inv {} must be finite and > 0", scale_inv));
    const Prepared p = prepare(cfg.format, cfg.scale, scale_inv, cfg.policy, cfg.seed);
    const RunFn fn = run_for(type, p);
    if ((fn == run_fast<Wide::bf16> || fn == run_fast<Wide::f16>)&&n >= kHalfMin && n < (std::size_t{1} << 32))
        return half_stats(data, type, n, p);
    const std::size_t chunks = (n + kChunk - 1) / kChunk;
    std::vector<Scalars> parts(chunks);
    QuantStats total;
#pragma omp parallel if (chunks > 1)
    {
        Scratch sc(std::min(kChunk, n));  // dumps hold many small tensors
        Hist hist{};
        // Chunks go to threads as they come free (a thread that loses its core to the dump
        // reader does not hold the other at the barrier); results are merged in chunk order.
#pragma omp for schedule(dynamic)
        for (std::ptrdiff_t c = 0; c < static_cast<std::ptrdiff_t>(chunks); ++c) {
            const std::size_t first = static_cast<std::size_t>(c) * kChunk;
            const std::size_t count = std::min(kChunk, n - first);
            fn(data, first, count, first, p, sc, parts[static_cast<std::size_t>(c)], hist);
        }
#pragma omp critical(fp8kit_stats_hist)
        for (std::size_t b = 0; b < kExpHistBins; ++b) total.exp_hist[b] += hist[b];
    }
    for (const auto& part : parts) merge(total, part);
    return total;
}

namespace {

template <Wide W>
double amax_range(const void* data, std::size_t first, std::size_t count) {
    double m = 0;
    for (std::size_t i = first; i < first + count; ++i) {
        double x;
        std::uint32_t s;
        Elem<W>::load(data, i, 1.0f, x, s);
        const double a = std::fabs(x);
        if (a > m) m = a;  // NaN compares false: ignored, as fmaxf ignores it
    }
    return m;
}

// float32 and bfloat16: the largest magnitude as bits (integer order is magnitude order for
// non-negative floats; NaN patterns, above Inf's, are left out), a loop the compiler vectorizes.
template <class T, int Shift>
double amax_bits(const void* data, std::size_t first, std::size_t count) {
    const auto* p = static_cast<const unsigned char*>(data) + sizeof(T) * first;
    std::uint32_t m = 0;
    for (std::size_t i = 0; i < count; ++i) {
        T v;
        std::memcpy(&v, p + sizeof(T) * i, sizeof(T));
        const std::uint32_t a = (static_cast<std::uint32_t>(v) << Shift) & 0x7FFFFFFFu;
        m = std::max(m, a <= 0x7F800000u ? a : 0u);
    }
    return float_of(m);
}

// bfloat16: the same maximum of magnitude bits in 16-bit signed lanes (a magnitude is below 2^15),
// which SSE2 has a maximum for (pmaxsw), so the loop vectorizes on any x86-64; amax_bits'
// 32-bit form of it did not (a scalar compare per element: a third of inspect's time on bf16).
double amax_bf16(const void* data, std::size_t first, std::size_t count) {
    const auto* p = static_cast<const unsigned char*>(data) + 2 * first;
    std::int16_t m = 0;
    for (std::size_t i = 0; i < count; ++i) {
        std::uint16_t v;
        std::memcpy(&v, p + 2 * i, 2);
        const auto a = static_cast<std::int16_t>(v & 0x7FFF);
        m = std::max(m, a <= 0x7F80 ? a : std::int16_t{0});
    }
    return float_of(static_cast<std::uint32_t>(static_cast<std::uint16_t>(m)) << 16);
}

double amax_any(const void* data, Wide type, std::size_t first, std::size_t count) {
    switch (type) {
        case Wide::f64: return amax_range<Wide::f64>(data, first, count);
        case Wide::f16: return amax_range<Wide::f16>(data, first, count);
        case Wide::bf16: return amax_bf16(data, first, count);
        case Wide::f32: break;
    }
    return amax_bits<std::uint32_t, 0>(data, first, count);
}

}  // namespace

float amax_of(const void* data, Wide type, std::size_t n) {
    double m = 0;
    const std::size_t chunks = (n + kChunk - 1) / kChunk;
#pragma omp parallel for schedule(dynamic) reduction(max : m) if (chunks > 1)
    for (std::ptrdiff_t c = 0; c < static_cast<std::ptrdiff_t>(chunks); ++c) {
        const std::size_t first = static_cast<std::size_t>(c) * kChunk;
        const double a = amax_any(data, type, first, std::min(kChunk, n - first));
        if (a > m) m = a;
    }
    return static_cast<float>(m);  // exact except for f64 data: one rounding, Inf past FLT_MAX
}

bool any_nan(const void* data, Wide type, std::size_t first, std::size_t count) {
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = first; i < first + count; ++i) {
        switch (type) {
            case Wide::f64: {
                std::uint64_t u;
                std::memcpy(&u, p + 8 * i, 8);
                if ((u & 0x7FFFFFFFFFFFFFFFull) > 0x7FF0000000000000ull) return true;
                break;
            }
            case Wide::f32: {
                std::uint32_t u;
                std::memcpy(&u, p + 4 * i, 4);
                if ((u & 0x7FFFFFFFu) > 0x7F800000u) return true;
                break;
            }
            case Wide::f16: {
                std::uint16_t u;
                std::memcpy(&u, p + 2 * i, 2);
                if ((u & 0x7FFFu) > 0x7C00u) return true;
                break;
            }
            case Wide::bf16: {
                std::uint16_t u;
                std::memcpy(&u, p + 2 * i, 2);
                if ((u & 0x7FFFu) > 0x7F80u) return true;
                break;
            }
        }
    }
    return false;
}

float amax_of_here(const void* data, Wide type, std::size_t n) {
    return static_cast<float>(amax_any(data, type, 0, n));  // the one rounding of amax_of
}

// ---- Block recipes --------------------------------------------------------------------------

BlockRecipe block_recipe(const RecipeSpec& r, Role role, std::size_t cols) {
    if (r.kind != RecipeKind::current)
        throw std::invalid_argument(fmt::format(
            "recipe '{}' is {}: its scale depends on past steps, not on one tensor's blocks", r.name, name(r.kind)));
    const RoleSpec& rs = r.role(role);
    BlockRecipe b;
    b.format = rs.format;
    b.rule = r.rule;
    b.epsilon = r.epsilon;
    b.pow2 = r.pow2;
    b.value_for_inf = r.value_for_inf;
    b.policy = r.policy_for(role);  // the role's own rounding where the recipe has one
    switch (rs.granularity) {
        case Granularity::tensor:
            b.block_rows = 0;  // whole tensor
            b.block_cols = 0;
            break;
        case Granularity::row:
            if (cols > static_cast<std::size_t>(std::numeric_limits<int>::max()))  // would wrap the int
                throw std::invalid_argument(
                    fmt::format("recipe '{}': a row of {} elements is wider than a "
                                "rowwise block can be ({} at most)",
                                r.name, cols, std::numeric_limits<int>::max()));
            b.block_rows = 1;
            b.block_cols = static_cast<int>(cols);
            break;
        case Granularity::block:
            b.block_rows = rs.block_rows;
            b.block_cols = rs.block_cols;
            break;
    }
    b.columnwise_rht = rs.columnwise_rht;
    if (b.columnwise_rht && !(rs.granularity == Granularity::block && b.block_rows == 1 && b.block_cols == 16))
        throw std::invalid_argument(fmt::format(
            "recipe '{}': columnwise_rht needs 1 x 16 blocks for the {} role (TE's Hadamard dimension is the "
            "NVFP4 tile length 16), not {} {} x {}",
            r.name, slot_name(role), name(rs.granularity), b.block_rows, b.block_cols));
    return b;
}

namespace {

// compute_block_stats: global_amax null takes the data's own; before null starts from nothing.
// first_row, total_rows: where the data lies in the whole tensor (a strip of it: BlockStrip), so
// that stochastic rounding draws each element's bits by its row-major index in the whole tensor, or
// with columnwise_rht in the whole column-wise copy, as quantize_blocks does: the same codes for
// any strip height. Element (r, c) of `data` takes index r * index_stride + index_offset + c.
BlockStats block_stats(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br,
                       const float* global_amax, const QuantStats* before, std::size_t index_stride,
                       std::size_t index_offset) {
    if (br.columnwise_rht) {  // the statistics of the column-wise copy (TE's RHT), with its own amax
        const ColumnwiseCopy c = columnwise_rht_copy(data, type, rows, cols);
        BlockRecipe plain = br;
        plain.columnwise_rht = false;
        // The copy's row r' holds input column r': in the whole copy its element c' (input row
        // first_row + c') has index r' * total_rows + first_row + c'.
        BlockStats s =
            block_stats(c.bytes.data(), c.type, c.rows, c.cols, plain, global_amax, before, index_stride, index_offset);
        s.columnwise_rht = true;
        return s;
    }
    if (br.block_rows < 0 || br.block_cols < 0 || (br.block_rows == 0) != (br.block_cols == 0))
        throw std::invalid_argument(
            "compute_block_stats: block shape must be >= 1 x 1 (or 0 x 0 for the whole tensor)");
    const std::size_t bh =
        br.block_rows == 0 ? std::max<std::size_t>(rows, 1) : static_cast<std::size_t>(br.block_rows);
    const std::size_t bw =
        br.block_cols == 0 ? std::max<std::size_t>(cols, 1) : static_cast<std::size_t>(br.block_cols);
    BlockStats out;
    out.tile_rows = bh;
    out.tile_cols = bw;
    const std::size_t gr = (rows + bh - 1) / bh, gc = (cols + bw - 1) / bw;
    out.grid_rows = gr;
    out.grid_cols = gc;
    out.blocks = gr * gc;
    out.scale_inv.assign(out.blocks, 0.0f);
    // Kept per block: only what is merged in block order (binary64 sums) or read per block
    // (extremes, for the dynamic range); counts and histogram accumulate per thread.
    struct BlockPart {
        double amax = 0, min_nonzero = 0, sum_x2 = 0, sum_err2 = 0;
    };
    std::vector<BlockPart> parts(out.blocks);
    const Prepared base = prepare(br.format, 1.0f, 1.0f, br.policy, 0);
    numerics::ScaleParams rule =
        numerics::make_scale_params(br.rule, br.format, br.epsilon, br.pow2, br.value_for_inf, 0);
    // NVFP4: the second-level scale comes from the whole tensor's amax (TE's amax reduction),
    // given when the data is a strip of it.
    if (numerics::rule_uses_global_amax(br.rule))
        numerics::set_global_amax(rule, global_amax ? *global_amax : amax_of(data, type, rows * cols));
    const RunFn fn = run_for(type, base), general = run_general(type);
#pragma omp parallel if (rows * cols > kChunk)
    {
        Scratch sc(std::min(kChunk, std::min(bw, cols)));
        Prepared p = base;
        Scalars counts;  // sums left at 0: they are added in block order below
        Hist hist{};
#pragma omp for schedule(dynamic, 1)
        for (std::ptrdiff_t t = 0; t < static_cast<std::ptrdiff_t>(out.blocks); ++t) {
            const std::size_t bi = static_cast<std::size_t>(t) / gc, bj = static_cast<std::size_t>(t) % gc;
            const std::size_t r0 = bi * bh, r1 = std::min(rows, r0 + bh);
            const std::size_t c0 = bj * bw, c1 = std::min(cols, c0 + bw);
            double am = 0;
            for (std::size_t r = r0; r < r1; ++r) {
                const double a = amax_any(data, type, r * cols + c0, c1 - c0);
                if (a > am) am = a;
            }
            bool nan = false;  // rules whose block amax keeps NaN (torchao's torch.amax)
            if (numerics::rule_amax_keeps_nan(br.rule))
                for (std::size_t r = r0; r < r1 && !nan; ++r) nan = any_nan(data, type, r * cols + c0, c1 - c0);
            const numerics::BlockScale sp =
                numerics::rule_scale(rule, numerics::rule_block_amax(br.rule, static_cast<float>(am), nan));
            out.scale_inv[static_cast<std::size_t>(t)] = sp.scale_inv;
            set_scale(p, sp.scale, sp.scale_inv);
            // A pair that is not finite and > 0 (an Inf amax under the MX floor rule gives
            // scale_inv +Inf) takes element_step itself: the fast loop's x^ table times such a
            // scale_inv gives NaN error terms where element_step gives +Inf (docs/statistics.md).
            const bool usable =
                sp.scale > 0.0f && std::isfinite(sp.scale) && sp.scale_inv > 0.0f && std::isfinite(sp.scale_inv);
            const RunFn block_fn = usable ? fn : general;
            Scalars block;
            for (std::size_t r = r0; r < r1; ++r)
                for (std::size_t c = c0; c < c1; c += kChunk) {
                    const std::size_t first = r * cols + c;
                    block_fn(data, first, std::min(kChunk, c1 - c), r * index_stride + index_offset + c, p, sc, block,
                             hist);
                }
            parts[static_cast<std::size_t>(t)] = {block.amax, block.min_nonzero, block.sum_x2, block.sum_err2};
            block.sum_x2 = block.sum_err2 = 0;
            merge(counts, block);
        }
#pragma omp critical(fp8kit_block_counts)
        {
            merge(out.total, counts);
            for (std::size_t b = 0; b < kExpHistBins; ++b) out.total.exp_hist[b] += hist[b];
        }
    }
    if (before) {  // a later strip: the earlier strips' totals first, then this strip's blocks
        QuantStats counts = std::move(out.total);
        out.total = *before;
        out.total.merge(counts);  // integers, maxima and minima: exact; counts' sums are 0
    }
    std::vector<double> tile_amax(out.blocks), tile_min(out.blocks);
    for (std::size_t t = 0; t < out.blocks; ++t) {
        const BlockPart& bp = parts[t];
        Scalars sums;
        sums.amax = bp.amax;
        sums.min_nonzero = bp.min_nonzero;
        sums.sum_x2 = bp.sum_x2;
        sums.sum_err2 = bp.sum_err2;
        merge(out.total, sums);
        tile_amax[t] = bp.amax;
        tile_min[t] = bp.min_nonzero;
    }
    summarize_tiles(out, tile_amax.data(), tile_min.data());
    return out;
}

}  // namespace

void summarize_tiles(BlockStats& out, const double* tile_amax, const double* tile_min_nonzero) {
    bool any = false;
    double dr_sum = 0;
    for (std::size_t t = 0; t < out.blocks; ++t) {
        const float si = out.scale_inv[t];
        ++out.scale_inv_exp_hist[hist_bin(bits_of(si))];
        if (std::isfinite(si)) {
            const double d = si;
            if (!any || d < out.scale_inv_min) out.scale_inv_min = d;
            if (!any || d > out.scale_inv_max) out.scale_inv_max = d;
            any = true;
        }
        if (tile_min_nonzero[t] != 0.0) {
            const double dr = std::log2(tile_amax[t]) - std::log2(tile_min_nonzero[t]);
            ++out.blocks_with_range;
            dr_sum += dr;
            if (dr > out.dr_max) out.dr_max = dr;
            const double fl = std::floor(dr);
            const std::size_t bin = fl >= static_cast<double>(BlockStats::kDrBins - 1) ? BlockStats::kDrBins - 1
                                                                                       : static_cast<std::size_t>(fl);
            ++out.dr_hist[bin];
        }
    }
    if (out.blocks_with_range) out.dr_mean = dr_sum / static_cast<double>(out.blocks_with_range);
}

BlockStats compute_block_stats(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br) {
    // Whole tensor: row-major indices (of the column-wise copy, cols x rows, with columnwise_rht).
    return block_stats(data, type, rows, cols, br, nullptr, nullptr, br.columnwise_rht ? rows : cols, 0);
}

BlockStats compute_block_stats(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br,
                               const BlockStrip& strip) {
    const std::size_t total_rows = strip.total_rows ? strip.total_rows : rows;
    if (strip.first_row + rows > total_rows)
        throw std::invalid_argument("compute_block_stats: the strip's rows pass the tensor's total_rows");
    if (br.columnwise_rht)
        return block_stats(data, type, rows, cols, br, &strip.global_amax, strip.before, total_rows, strip.first_row);
    return block_stats(data, type, rows, cols, br, &strip.global_amax, strip.before, cols, strip.first_row * cols);
}

float block_global_amax(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br) {
    if (!br.columnwise_rht) return amax_of(data, type, rows * cols);
    const ColumnwiseCopy c = columnwise_rht_copy(data, type, rows, cols);
    return amax_of(c.bytes.data(), c.type, c.rows * c.cols);
}

QuantStats times(const QuantStats& s, std::uint64_t n) {
    if (n == 0) return QuantStats{};
    auto mul = [n](std::uint64_t c) {
        std::uint64_t out;
        if (__builtin_mul_overflow(c, n, &out)) throw std::overflow_error("statistics: a count past 2^64 elements");
        return out;
    };
    QuantStats r = s;
    r.numel = mul(s.numel);
    r.zeros = mul(s.zeros);
    r.nan = mul(s.nan);
    r.inf = mul(s.inf);
    r.underflow = mul(s.underflow);
    r.subnormal = mul(s.subnormal);
    r.overflow = mul(s.overflow);
    r.te_overflow = mul(s.te_overflow);
    // te_underflow is signed (a difference of counts): multiplied in 64 bits, checked the same way.
    std::int64_t tu;
    if (__builtin_mul_overflow(s.te_underflow, static_cast<std::int64_t>(n), &tu) || n > INT64_MAX)
        throw std::overflow_error("statistics: a count past 2^63 elements");
    r.te_underflow = tu;
    for (auto& b : r.exp_hist) b = mul(b);
    r.sum_x2 = s.sum_x2 * static_cast<double>(n);
    r.sum_err2 = s.sum_err2 * static_cast<double>(n);
    return r;
}

}  // namespace fp8kit
