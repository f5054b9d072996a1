// validate() on device arrays: the bit-for-bit comparison on the GPU, the report on the host.
//
// validate_scan computes, for every element of a device input and the device codes a kernel
// produced, the value the reference rounds exactly as lib's validate() does
// (lib/include/fp8kit/validate.hpp: fl32(widen(x) * mult) with mult = S or fl32(1 / S) per scale
// block, numerics/validate_rules.hpp), its reference code by emu::convert (the routine lib uses),
// and compares it with the kernel's code. It returns every mismatching element (ascending index,
// input bits, code) and which of the 60 deterministic policies (numerics::validate_policy) equal
// the kernel's codes on every element. lib's validate_mismatches() then classifies those elements
// with lib's one classifier and writes the report: equal to validate()'s on the same host data.
// Including this needs no CUDA headers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/numerics/validate_rules.hpp"

namespace fp8kit::cuda {

struct ValidateScaling {
    numerics::ScaleMode mode = numerics::ScaleMode::none;
    numerics::BlockLayout layout = numerics::BlockLayout::tensor;
    float value = 1.0f;              // layout tensor
    const float* scales = nullptr;   // otherwise: block_scale_count(layout, rows, cols) float32 S
    std::size_t block_count = 0;     // how many scales `scales` holds
    bool scales_on_device = false;   // scales is a device pointer (read on `stream`)
    std::size_t rows = 0, cols = 0;  // the matrix view of the n elements (cols = last dimension)
};

struct ValidateScan {
    std::uint64_t n = 0;
    std::vector<std::uint64_t> indices;     // every mismatching element, ascending
    std::vector<std::uint64_t> input_bits;  // its input bits (16 or 32 of them)
    std::vector<std::uint8_t> codes;        // the kernel's code there
    std::uint64_t policies = 0;             // bit s: validate_policy(s) holds everywhere (detect_policies)
    std::vector<float> scales;              // the S per block on the host (for the report)
};

// Inputs f32, f16 or bf16 (f64: std::invalid_argument, as every kernel), formats with cast
// kernels (has_cast_kernels), deterministic roundings only (stochastic: std::invalid_argument, as
// validate()). Runs on `stream` after the work queued there and waits for it (synchronous).
// Bad scaling arguments (a block count that does not fit rows x cols = n) throw
// std::invalid_argument. Mismatches cost 17 bytes each of device and host memory.
ValidateScan validate_scan(Format to, Wide from, const void* d_input, const std::uint8_t* d_codes, std::size_t n,
                           const Policy& ref, const ValidateScaling& scaling, bool detect_policies,
                           Stream stream = nullptr);

}  // namespace fp8kit::cuda
