// fp8kit/analysis: inspect (statistics of every tensor in a dump), replay (a delayed-scaling recipe over an amax trace) and sweep (which history, algorithm and margin).
#pragma once

#include "fp8kit/analysis/inspect.hpp"
#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/analysis/sweep.hpp"
