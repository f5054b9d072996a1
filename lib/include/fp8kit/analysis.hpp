// fp8kit/analysis: inspect (statistics of every tensor in a dump), replay (a delayed-scaling recipe over an amax trace) and sweep (which history, algorithm and margin), with their inputs loaded from traces and dumps.
#pragma once

#include "fp8kit/analysis/inspect.hpp"
#include "fp8kit/analysis/inspect_report.hpp"
#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/analysis/sweep.hpp"
#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/analysis/sweep_report.hpp"
#include "fp8kit/analysis/trace_input.hpp"
