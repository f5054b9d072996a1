// Sufficient statistics of one tensor for evaluating many scales without re-reading the data
// (`fp8kit sweep`). One pass files every finite nonzero |x| into a bin keyed by
//   (floor(log2|x|), the kMantBits mantissa bits after the leading one, whether the remaining
//    mantissa bits are nonzero)
// and keeps per bin the count n, S1 = sum u and S2 = sum u^2 with u = |x| - lo (lo = the bin's
// lower edge, so u is exact). A bin whose remaining bits are zero holds the single value lo.
//
// evaluate() turns the bins into FP8 statistics for one (format, scale, scale_inv, policy):
// per bin it encodes the smallest and the largest float32 the bin can hold; because
// fl32(x*scale) and the rounding are monotone in |x|, equal codes and classes at both ends mean
// every element of the bin has that code. Such bins are exact: counts exactly, and the squared
// error sum_bin (u - d)^2 = S2 - 2 d S1 + n d^2 (d = x^ - lo) up to binary64 rounding.
// For a power-of-two scale (with scale_inv = 1/scale) every bin is exact: the FP8 rounding
// boundaries (midpoints between neighbours, the overflow threshold, half the smallest
// subnormal) are multiples of 2^(e-4) at most, all of them bin edges when kMantBits >= 4, and a
// value on an edge sits alone in its bin. Otherwise a bin may straddle a boundary ("ambiguous"):
// its elements are assigned the class and code of the bin's mean, and the result carries exact
// bounds: each count is off by at most the ambiguous elements of that class pair, and
// sum_err2 lies in [sum_err2_lo, sum_err2_hi] (plus binary64 rounding, err2_rounding).
// Only inputs whose values float32 holds exactly (f32, f16, bf16) are accepted.
#pragma once

#include <cstddef>
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace fp8kit {

class MagnitudeHistogram {
public:
    static constexpr int kMantBits = 8;
    static constexpr int kMinExp = -149, kMaxExp = 127;
    static constexpr std::size_t kBins =
        static_cast<std::size_t>(kMaxExp - kMinExp + 1) * (std::size_t{1} << kMantBits) * 2;

    MagnitudeHistogram();
    ~MagnitudeHistogram();
    MagnitudeHistogram(MagnitudeHistogram&&) noexcept;
    MagnitudeHistogram& operator=(MagnitudeHistogram&&) noexcept;
    // Adds n elements (raw bits as in quantize.hpp). Throws std::invalid_argument for f64.
    void add(const void* data, Wide type, std::size_t n);
    // Adds `repeat` copies of the one element at `data` in O(1) (a fill-value run,
    // dump::Chunk::repeat): counts exactly; the bin's sums gain repeat * u and repeat * u^2, one
    // rounding each where `repeat` separate adds would round at every addition.
    void add_repeated(const void* data, Wide type, std::uint64_t repeat);

    struct Result {
        std::uint64_t numel = 0, zeros = 0, nan = 0, inf = 0;
        std::uint64_t underflow = 0, subnormal = 0, overflow = 0;  // estimates (exact if ambiguous == 0)
        // Elements in ambiguous bins whose ends differ in the class deciding each count: the
        // true count is within +- this of the estimate.
        std::uint64_t underflow_uncertain = 0, subnormal_uncertain = 0, overflow_uncertain = 0;
        std::uint64_t ambiguous = 0;  // elements in ambiguous bins
        double amax = 0;
        double sum_x2 = 0;
        double sum_err2 = 0, sum_err2_lo = 0, sum_err2_hi = 0;  // estimate and its exact bounds
        double err2_rounding = 0;   // bound on binary64 rounding in sum_err2 (bins and sums)
        double sqnr_db() const;     // 10 log10(sum_x2 / sum_err2)
        double sqnr_db_lo() const;  // from sum_err2_hi + err2_rounding
        double sqnr_db_hi() const;  // from sum_err2_lo - err2_rounding
        std::uint64_t finite() const { return numel - nan - inf; }
    };
    // Throws std::invalid_argument for a rounding that is not sign-symmetric and deterministic
    // (nearest-even, nearest-away and toward-zero are), or a scale/scale_inv not finite and > 0.
    Result evaluate(Format f, float scale, float scale_inv, const Policy& policy) const;

    // Keeps only the used bins (frees the dense arrays); add() is refused afterwards. evaluate()
    // then costs O(used bins) instead of O(bins between the smallest and largest magnitude).
    void finish();

    std::uint64_t numel() const { return numel_; }
    // amax as TE's reduction gives it: +Inf if any Inf, NaN ignored, 0 when nothing else.
    float te_amax() const { return inf_ ? static_cast<float>(INFINITY) : static_cast<float>(amax_); }
    std::size_t used_bins() const;

    // A finished histogram as bytes and back, bit for bit (the ranks of an MPI sweep send theirs
    // to rank 0; docs/mpi.md). save() throws std::logic_error before finish(); load() throws
    // std::runtime_error on malformed bytes and advances `pos` past the histogram.
    void save(std::string& out) const;
    static MagnitudeHistogram load(const std::string& in, std::size_t& pos);

private:
    // While adding: one block of bins per float32 exponent, allocated when first touched (a
    // dense table of all bins would cost more to clear than a small tensor costs to read).
    static constexpr std::size_t kPerExp = std::size_t{2} << kMantBits;
    struct Block {
        std::uint64_t n[kPerExp] = {};
        double s1[kPerExp] = {}, s2[kPerExp] = {};
    };
    std::vector<std::unique_ptr<Block>> blocks_;
    // The used bins, ascending, with their sums (after finish(), or collected for evaluate()).
    struct Sparse {
        std::vector<std::uint32_t> bin;
        std::vector<std::uint64_t> n;
        std::vector<double> s1, s2;
    };
    Sparse sparse_;
    void collect(Sparse& out) const;
    void check_add(Wide type) const;
    void add_one(std::uint32_t f32_bits, std::uint64_t copies);
    std::uint64_t numel_ = 0, zeros_ = 0, nan_ = 0, inf_ = 0;
    double amax_ = 0;
    bool finished_ = false;
};

}  // namespace fp8kit
