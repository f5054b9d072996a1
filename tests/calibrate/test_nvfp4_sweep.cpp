// calibrate::nvfp4_scale_sweep on blocks whose answer follows from ModelOpt's rules by hand
// (calib/mse.py NVFP4MSECalibrator, qtensor/nvfp4_tensor.py; docs/inference.md, "NVFP4 weight
// scale sweep"). The comparison with ModelOpt itself is tests/python/test_calibrate_nvfp4_sweep.py.
#include <catch2/catch.hpp>

#include <vector>

#include "fp8kit/calibrate.hpp"

using namespace fp8kit::calibrate;

TEST_CASE("nvfp4 sweep: hand-derived blocks", "[calibrate]") {
    // Block 0 = [1, 0 x 15]: global amax 1. A candidate E4M3 value v gives the block scale about
    // v / 2688, and 1 is exact only where 2688 / v is an E2M1 value (0.5 .. 6): v = 448 (6) is the
    // one such E4M3 value (672, 896, 1344, 1792, 2688 and 5376 are not), so the sweep picks 0x7E.
    // Block 1 is all zero: every candidate's loss is 0 and torch.argmin's first minimum (candidate
    // 0, code 0x01) wins.
    std::vector<float> w(32, 0.0f);
    w[0] = 1.0f;
    const auto r = nvfp4_scale_sweep(w, 16);
    REQUIRE(r.weight_scale.size() == 2);
    CHECK(r.weight_scale[0] == 0x7E);
    CHECK(r.candidate[0] == 125);
    CHECK(r.weight_scale[1] == 0x01);
    CHECK(r.candidate[1] == 0);
    CHECK(r.global_amax == 1.0f);
    CHECK(r.weight_scale_2 == 1.0f / 2688.0f);
    CHECK(r.amax[0] == 1.0f * (1.0f * (448.0f / 448.0f)));
    // The max rule: block amax / (6 * weight_scale_2) -> 0x7E (448 after rounding); the zero block's
    // scale 0 becomes 1.0 (0x38).
    const auto m = nvfp4_max_scales(w, r.weight_scale_2);
    CHECK(m == std::vector<std::uint8_t>{0x7E, 0x38});
    CHECK(nvfp4_sqnr(w, r.weight_scale, r.weight_scale_2) > 100.0);  // 1 = 6 x 448/2688 up to rounding
}

TEST_CASE("nvfp4 sweep: bad input is named", "[calibrate]") {
    CHECK_THROWS_WITH(nvfp4_scale_sweep(std::vector<float>(24, 1.0f), 24), Catch::Contains("block of 16"));
    std::vector<float> w(16, 1.0f);
    w[3] = NAN;
    CHECK_THROWS_WITH(nvfp4_scale_sweep(w, 16), Catch::Contains("NaN"));
}
