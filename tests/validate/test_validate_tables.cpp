// validate() switches to per-policy code tables on large inputs (see FastRound in
// lib/src/validate/validate_engine.hpp). Codes made element by element with emu::convert must still be
// bit-exact for every format and rounding, over float32 bit patterns that include NaN payloads,
// subnormals, overflow and low-bit patterns on both sides of the table's sticky boundary.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/validate.hpp"

using namespace fp8kit;

TEST_CASE("validate: the float32 code tables equal emu::convert element by element", "[validate]") {
    std::mt19937_64 rng(11);
    std::vector<std::uint32_t> bits;
    for (std::size_t i = 0; i < (std::size_t{1} << 17); ++i) {
        const std::uint64_t r = rng();
        std::uint32_t b = static_cast<std::uint32_t>(r);
        if (i % 2) b = (b & 0x807FFFFFu) | ((127u - 20u + static_cast<std::uint32_t>((r >> 32) % 38)) << 23);
        if (i % 3 == 0) {  // below bit j: zero, one, exactly half, half plus one, all ones
            const int j = 4 + static_cast<int>((r >> 40) % 19);
            const std::uint32_t mask = (1u << j) - 1, half = 1u << (j - 1);
            const std::uint32_t lows[] = {0u, 1u, half, half | 1u, mask};
            b = (b & ~mask) | lows[(r >> 48) % 5];
        }
        if (i % 5 == 0) b &= 0x807FFFFFu;  // subnormal (E8M0 reaches down to 2^-127)
        bits.push_back(b);
    }
    const Rounding roundings[] = {Rounding::nearest_even, Rounding::nearest_away, Rounding::toward_zero,
                                  Rounding::toward_positive, Rounding::toward_negative};
    const Overflow overflows[] = {Overflow::saturate_all, Overflow::saturate_finite, Overflow::no_saturate};
    const NanEncoding nans[] = {NanEncoding::canonical, NanEncoding::signed_all_ones, NanEncoding::signed_quiet,
                                NanEncoding::signed_quiet_payload};
    int k = 0;
    for (Format f : emu::kAllFormats) {
        for (Rounding rd : roundings) {
            const Policy p{rd, overflows[k % 3], nans[k % 4]};
            ++k;
            std::vector<std::uint8_t> codes;
            for (std::uint32_t b : bits) codes.push_back(emu::encode(f, Wide::f32, b, p));
            ValidateRequest rq{Wide::f32, bits.data(), codes.data(), bits.size(), f, p, {}};
            const ValidateReport r = validate(rq, {3, true});
            INFO(name(f) << " " << describe(p) << "\n" << r.summary());
            CHECK(r.exact());
            CHECK(std::any_of(r.consistent_policies.begin(), r.consistent_policies.end(), [&](const Policy& q) {
                return q.rounding == p.rounding && q.overflow == p.overflow && q.nan == p.nan;
            }));
            // And one flipped code is found at its index.
            codes[12345] ^= 1;
            const ValidateReport r2 = validate(rq, {3, false});
            CHECK(r2.mismatches == 1);
            std::uint64_t at = 0;
            for (const ClassReport& c : r2.classes)
                for (const MismatchExample& e : c.examples) at = e.index;
            CHECK(at == 12345);
        }
    }
}
