// Everything of the reference in one include.
#pragma once
#include "fp8kit/emu/format.hpp"
#include "fp8kit/emu/policy.hpp"
#include "fp8kit/emu/convert.hpp"
#include "fp8kit/emu/formats.hpp"
#include "fp8kit/emu/profiles.hpp"
#include "fp8kit/emu/pack.hpp"
#include "fp8kit/emu/random.hpp"
