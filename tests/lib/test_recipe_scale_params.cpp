// recipe_scale_params (the form of a recipe's rule a CUDA kernel evaluates on a device amax, used
// by cuda::statistics_async) gives recipe_scale's scale and scale_inv bit for bit, for every preset
// and role, at ordinary and edge amaxes (0, float32 subnormal, huge, +Inf, NaN). tests/gpu checks
// the device's evaluation against recipe_scale likewise.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include "fp8kit/numerics/scale_rules.hpp"
#include "fp8kit/recipes.hpp"
#include "fp8kit/recipes/scale_params.hpp"

using namespace fp8kit;

namespace {
std::uint32_t bits_of_float(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    return u;
}
}  // namespace

TEST_CASE("recipe_scale_params + numerics::rule_scale equal recipe_scale", "[recipes]") {
    const float amaxes[] = {0.0f,
                            1e-45f,
                            1e-30f,
                            0.5f,
                            1.0f,
                            3.0f,
                            448.0f,
                            57344.0f,
                            1e30f,
                            3.4e38f,
                            std::numeric_limits<float>::infinity(),
                            std::numeric_limits<float>::quiet_NaN()};
    int checked = 0;
    for (const auto& name : recipe_presets()) {
        const RecipeSpec r = parse_recipe(name);
        for (Role role : {Role::activation, Role::weight, Role::gradient}) {
            numerics::ScaleParams p = recipe_scale_params(r, role);
            CHECK(p.rule == r.rule);
            CHECK(p.format == r.role(role).format);
            for (float a : amaxes) {
                INFO(name << " role " << slot_name(role) << " amax " << a);
                numerics::ScaleParams q = p;
                if (numerics::rule_uses_global_amax(q.rule)) numerics::set_global_amax(q, a);
                const numerics::BlockScale got = numerics::rule_scale(q, a);
                const ScalePair want = recipe_scale(r, role, a);
                CHECK(bits_of_float(got.scale) == bits_of_float(want.scale));
                CHECK(bits_of_float(got.scale_inv) == bits_of_float(want.scale_inv));
                ++checked;
            }
        }
    }
    CHECK(checked >= 5 * 3 * 12);
}
