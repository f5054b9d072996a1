// fp8kit/warn: early warnings from the trends of amax series (trend.hpp, incremental, for a
// monitor) and the shapes of dumped tensors (shape.hpp), ranked (warning.hpp). docs/early-warning.md.
#pragma once

#include "fp8kit/warn/shape.hpp"
#include "fp8kit/warn/sources.hpp"
#include "fp8kit/warn/trend.hpp"
#include "fp8kit/warn/warning.hpp"
