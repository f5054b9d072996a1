// The GPU scan of validate() (cuda/validate.hpp) against lib's validate() on the same data: the
// report from cuda::validate_scan + lib's validate_mismatches must be the JSON validate() writes,
// for e4m3, e5m2, e8m0 and e2m1 (FP4: the narrow formats' emu::convert path) x f32/f16/bf16 x
// every scaling mode and block layout, with injected mismatches of every class
// (tests/validate/validate_cases.hpp), scales on the device and on the host, and with the scan's
// own lists (indices ascending, input bits, codes, policies) equal to the plain host scan's.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "../validate/validate_cases.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/cuda/validate.hpp"
#include "fp8kit/validate.hpp"

namespace cu = fp8kit::cuda;
using namespace fp8kit;
using validate_cases::Case;

namespace {

// Device copies of a case's input, codes and scales, freed at the end of the scope.
struct OnDevice {
    void* input = nullptr;
    std::uint8_t* codes = nullptr;
    float* scales = nullptr;
    explicit OnDevice(const validate_cases::Data& d) {
        input = cu::device_alloc(d.input.size() + 1);
        codes = static_cast<std::uint8_t*>(cu::device_alloc(d.codes.size() + 1));
        scales = static_cast<float*>(cu::device_alloc(d.scales.size() * 4 + 4));
        cu::copy_to_device(input, d.input.data(), d.input.size());
        cu::copy_to_device(codes, d.codes.data(), d.codes.size());
        cu::copy_to_device(scales, d.scales.data(), d.scales.size() * 4);
    }
    ~OnDevice() {
        cu::device_free(input);
        cu::device_free(codes);
        cu::device_free(scales);
    }
};

MismatchScan as_lib(cu::ValidateScan s) {
    MismatchScan m;
    m.n = s.n;
    m.indices = std::move(s.indices);
    m.input_bits = std::move(s.input_bits);
    m.codes = std::move(s.codes);
    m.policies = s.policies;
    return m;
}

void same_report(const Case& c, bool device_scales, bool detect = true) {
    const validate_cases::Data d = validate_cases::make(c);
    const OnDevice dev(d);
    cu::ValidateScaling sc;
    sc.mode = c.mode;
    sc.layout = c.layout;
    sc.rows = c.rows;
    sc.cols = c.cols;
    if (c.mode != ScaleMode::none && c.layout == BlockLayout::tensor) sc.value = d.scales[0];
    if (c.layout != BlockLayout::tensor) {
        sc.scales = device_scales ? dev.scales : d.scales.data();
        sc.scales_on_device = device_scales;
        sc.block_count = d.scales.size();
    }
    ValidateOptions o;
    o.detect_policies = detect;
    INFO("from " << name(c.from) << " to " << name(c.to) << " mode " << static_cast<int>(c.mode) << " layout "
                 << name(c.layout) << " " << c.rows << " x " << c.cols << (device_scales ? " (device scales)" : ""));
    const MismatchScan gpu =
        as_lib(cu::validate_scan(c.to, c.from, dev.input, dev.codes, d.n(), c.ref, sc, detect, nullptr));
    const MismatchScan host = validate_cases::plain_scan(d);
    CHECK(gpu.indices == host.indices);
    CHECK(gpu.input_bits == host.input_bits);
    CHECK(gpu.codes == host.codes);
    if (detect) CHECK(gpu.policies == host.policies);
    ValidateRequest rq = d.request();
    const std::string want = validate(rq, o).json();
    rq.input = nullptr;
    rq.codes = nullptr;
    CHECK(validate_mismatches(rq, gpu, o).json() == want);
}

const BlockLayout kLayouts[] = {BlockLayout::tensor, BlockLayout::rowwise, BlockLayout::b1x128, BlockLayout::b128x128,
                                BlockLayout::mx32};

}  // namespace

TEST_CASE("validate_scan + validate_mismatches equals validate: formats x inputs x modes x layouts",
          "[validate][gpu]") {
    std::uint64_t seed = 7;
    for (Wide w : {Wide::f32, Wide::f16, Wide::bf16})
        for (Format f : {Format::e4m3, Format::e5m2, Format::e8m0, Format::e2m1}) {
            Case c;
            c.from = w;
            c.to = f;
            c.rows = 131;
            c.cols = 300;
            c.seed = seed++;
            c.ref = f == Format::e8m0
                        ? Policy{Rounding::toward_positive, Overflow::saturate_finite, NanEncoding::canonical}
                        : Policy{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
            same_report(c, false);
            for (ScaleMode m : {ScaleMode::scale, ScaleMode::scale_inv})
                for (BlockLayout b : kLayouts) {
                    c.mode = m;
                    c.layout = b;
                    c.seed = seed++;
                    same_report(c, (seed & 1) != 0);
                }
        }
}

TEST_CASE("validate_scan: consistent policies, other references, no detection, empty input", "[validate][gpu]") {
    Case c;
    c.rows = 260;
    c.cols = 300;  // above validate()'s table size
    c.inject = 0;
    c.use_follow = true;
    for (Wide w : {Wide::f32, Wide::f16, Wide::bf16})
        for (Policy p : {Policy{Rounding::toward_zero, Overflow::saturate_finite, NanEncoding::signed_all_ones},
                         Policy{Rounding::nearest_even, Overflow::no_saturate, NanEncoding::signed_quiet}}) {
            c.from = w;
            c.to = w == Wide::f16 ? Format::e5m2 : Format::e4m3;
            c.follow = p;
            c.mode = ScaleMode::scale_inv;
            c.layout = BlockLayout::b1x128;
            same_report(c, true);
            c.mode = ScaleMode::none;
            same_report(c, false);
        }
    c.inject = 0.3;
    c.ref = {Rounding::nearest_away, Overflow::no_saturate, NanEncoding::signed_quiet_payload};
    c.mode = ScaleMode::scale;
    c.layout = BlockLayout::mx32;
    same_report(c, true, false);
    c.rows = 0;
    c.cols = 5;
    c.mode = ScaleMode::none;
    same_report(c, false);
}

TEST_CASE("validate_scan refuses what validate refuses", "[validate][gpu]") {
    cu::ValidateScaling sc;
    const Policy sr{Rounding::stochastic, Overflow::saturate_all, NanEncoding::canonical};
    CHECK_THROWS_AS(cu::validate_scan(Format::e4m3, Wide::f32, nullptr, nullptr, 0, sr, sc, true),
                    std::invalid_argument);
    const Policy ne{Rounding::nearest_even, Overflow::saturate_all, NanEncoding::canonical};
    CHECK_THROWS_AS(cu::validate_scan(Format::e4m3, Wide::f64, nullptr, nullptr, 0, ne, sc, true),
                    std::invalid_argument);
    std::vector<float> s(3, 1.0f);
    sc.mode = ScaleMode::scale;
    sc.layout = BlockLayout::rowwise;
    sc.rows = 4;
    sc.cols = 8;
    sc.scales = s.data();
    sc.block_count = s.size();  // 4 needed
    void* d = cu::device_alloc(64);
    CHECK_THROWS_WITH(cu::validate_scan(Format::e4m3, Wide::f32, d, static_cast<std::uint8_t*>(d), 32, ne, sc, true),
                      Catch::Contains("needs 4 block scales, got 3"));
    cu::device_free(d);
}
