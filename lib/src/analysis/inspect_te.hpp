// inspect's check of TransformerEngine DumpTensors files (TE's quantized codes against the
// reference), in the report's JSON and text forms.
#pragma once

#include <cstdio>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/validate.hpp"

namespace fp8kit::inspect {

// The report's "te_quantized" array: one object per file checked.
nlohmann::ordered_json te_checks_json(const std::vector<TeQuantizedCheck>& checks);
// One line per file checked, after a title; nothing when none was.
void write_te_text(const std::vector<TeQuantizedCheck>& checks, std::FILE* out);

}  // namespace fp8kit::inspect
