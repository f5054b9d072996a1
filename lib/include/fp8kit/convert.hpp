// fp8kit/convert: bulk conversion between wide arrays and 8-bit codes (SIMD over emu), format facts, the names users type for formats, policies and profiles, and the resolution of a named policy.
#pragma once

#include "fp8kit/convert/names.hpp"
#include "fp8kit/convert/parse.hpp"
#include "fp8kit/convert/policy_args.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/convert/quantize.hpp"
