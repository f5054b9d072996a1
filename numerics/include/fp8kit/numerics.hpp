// fp8kit::numerics: the rules CPU and GPU share, each written once (numerics/README.md).
#pragma once

#include "fp8kit/numerics/element_stats.hpp"
#include "fp8kit/numerics/gemm_model.hpp"
#include "fp8kit/numerics/roles.hpp"
#include "fp8kit/numerics/validate_rules.hpp"
#include "fp8kit/numerics/scale_rules.hpp"
