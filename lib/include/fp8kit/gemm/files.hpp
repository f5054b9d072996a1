// The operands of a GEMM from .npy files, as the CLI (fp8kit gemm, validate --gemm) names them.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8kit/gemm/gemm.hpp"

namespace fp8kit::gemm {

// Bad file or argument: the message names it.
struct GemmInputError : std::invalid_argument {
    using std::invalid_argument::invalid_argument;
};

struct GemmInputs {
    std::vector<std::uint8_t> a, b;  // M x K and N x K codes
    std::vector<float> scale_a, scale_b;
    GemmRequest request;  // points into the vectors above: do not copy GemmInputs
    GemmInputs() = default;
    GemmInputs(const GemmInputs&) = delete;
    GemmInputs& operator=(const GemmInputs&) = delete;
};

// Which kind of scales an array of this shape holds for an operand of `rows` x `k`: one element
// (tensor), 1-D of rows (row), 2-D of rows x ceil(k/128) for A, ceil(rows/128) x ceil(k/128) for
// B (block). Throws GemmInputError naming `what` otherwise.
ScaleKind scale_kind_for_shape(const std::vector<std::size_t>& shape, bool is_b, std::size_t rows, std::size_t k,
                               const std::string& what);

// A and B: 2-D uint8 .npy files (|u1) with the same K. A scale: a number (tensorwise), or a
// float32 .npy file: one element (tensorwise), 1-D of M (N) values (rowwise), or 2-D
// M x ceil(K/128) for A and ceil(N/128) x ceil(K/128) for B (block scales).
void load_inputs(GemmInputs& in, const std::string& a_path, const std::string& b_path, Format a_format, Format b_format,
                 const std::string& scale_a, const std::string& scale_b, OutType out);

// An output as written by `fp8kit gemm`: M x N, <f4 for f32 or <u2 (bf16 bits) for bf16.
// save_output writes through io::OutputFile (io/sink.hpp) and throws io::OutputError.
std::vector<std::uint32_t> load_output(const std::string& path, std::size_t m, std::size_t n, OutType out);
void save_output(const std::string& path, const std::vector<std::uint32_t>& d, std::size_t m, std::size_t n,
                 OutType out);

}  // namespace fp8kit::gemm
