// A recipe's scale rule for one role as numerics::ScaleParams: what recipe_scale evaluates on the
// host, in the form a CUDA kernel evaluates on a device amax (numerics::rule_scale, FP8KIT_HD),
// so the GPU statistics take their scale from the same rule without a host round trip
// (cuda/include/fp8kit/cuda/statistics_async.hpp). Kept out of recipes.hpp so that the kernels'
// callers do not pull in the whole recipe API.
#pragma once

#include "fp8kit/numerics/roles.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit {

struct RecipeSpec;

// The parameters of r's rule for the format of r.role(role); recipe_scale(r, role, amax) is
// numerics::rule_scale(recipe_scale_params(r, role), amax) (with the global amax set to amax for
// the NVFP4 rules, whose single block is then the whole tensor).
numerics::ScaleParams recipe_scale_params(const RecipeSpec& r, numerics::Role role);

}  // namespace fp8kit
