// The operand options that `fp8kit gemm` and `fp8kit validate --gemm` share.
#pragma once

#include <string>

#include "command.hpp"
#include "fp8kit/gemm.hpp"

namespace fp8kit::cli {

struct GemmArgs {
    std::string a, b, a_format = "e4m3", b_format = "e4m3", scale_a = "1", scale_b = "1", out_dtype = "f32";
    void add_to(CLI::App* cmd, bool positional);
    // Loads A, B and the scales (UsageError naming the file or option).
    void load(gemm::GemmInputs& in) const;
    gemm::OutType out() const;
};

gemm::AccumModel require_model(const std::string& s);

}  // namespace fp8kit::cli
