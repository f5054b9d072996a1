// Consumer of the installed fp8kit::core: a recipe scale, a bulk cast and the dump reader's file
// check (which pulls in HDF5), each against a value worked by hand.
#include <cstdint>
#include <cstdio>

#include "fp8kit/convert.hpp"
#include "fp8kit/io.hpp"
#include "fp8kit/recipes.hpp"

int main() {
    int bad = 0;
    // te-current on an activation with amax 2: scale = 448 / 2 (E4M3), exact in float32.
    const fp8kit::RecipeSpec r = fp8kit::parse_recipe("te-current");
    const fp8kit::ScalePair s = fp8kit::recipe_scale(r, fp8kit::Role::activation, 2.0f);
    if (s.scale != 224.0f) {
        std::printf("te-current scale %g, expected 224\n", s.scale);
        ++bad;
    }
    // OCP OFP8 v1.0: E4M3 1.0 = 0x38, 448 = 0x7E, -2 = 0xC0.
    const float in[3] = {1.0f, 448.0f, -2.0f};
    std::uint8_t out[3] = {};
    fp8kit::encode_array(fp8kit::Format::e4m3, fp8kit::Wide::f32, in, out, 3, r.policy);
    if (out[0] != 0x38 || out[1] != 0x7E || out[2] != 0xC0) {
        std::printf("encode_array: %02X %02X %02X, expected 38 7E C0\n", out[0], out[1], out[2]);
        ++bad;
    }
    if (fp8kit::dump::is_dump_file("/nonexistent/fp8kit_consumer.h5")) {
        std::printf("is_dump_file: a missing file reported as a dump\n");
        ++bad;
    }
    std::printf("uses_core: %s\n", bad ? "FAILED" : "ok");
    return bad ? 1 : 0;
}
