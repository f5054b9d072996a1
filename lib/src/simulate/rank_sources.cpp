// Where the N ranks' gradients come from: given explicitly, or one gradient split into N ranks
// by the perturbation model of docs/msamp.md.
#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

#include "convert/float_bits.hpp"
#include "fp8kit/emu/convert.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {
namespace {

class Explicit final : public RankSource {
public:
    explicit Explicit(std::vector<std::vector<float>> r) : r_(std::move(r)) {
        if (r_.empty()) throw std::invalid_argument("all-reduce: no ranks");
        for (std::size_t k = 1; k < r_.size(); ++k)
            if (r_[k].size() != r_[0].size())
                throw std::invalid_argument(
                    fmt::format("all-reduce: rank {} has {} elements, rank 0 has {}", k, r_[k].size(), r_[0].size()));
    }
    int ranks() const override { return static_cast<int>(r_.size()); }
    std::size_t size() const override { return r_[0].size(); }
    void fill(int rank, std::size_t first, std::size_t count, float* out) const override {
        std::copy_n(r_[rank].data() + first, count, out);
    }

private:
    std::vector<std::vector<float>> r_;
};

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

class Split final : public RankSource {
public:
    Split(std::vector<float> g, int n, double spread, std::uint64_t seed)
        : g_(std::move(g)), n_(n), spread_(static_cast<float>(spread)), seed_(seed) {
        if (n < 1 || n > (1 << 20)) throw std::invalid_argument(fmt::format("--ranks {}: must be 1..1048576", n));
        if (!(spread >= 0 && spread <= 1))
            throw std::invalid_argument(fmt::format("--spread {}: must be in [0, 1]", spread));
    }
    int ranks() const override { return n_; }
    std::size_t size() const override { return g_.size(); }
    void fill(int rank, std::size_t first, std::size_t count, float* out) const override {
        const bool unpaired = (n_ % 2 == 1) && rank == n_ - 1;
        const float sign = rank % 2 == 0 ? 1.0f : -1.0f;
        const std::uint64_t pair = static_cast<std::uint64_t>(rank / 2);
        for (std::size_t j = 0; j < count; ++j) {
            const std::uint64_t i = first + j;
            // u in [-1, 1): the top 24 bits of splitmix64(seed ^ splitmix64(pair) ^ i), exact in float32
            const std::uint64_t h = splitmix64(seed_ ^ splitmix64(pair) ^ i);
            const float u = unpaired ? 0.0f : sign * (static_cast<float>(h >> 40) * 0x1p-23f - 1.0f);
            out[j] = g_[i] * (1.0f + spread_ * u);
        }
    }

private:
    std::vector<float> g_;
    int n_;
    float spread_;
    std::uint64_t seed_;
};

class Rounded final : public RankSource {
public:
    Rounded(std::unique_ptr<RankSource> src, WgradDtype w) : src_(std::move(src)), w_(w) {}
    int ranks() const override { return src_->ranks(); }
    std::size_t size() const override { return src_->size(); }
    void fill(int rank, std::size_t first, std::size_t count, float* out) const override {
        src_->fill(rank, first, count, out);
        if (w_ == WgradDtype::f32) return;
        constexpr emu::Policy rne{emu::Rounding::nearest_even, emu::Overflow::no_saturate, emu::NanEncoding::canonical};
        for (std::size_t i = 0; i < count; ++i) {
            if (w_ == WgradDtype::bf16) {
                out[i] = detail::round_to_bf16(out[i]);
            } else if (out[i] == out[i]) {  // float16, overflow to Inf (torch's .half())
                const auto h = emu::convert<emu::Binary32, emu::Binary16>(detail::bits_of(out[i]), rne);
                out[i] =
                    detail::float_of(static_cast<std::uint32_t>(emu::convert<emu::Binary16, emu::Binary32>(h, rne)));
            }
        }
    }

private:
    std::unique_ptr<RankSource> src_;
    WgradDtype w_;
};

}  // namespace

std::string_view name(WgradDtype w) { return w == WgradDtype::f16 ? "fp16" : w == WgradDtype::bf16 ? "bf16" : "fp32"; }

WgradDtype parse_wgrad_dtype(std::string_view s) {
    if (s == "fp32" || s == "float32") return WgradDtype::f32;
    if (s == "fp16" || s == "float16") return WgradDtype::f16;
    if (s == "bf16" || s == "bfloat16") return WgradDtype::bf16;
    throw std::invalid_argument(fmt::format("wgrad dtype '{}': fp32, fp16 or bf16", s));
}

std::unique_ptr<RankSource> rounded_ranks(std::unique_ptr<RankSource> src, WgradDtype w) {
    return std::make_unique<Rounded>(std::move(src), w);
}

std::unique_ptr<RankSource> explicit_ranks(std::vector<std::vector<float>> ranks) {
    return std::make_unique<Explicit>(std::move(ranks));
}
std::unique_ptr<RankSource> split_ranks(std::vector<float> g, int n, double spread, std::uint64_t seed) {
    return std::make_unique<Split>(std::move(g), n, spread, seed);
}

}  // namespace fp8kit::simulate
