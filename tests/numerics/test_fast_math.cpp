// numerics/fast_math.hpp (nvcc --use_fast_math arithmetic) with lib's embedded MUFU tables, against
// results an H200 computed: tests/golden/mufu/samples.bin (scripts/gpu/mufu_capture.cu, which also
// checks all 2^32 inputs on the GPU). Here the host build of the same functions is checked: special
// values, random bit patterns over every binade, and add / multiply / FMA around 2^-126, where
// flushing decides.
#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "fp8kit/numerics/fast_math.hpp"
#include "fp8kit/simulate.hpp"

namespace fm = fp8kit::numerics::fast_math;
using fp8kit::numerics::bits_of;
using fp8kit::numerics::float_of;

namespace {

struct Samples {
    std::vector<std::uint32_t> unary;  // x, rcp, sqrt
    std::vector<std::uint32_t> sets;   // a, b, c, a * b, a + c, a * b + c
};

Samples read_samples() {
    const std::string path = std::string(FP8KIT_GOLDEN_DIR) + "/mufu/samples.bin";
    std::FILE* f = std::fopen(path.c_str(), "rb");
    REQUIRE(f != nullptr);
    std::uint32_t head[2] = {}, nsets = 0;
    Samples s;
    REQUIRE(std::fread(head, 4, 2, f) == 2);
    REQUIRE(head[0] == 0x5346554Du);  // 'MUFS'
    s.unary.resize(3 * std::size_t{head[1]});
    REQUIRE(std::fread(s.unary.data(), 4, s.unary.size(), f) == s.unary.size());
    REQUIRE(std::fread(&nsets, 4, 1, f) == 1);
    s.sets.resize(6 * std::size_t{nsets});
    REQUIRE(std::fread(s.sets.data(), 4, s.sets.size(), f) == s.sets.size());
    std::fclose(f);
    return s;
}

std::string hex(std::uint32_t u) {
    char b[16];
    std::snprintf(b, sizeof b, "%08x", u);
    return b;
}

}  // namespace

TEST_CASE("fast math: MUFU.RCP and MUFU.SQRT from lib's tables equal the H200's", "[numerics][fast_math]") {
    const Samples s = read_samples();
    const fm::MufuTables& t = fp8kit::simulate::mufu_sm90_tables();
    REQUIRE(s.unary.size() >= 3 * 16384);
    std::size_t bad_rcp = 0, bad_sqrt = 0;
    for (std::size_t i = 0; i < s.unary.size(); i += 3) {
        const float x = float_of(s.unary[i]);
        if (bits_of(fm::rcp(x, t)) != s.unary[i + 1]) {
            if (++bad_rcp <= 4) UNSCOPED_INFO("rcp " << hex(s.unary[i]) << ": GPU " << hex(s.unary[i + 1]));
        }
        if (bits_of(fm::sqrt(x, t)) != s.unary[i + 2]) {
            if (++bad_sqrt <= 4) UNSCOPED_INFO("sqrt " << hex(s.unary[i]) << ": GPU " << hex(s.unary[i + 2]));
        }
    }
    CHECK(bad_rcp == 0);
    CHECK(bad_sqrt == 0);
}

TEST_CASE("fast math: flushing add, multiply and FMA equal the H200's around 2^-126", "[numerics][fast_math]") {
    const Samples s = read_samples();
    REQUIRE(s.sets.size() >= 6 * 8192);
    std::size_t bad[3] = {}, boundary = 0;
    for (std::size_t i = 0; i < s.sets.size(); i += 6) {
        const float a = float_of(s.sets[i]), b = float_of(s.sets[i + 1]), c = float_of(s.sets[i + 2]);
        const std::uint32_t got[3] = {bits_of(fm::mul(a, b)), bits_of(fm::add(a, c)), bits_of(fm::fma(a, b, c))};
        for (int op = 0; op < 3; ++op)
            if (got[op] != s.sets[i + 3 + op] && ++bad[op] <= 4)
                UNSCOPED_INFO("op " << op << " on " << hex(s.sets[i]) << " " << hex(s.sets[i + 1]) << " "
                                    << hex(s.sets[i + 2]) << ": GPU " << hex(s.sets[i + 3 + op]) << ", model "
                                    << hex(got[op]));
        // Sets where IEEE gives exactly +-2^-126 but the GPU flushed: the tininess rule is exercised.
        boundary += fm::is_min_normal(a * b) && s.sets[i + 3] == (s.sets[i] ^ s.sets[i + 1]) >> 31 << 31;
    }
    CHECK(bad[0] == 0);
    CHECK(bad[1] == 0);
    CHECK(bad[2] == 0);
    CHECK(boundary > 0);
}
