// fp8kit/io: the readers: tensor dumps (HDF5, safetensors), .npy and raw arrays, amax traces and logs.
#pragma once

#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/npy.hpp"
#include "fp8kit/io/array_file.hpp"
#include "fp8kit/io/trace.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/te_debug.hpp"
