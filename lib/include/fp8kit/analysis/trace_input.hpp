// The amax trace that `fp8kit replay` (and fp8kit.replay) reads from a file: a trace (CSV,
// dlfw-inspect log) as trace::read_trace reads it, or a tensor dump turned into a trace (the TE
// amax of every dumped step). Bad input throws trace::TraceError or dump::DumpError naming the file.
#pragma once

#include <string>
#include <vector>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/trace.hpp"

namespace fp8kit::trace {

// A dump as a trace: one series per dumped tensor name (step components dropped, see
// sweep::series_name_of_dump) with TE's amax of each dumped step. Optimizer state and tensors
// without a step are left out.
Trace dump_trace(const std::string& path, const dump::ReadOptions& read = {});

// The trace (or dump_trace of a dump) with only the series matching one of `patterns` (all when
// empty); TraceError naming the file and line for bad input, or the patterns when nothing matches.
Trace load_trace(const std::string& path, const std::vector<std::string>& patterns, const dump::ReadOptions& read = {});

}  // namespace fp8kit::trace
