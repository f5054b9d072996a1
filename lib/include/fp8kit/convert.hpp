// fp8kit/convert: bulk conversion between wide arrays and 8-bit codes (SIMD over emu), format facts, and the names users type for formats, policies and profiles.
#pragma once

#include "fp8kit/convert/names.hpp"
#include "fp8kit/convert/parse.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/convert/quantize.hpp"
