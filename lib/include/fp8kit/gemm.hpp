// fp8kit gemm: the reference FP8 GEMM and its accumulation models (docs/gemm.md).
#pragma once

#include "fp8kit/gemm/compare.hpp"
#include "fp8kit/gemm/device.hpp"
#include "fp8kit/gemm/files.hpp"
#include "fp8kit/gemm/gemm.hpp"
#include "fp8kit/gemm/model.hpp"
