// Whole conversion tables as raw bytes, for diffing a kernel's own output (`fp8kit table`): one
// output per input bit pattern, in increasing order, written through the one output sink
// (io/sink.hpp).
#pragma once

#include <string>

#include "fp8kit/convert/names.hpp"

namespace fp8kit {

// Every code of `from` decoded to `to` (f32, f16 or bf16; little-endian values): 2^bits values
// (16 for FP4, 64 for FP6, else 256). `arg` names the output in errors (io::OutputError).
void write_decode_table(Format from, Wide to, const std::string& path, const char* arg);
// Every bit pattern of `from` (f32: 2^32, f16 and bf16: 65,536) encoded to `to` under `p`, one
// code per byte. `p` must round deterministically (a stochastic rounding has no single table).
void write_encode_table(Wide from, Format to, const Policy& p, const std::string& path, const char* arg);

}  // namespace fp8kit
