// validate_mismatches() (the report from a scan done elsewhere, e.g. on a GPU) against validate()
// on the same data: the scan comes from validate_cases.hpp's plain host scan (every element and
// every policy through emu::encode), the codes carry injected mismatches of every class, and the
// two reports must be the same JSON, for every input type, several formats, every scaling mode
// and block layout, below and above the size where validate() switches to its tables.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "fp8kit/numerics/validate_rules.hpp"
#include "fp8kit/validate.hpp"
#include "validate_cases.hpp"

using namespace fp8kit;
using validate_cases::Case;

namespace {

void same_report(const Case& c, std::size_t examples = 5, bool detect = true) {
    const validate_cases::Data d = validate_cases::make(c);
    ValidateOptions o;
    o.examples = examples;
    o.detect_policies = detect;
    const ValidateReport want = validate(d.request(), o);
    const MismatchScan scan = validate_cases::plain_scan(d);
    ValidateRequest rq = d.request();
    rq.input = nullptr;  // validate_mismatches reads the scan only
    rq.codes = nullptr;
    const ValidateReport got = validate_mismatches(rq, scan, o);
    INFO("from " << name(c.from) << " to " << name(c.to) << " mode " << static_cast<int>(c.mode) << " layout "
                 << name(c.layout) << " " << c.rows << " x " << c.cols);
    CHECK(got.json() == want.json());
    CHECK(got.summary() == want.summary());
    CHECK(describe_consistency(got) == describe_consistency(want));
}

const BlockLayout kLayouts[] = {BlockLayout::tensor, BlockLayout::rowwise, BlockLayout::b1x128, BlockLayout::b128x128,
                                BlockLayout::mx32};

}  // namespace

TEST_CASE("validate_mismatches equals validate: injected mismatches, every type, mode and layout",
          "[validate][mismatches]") {
    std::uint64_t seed = 1;
    for (Wide w : {Wide::f32, Wide::f16, Wide::bf16, Wide::f64})
        for (Format f : {Format::e4m3, Format::e5m2, Format::e8m0, Format::e2m1}) {
            Case c;
            c.from = w;
            c.to = f;
            c.rows = 37;
            c.cols = 300;
            c.seed = seed++;
            c.ref = f == Format::e8m0
                        ? Policy{Rounding::toward_positive, Overflow::saturate_finite, NanEncoding::canonical}
                        : Policy{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
            same_report(c);
            for (ScaleMode m : {ScaleMode::scale, ScaleMode::scale_inv})
                for (BlockLayout b : kLayouts) {
                    c.mode = m;
                    c.layout = b;
                    c.seed = seed++;
                    same_report(c);
                }
        }
}

TEST_CASE("validate_mismatches equals validate: table-sized inputs, other policies, options",
          "[validate][mismatches]") {
    Case c;
    c.rows = 300;
    c.cols = 260;  // 78,000 elements: validate() takes its table path
    for (Wide w : {Wide::f32, Wide::f16, Wide::bf16}) {
        c.from = w;
        c.to = w == Wide::f16 ? Format::e5m2 : Format::e4m3;
        c.ref = {Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet};
        c.mode = ScaleMode::scale_inv;
        c.layout = w == Wide::bf16 ? BlockLayout::mx32 : BlockLayout::b128x128;
        c.seed = 100 + static_cast<int>(w);
        same_report(c);
        same_report(c, 2, false);
    }
    // No injection, the codes of one policy throughout: consistent policies and profiles.
    c.inject = 0;
    c.use_follow = true;
    for (Policy p : {Policy{Rounding::toward_zero, Overflow::saturate_finite, NanEncoding::signed_all_ones},
                     Policy{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical}}) {
        c.follow = p;
        c.mode = ScaleMode::scale;
        c.layout = BlockLayout::b1x128;
        same_report(c);
        c.rows = 3;
        c.cols = 100;
        c.mode = ScaleMode::none;
        same_report(c);
    }
}

TEST_CASE("validate_mismatches rejects inconsistent scans", "[validate][mismatches]") {
    Case c;
    c.rows = 4;
    c.cols = 64;
    const validate_cases::Data d = validate_cases::make(c);
    MismatchScan s = validate_cases::plain_scan(d);
    REQUIRE(!s.indices.empty());
    MismatchScan shorter = s;
    shorter.n -= 1;
    CHECK_THROWS_AS(validate_mismatches(d.request(), shorter), std::invalid_argument);
    MismatchScan ragged = s;
    ragged.codes.pop_back();
    CHECK_THROWS_AS(validate_mismatches(d.request(), ragged), std::invalid_argument);
    MismatchScan matching = s;  // an element listed whose code is the reference code
    for (std::size_t i = 0; i < d.n(); ++i)
        if (std::find(s.indices.begin(), s.indices.end(), i) == s.indices.end()) {
            matching.indices = {i};
            matching.input_bits = {d.bits[i]};
            matching.codes = {d.codes[i]};
            break;
        }
    CHECK_THROWS_WITH(validate_mismatches(d.request(), matching), Catch::Contains("equals the reference code"));
}

TEST_CASE("numerics block_of equals the walk lib's scan uses, and block_scale_count bounds it",
          "[validate][mismatches][blocks]") {
    using numerics::block_of;
    using numerics::BlockWalk;
    for (BlockLayout b : kLayouts)
        for (std::size_t cols : {1u, 31u, 32u, 33u, 127u, 128u, 129u, 300u}) {
            const std::size_t rows = 260;
            const std::size_t count = numerics::block_scale_count(b, rows, cols);
            for (std::size_t first : {std::size_t{0}, cols * 129 + cols / 2}) {
                BlockWalk walk(b, cols, first);
                std::size_t last = 0;
                for (std::size_t i = first; i < rows * cols; ++i, walk.next()) {
                    const std::size_t k = block_of(b, i, cols);
                    if (k != walk.index()) FAIL("layout " << name(b) << " cols " << cols << " element " << i);
                    if (k >= count) FAIL("block " << k << " past the " << count << " scales");
                    last = std::max(last, k);
                }
                if (first == 0) CHECK(last + 1 == count);  // every scale is used
            }
        }
}
