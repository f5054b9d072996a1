// Shared GEMM options: parse, then hand everything to lib (fp8kit/gemm/files.hpp).
#include "gemm_args.hpp"

namespace fp8kit::cli {

void GemmArgs::add_to(CLI::App* cmd, bool positional) {
    if (positional) {
        cmd->add_option("A", a, "A: M x K uint8 codes (.npy |u1)")->required();
        cmd->add_option("B", b, "B: N x K uint8 codes (.npy |u1), the TN layout of cuBLASLt")->required();
    } else {
        cmd->add_option("--a", a, "A: M x K uint8 codes (.npy |u1)")->group("GEMM");
        cmd->add_option("--b", b, "B: N x K uint8 codes (.npy |u1)")->group("GEMM");
    }
    cmd->add_option("--a-format", a_format, "Format of A's codes (default e4m3)")->group("GEMM");
    cmd->add_option("--b-format", b_format, "Format of B's codes (default e4m3)")->group("GEMM");
    cmd->add_option("--scale-a", scale_a,
                    "A's scale: a number, or float32 .npy of 1, M (rowwise) or M x ceil(K/128) (1x128 blocks)")
        ->group("GEMM");
    cmd->add_option(
           "--scale-b", scale_b,
           "B's scale: a number, or float32 .npy of 1, N (rowwise) or ceil(N/128) x ceil(K/128) (128x128 blocks)")
        ->group("GEMM");
    cmd->add_option("--out-dtype", out_dtype, "f32 (float32) or bf16 (written as uint16 bit patterns)")->group("GEMM");
}

gemm::OutType GemmArgs::out() const {
    if (out_dtype == "f32") return gemm::OutType::f32;
    if (out_dtype == "bf16") return gemm::OutType::bf16;
    throw UsageError(fmt::format("--out-dtype: '{}' (choose f32 or bf16)", out_dtype));
}

void GemmArgs::load(gemm::GemmInputs& in) const {
    const Format fa = require_format(a_format, "--a-format"), fb = require_format(b_format, "--b-format");
    if (fa == Format::e8m0 || fb == Format::e8m0)
        throw UsageError(fmt::format("{}: e8m0 is a scale format, not a GEMM operand",
                                     fa == Format::e8m0 ? "--a-format" : "--b-format"));
    try {
        gemm::load_inputs(in, a, b, fa, fb, scale_a, scale_b, out());
    } catch (const gemm::GemmInputError& e) {
        throw UsageError(e.what());
    }
}

gemm::AccumModel require_model(const std::string& s) {
    try {
        return gemm::parse_model(s);
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--accum: {}", e.what()));
    }
}

}  // namespace fp8kit::cli
