// MS-AMP's FP8 weight-gradient all-reduce (msamp/nn/distributed.py, _ScalingTensorReducer
// ._reduce_bucket; the non-DDP path of common/tensor/cast.py + tensor_dist.py), simulated over N
// ranks with the E4M3 reduction of msccl-executor-nccl (src/device/reduce_kernel.h).
#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {

namespace {

constexpr std::size_t kBlock = 4096;

// Every hop's result and its sum before the cast, for all 256 x 256 code pairs.
struct HopTable {
    std::vector<std::uint8_t> code;
    std::vector<float> sum;
    explicit HopTable(HopArith h) : code(65536), sum(65536) {
        for (int a = 0; a < 256; ++a)
            for (int b = 0; b < 256; ++b) {
                code[a * 256 + b] = fp8_add(static_cast<std::uint8_t>(a), static_cast<std::uint8_t>(b), h);
                sum[a * 256 + b] =
                    e4m3_to_float(static_cast<std::uint8_t>(a)) + e4m3_to_float(static_cast<std::uint8_t>(b));
            }
    }
};
const HopTable& hop_table(HopArith h) {
    static const HopTable half(HopArith::half), f32(HopArith::float32);
    return h == HopArith::half ? half : f32;
}

struct Hop {
    const HopTable& t;
    OrderResult& r;
    std::uint8_t operator()(std::uint8_t a, std::uint8_t b) const {
        const int k = a * 256 + b;
        const double s = std::fabs(static_cast<double>(t.sum[k]));
        if (s > kE4M3Max) ++r.hop_overflows;
        if (s > r.max_partial) r.max_partial = s;  // NaN compares false
        const std::uint8_t c = t.code[k];
        ++r.hops;
        if (!(s > kE4M3Max) && (((b & 0x7F) != 0 && c == a) || ((a & 0x7F) != 0 && c == b))) ++r.stalled_hops;
        return c;
    }
};

// The sum of one element's N rank values in order `o` with `add` at every hop; `c` holds the N
// values and is overwritten (the tree works in place).
template <class T, class Add>
T reduce_element(Order o, T* c, int n, std::size_t chunk, const Add& add) {
    if (n == 1) return c[0];
    switch (o) {
        case Order::rank: {
            T acc = c[0];
            for (int r = 1; r < n; ++r) acc = add(acc, c[r]);
            return acc;
        }
        case Order::ring: {
            // chunk c is reduced from rank c+1 round to rank c, its owner after reduce-scatter
            const int start = static_cast<int>((chunk + 1) % static_cast<std::size_t>(n));
            T acc = c[start];
            for (int k = 1; k < n; ++k) acc = add(acc, c[(start + k) % n]);
            return acc;
        }
        case Order::tree: {
            int len = n;
            while (len > 1) {
                int w = 0;
                for (int k = 0; k + 1 < len; k += 2) c[w++] = add(c[k], c[k + 1]);
                if (len % 2) c[w++] = c[len - 1];
                len = w;
            }
            return c[0];
        }
    }
    return c[0];
}

// The same order in exact arithmetic (binary64 sums of the cast values: exact for N <= 2^44),
// tracking the largest |partial sum|: the clamp-free sums give the margin that avoids clamping.
struct ExactAdd {
    double* peak;
    double operator()(double a, double b) const {
        const double s = a + b;
        if (std::fabs(s) > *peak) *peak = std::fabs(s);
        return s;
    }
};

// torch: g.abs().max() (NaN propagates), then nan_to_num_(nan=inf, posinf=inf).
float rank_amax(const RankSource& src, int r, std::vector<float>& buf) {
    float m = 0;
    bool nan = false;
    for (std::size_t first = 0; first < src.size(); first += kBlock) {
        const std::size_t cnt = std::min(kBlock, src.size() - first);
        src.fill(r, first, cnt, buf.data());
        for (std::size_t j = 0; j < cnt; ++j) {
            const float a = std::fabs(buf[j]);
            if (std::isnan(a))
                nan = true;
            else if (a > m)
                m = a;
        }
    }
    return nan ? std::numeric_limits<float>::infinity() : m;
}

struct Accum {
    double ref2 = 0, err2 = 0;
};

}  // namespace

AllReduceResult fp8_allreduce(const RankSource& src, const std::vector<Order>& orders, const AllReduceOptions& opts) {
    const int n = src.ranks();
    if (n < 1) throw std::invalid_argument("all-reduce: at least one rank");
    if (orders.empty()) throw std::invalid_argument("all-reduce: no reduction order");
    const std::size_t size = src.size();
    AllReduceResult res;
    res.ranks = n;
    res.size = size;
    res.old_scale = opts.old_scale;
    std::vector<float> buf(kBlock * static_cast<std::size_t>(n));

    // 1. amax per rank, NaN/+Inf -> +Inf, MAX across ranks (NCCL max on float).
    float amax = 0;
    for (int r = 0; r < n; ++r) amax = std::max(amax, rank_amax(src, r, buf));
    res.amax = amax;
    // 2. sf = compute_scaling_factor(amax, scale, 448, 0); DDP: sf.mul_(1 / sqrt(N)) (a Python
    //    double, used as float32 by the CUDA kernel).
    float sf = compute_scaling_factor(amax, opts.old_scale, kE4M3Max, 0);
    if (opts.path == Path::ddp) sf = sf * static_cast<float>(1.0 / std::sqrt(static_cast<double>(n)));
    res.scale = sf;
    // 3. scale_inv = reciprocal(scale), then ScalingTensor.div_(N) divides scale_inv, not the data.
    res.scale_inv = (1.0f / sf) / static_cast<float>(n);

    const HopTable& table = hop_table(opts.hop);
    for (Order o : orders) {
        OrderResult r;
        r.order = o;
        r.codes.resize(size);
        r.values.resize(size);
        res.orders.push_back(std::move(r));
    }
    std::vector<Accum> acc(orders.size());
    std::vector<std::uint8_t> codes(kBlock * static_cast<std::size_t>(n)), scratch(static_cast<std::size_t>(n));
    std::vector<double> exact(static_cast<std::size_t>(n));
    double exact_peak = 0;
    std::vector<double> mean(kBlock);
    double ref2_total = 0, spread_max = 0;
    for (std::size_t first = 0; first < size; first += kBlock) {
        const std::size_t cnt = std::min(kBlock, size - first);
        std::fill(mean.begin(), mean.end(), 0.0);
        // 4. every rank casts with TE's cast_to_fp8 (saturating)
        for (int r = 0; r < n; ++r) {
            float* g = buf.data() + static_cast<std::size_t>(r) * kBlock;
            src.fill(r, first, cnt, g);
            for (std::size_t j = 0; j < cnt; ++j) {
                const float scaled = g[j] * sf;
                const std::uint8_t c = to_e4m3_satfinite(scaled);
                codes[j * n + r] = c;
                mean[j] += g[j];
                if (g[j] != 0) {
                    ++res.cast_nonzero;
                    if ((c & 0x7F) == 0) ++res.cast_underflow;
                }
                if (std::fabs(scaled) > kE4M3Max) ++res.cast_saturated;
            }
        }
        // 5. the FP8 sum in each order; the result read back as ScalingTensor.float()
        for (std::size_t j = 0; j < cnt; ++j) {
            const double ref = mean[j] / n;
            ref2_total += ref * ref;
            float lo = std::numeric_limits<float>::infinity(), hi = -lo;
            std::uint8_t first_code = 0;
            bool differs = false;
            const std::size_t chunk = (first + j) * static_cast<std::size_t>(n) / size;
            for (std::size_t k = 0; k < orders.size(); ++k) {
                OrderResult& o = res.orders[k];
                std::copy_n(codes.data() + j * n, n, scratch.data());
                const std::uint8_t c = reduce_element(o.order, scratch.data(), n, chunk, Hop{table, o});
                for (int r = 0; r < n; ++r) exact[r] = e4m3_to_float(codes[j * n + r]);
                reduce_element(o.order, exact.data(), n, chunk, ExactAdd{&exact_peak});
                const float v = e4m3_to_float(c) * res.scale_inv;
                o.codes[first + j] = c;
                o.values[first + j] = v;
                if (!std::isfinite(v)) {
                    ++o.nonfinite;
                } else {
                    const double d = v - ref;
                    acc[k].err2 += d * d;
                    lo = std::min(lo, v);
                    hi = std::max(hi, v);
                }
                if (ref != 0 && v == 0) ++o.underflow;
                if (k == 0)
                    first_code = c;
                else if (c != first_code)
                    differs = true;
            }
            res.order_differs += differs;
            if (hi >= lo) spread_max = std::max(spread_max, static_cast<double>(hi) - lo);
        }
    }
    for (std::size_t k = 0; k < orders.size(); ++k) {
        OrderResult& o = res.orders[k];
        o.rel_error = ref2_total > 0 ? std::sqrt(acc[k].err2 / ref2_total) : (acc[k].err2 > 0 ? INFINITY : 0.0);
        o.sqnr_db = acc[k].err2 > 0 ? 10 * std::log10(ref2_total / acc[k].err2) : INFINITY;
    }
    const double rms = std::sqrt(ref2_total / std::max<std::size_t>(size, 1));
    res.order_spread = rms > 0 ? spread_max / rms : 0;
    while (exact_peak > std::ldexp(static_cast<double>(kE4M3Max), res.extra_margin) && res.extra_margin < 64)
        ++res.extra_margin;
    return res;
}

}  // namespace fp8kit::simulate
