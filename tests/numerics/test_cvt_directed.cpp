// numerics/cvt_directed.hpp (the CUDA casts' kCvtDir path) against emu::convert, bit for bit.
// emu::convert under {nearest_even, saturate_all, canonical} into E4M3 / E5M2 stands for the
// instruction cvt.rn.satfinite (cuda/tools/exhaustive_check.cu proves the two equal on all 2^32
// float32 inputs on the GPU). Every input in the rule's domain must give emu::convert's code under
// the served rounding and every overflow and NaN policy. The default case takes an edge-dense subset (every sign and
// exponent, the top 11 mantissa bits with the low 12 at and around 0, half and all ones, which
// holds every tie and every boundary of both steps); [exhaustive] takes all 2^32 inputs.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <vector>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/numerics/cvt_directed.hpp"

namespace cd = fp8kit::numerics::cvt_directed;
using namespace fp8kit::emu;

namespace {

// Mismatches of one input under policy p (0 or 1), and whether it lay in the domain.
template <class D>
int check_one(std::uint32_t y, const Policy& p, bool* domain) {
    *domain = cd::in_domain<D>(y);
    if (!*domain) return 0;  // the kernels read the table of emu::convert's own results there
    const std::uint32_t w = cd::grid_value<D>(y, cd::step_of<D>(p.rounding));
    const std::uint32_t got = cd::fix_codes<D>(convert<Binary32, cd::Grid<D>>(w, kRneSaturate));
    return got != convert<Binary32, D>(y, p) ? 1 : 0;
}

struct Tally {
    std::uint64_t bad = 0, domain = 0, total = 0, first_bad = ~0ull;
};

template <class D>
Tally sweep(const std::vector<std::uint32_t>& inputs, const Policy& p) {
    Tally t;
    const auto n = static_cast<std::int64_t>(inputs.size());
    std::uint64_t bad = 0, domain = 0, first = ~0ull;
#pragma omp parallel for schedule(static) reduction(+ : bad, domain) reduction(min : first)
    for (std::int64_t i = 0; i < n; ++i) {
        bool dom = false;
        const int b = check_one<D>(inputs[static_cast<std::size_t>(i)], p, &dom);
        bad += static_cast<std::uint64_t>(b);
        domain += dom;
        if (b != 0 && inputs[static_cast<std::size_t>(i)] < first) first = inputs[static_cast<std::size_t>(i)];
    }
    t.bad = bad;
    t.domain = domain;
    t.total = inputs.size();
    t.first_bad = first;
    return t;
}

template <class D>
Tally sweep_all(const Policy& p) {
    Tally t;
    std::uint64_t bad = 0, domain = 0, first = ~0ull;
    constexpr std::int64_t kAll = std::int64_t{1} << 32;
#pragma omp parallel for schedule(static, 1 << 20) reduction(+ : bad, domain) reduction(min : first)
    for (std::int64_t i = 0; i < kAll; ++i) {
        bool dom = false;
        const int b = check_one<D>(static_cast<std::uint32_t>(i), p, &dom);
        bad += static_cast<std::uint64_t>(b);
        domain += dom;
        if (b != 0 && static_cast<std::uint64_t>(i) < first) first = static_cast<std::uint64_t>(i);
    }
    t.bad = bad;
    t.domain = domain;
    t.total = std::uint64_t{1} << 32;
    t.first_bad = first;
    return t;
}

std::vector<std::uint32_t> edge_inputs() {
    std::vector<std::uint32_t> v;
    const std::uint32_t lows[] = {0x000u, 0x001u, 0x002u, 0x7FEu, 0x7FFu, 0x800u, 0x801u, 0xFFEu, 0xFFFu};
    v.reserve(512u * 2048u * std::size(lows));
    for (std::uint32_t se = 0; se < 512; ++se)
        for (std::uint32_t hi = 0; hi < 2048; ++hi)
            for (std::uint32_t lo : lows) v.push_back((se << 23) | (hi << 12) | lo);
    return v;
}

template <class D>
void check_format(const char* name, bool all) {
    static const std::vector<std::uint32_t> edges = edge_inputs();
    for (int r = 0; r < 3; ++r) {
        const auto rounding = static_cast<Rounding>(r);  // nearest_even, nearest_away, toward_zero
        if (!cd::serves<D>(rounding)) continue;
        // Overflow and NaN encoding do not act in the domain: the subset takes all of them, the
        // full sweep one (the kernel's other inputs read the table of emu::convert's results).
        for (int o = 0; o < 3; ++o) {
            for (int ne = 0; ne < 4; ++ne) {
                const Policy p{rounding, static_cast<Overflow>(o), static_cast<NanEncoding>(ne)};
                if (all && (o != 1 || ne != 1)) continue;
                const Tally t = all ? sweep_all<D>(p) : sweep<D>(edges, p);
                INFO(name << " rounding " << r << " overflow " << o << " nan " << ne << ": " << t.bad
                          << " mismatches, first input 0x" << std::hex << t.first_bad);
                CHECK(t.bad == 0);
                // The domain is most of [-max, max]: a rule that served nothing would pass.
                CHECK(t.domain > t.total / 4);
            }
        }
    }
}

}  // namespace

TEST_CASE("cvt_directed equals emu::convert on an edge-dense subset", "[numerics][cvt-directed]") {
    check_format<E4M3>("e4m3", false);
    check_format<E5M2>("e5m2", false);
    check_format<E4M3FNUZ>("e4m3fnuz", false);
    check_format<E5M2FNUZ>("e5m2fnuz", false);
}

// All inputs for the E4M3 pair (E4M3, E4M3FNUZ: five roundings, 43 s on one core); the E5M2 pair
// is the same code with other constants, and takes the edge-dense subset above here and all 2^32
// inputs in the GPU's exhaustive check (cuda/tools/exhaustive_check.cu).
TEST_CASE("cvt_directed equals emu::convert on all 2^32 float32 inputs", "[numerics][cvt-directed][exhaustive]") {
    check_format<E4M3>("e4m3", true);
    check_format<E4M3FNUZ>("e4m3fnuz", true);
}

TEST_CASE("cvt_directed serves only its formats and roundings", "[numerics][cvt-directed]") {
    CHECK(cd::serves<E4M3>(Rounding::toward_zero));
    CHECK(cd::serves<E5M2>(Rounding::nearest_away));
    CHECK_FALSE(cd::serves<E4M3>(Rounding::nearest_even));  // kCvt / kCvtFix
    CHECK_FALSE(cd::serves<E4M3>(Rounding::toward_positive));
    CHECK(cd::serves<E4M3FNUZ>(Rounding::nearest_even));
    CHECK_FALSE(cd::serves<E5M2FNUZ>(Rounding::stochastic));
    CHECK_FALSE(cd::serves<E4M3B11FNUZ>(Rounding::nearest_even));
    CHECK_FALSE(cd::serves<E3M4>(Rounding::toward_zero));
}

TEST_CASE("cvt_directed's FNUZ code fix turns every byte 0x80 into 0x00 and keeps the others",
          "[numerics][cvt-directed]") {
    std::uint64_t bad = 0;
    for (std::uint32_t a = 0; a < 256; ++a)
        for (std::uint32_t b = 0; b < 256; ++b) {
            const std::uint32_t x = a | (b << 8) | (b << 16) | (a << 24);
            const std::uint32_t fa = a == 0x80 ? 0 : a, fb = b == 0x80 ? 0 : b;
            bad += cd::fix_codes<E4M3FNUZ>(x) != (fa | (fb << 8) | (fb << 16) | (fa << 24));
            bad += cd::fix_codes<E5M2FNUZ>(x) != (fa | (fb << 8) | (fb << 16) | (fa << 24));
            bad += cd::fix_codes<E4M3>(x) != x;
        }
    CHECK(bad == 0);
}
