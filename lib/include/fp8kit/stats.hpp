// fp8kit/stats: what a recipe does to a tensor (QuantStats, per-block statistics) and magnitude histograms.
#pragma once

#include "fp8kit/stats/statistics.hpp"
#include "fp8kit/stats/block_quantize.hpp"
#include "fp8kit/stats/magnitude_histogram.hpp"
#include "fp8kit/stats/device.hpp"
#include "fp8kit/stats/fields.hpp"
