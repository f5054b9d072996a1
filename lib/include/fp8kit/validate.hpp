// Validate a kernel's FP8 output against the reference, bit for bit, and say why it differs.
//
// Given the kernel's input (raw bits of f64/f32/f16/bf16), the codes it produced, the target
// format, the policy it is meant to follow and how it scaled the input, validate() computes the
// reference code of every element with emu::convert (the one conversion routine), compares the
// codes bit for bit and classifies every mismatch (see MismatchClass and docs/validate.md). It
// also finds which policies and profiles the output equals exactly. Results, counts and examples
// are identical for any number of OpenMP threads; examples are the lowest indices.
//
// Scaling (exactly what the reference computes; S is a float32):
//   none       q = fp8(x)                       one rounding, straight from the input's bits
//   scale S    q = fp8(fl(x * S))               the kernel multiplies by the quantisation scale
//   scale_inv S q = fp8(fl(x * fl32(1 / S)))    the kernel is given the dequantisation scale and
//                                               multiplies by its float32 reciprocal
// fl(): an IEEE float32 multiply (round to nearest even) for f32/f16/bf16 inputs (f16 and bf16
// are widened exactly first); a float64 multiply for f64 inputs (S widened exactly).
// Block scales apply the same formulas with one S per block (see BlockLayout).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/numerics/validate_rules.hpp"

namespace fp8kit {

enum class MismatchClass : std::uint8_t {
    tie,              // the input lies exactly halfway; the kernel picked the other neighbour
    direction,        // not a tie; the kernel picked the other neighbour (truncation, directed mode)
    overflow,         // saturation vs Inf/NaN: the code of another overflow policy
    nan_encoding,     // both NaN, different NaN codes
    flush_to_zero,    // a subnormal result flushed to zero, or a subnormal input treated as zero
    double_rounding,  // equals rounding through float16 or bfloat16 first (float32 for f64 inputs)
    scale,            // equals the reference with the scale applied differently
    other,            // none of the above
};
inline constexpr int kMismatchClassCount = 8;
inline constexpr MismatchClass kAllMismatchClasses[] = {
    MismatchClass::tie,           MismatchClass::direction,       MismatchClass::overflow, MismatchClass::nan_encoding,
    MismatchClass::flush_to_zero, MismatchClass::double_rounding, MismatchClass::scale,    MismatchClass::other};
std::string_view name(MismatchClass c);  // "tie", "direction", ..., "nan-encoding", "flush-to-zero"

// How scales apply and how block scales tile the input (numerics/validate_rules.hpp, shared with
// the GPU scan): ScaleMode none / scale / scale_inv; BlockLayout, the input seen as a matrix
// rows x cols (cols = the last dimension, rows = the product of the others), scales stored
// row-major over the blocks:
//   tensor    one scale for everything (Scaling::value)
//   rowwise   one per row: rows scales
//   b1x128    1 x 128 blocks: rows * ceil(cols / 128) scales
//   b128x128  128 x 128 blocks: ceil(rows / 128) * ceil(cols / 128) scales
//   mx32      1 x 32 blocks (OCP MX): rows * ceil(cols / 32) scales
//   nv16      1 x 16 blocks (NVFP4): rows * ceil(cols / 16) scales
using numerics::block_scale_count;  // number of scales a layout needs for a rows x cols matrix
using numerics::BlockLayout;
using numerics::ScaleMode;
// Names (validate/names.cpp): "tensor", "rowwise", "1x128", "128x128", "mx32", "1x16". The parser
// throws std::invalid_argument listing the accepted names; without `with_tensor` only the block
// layouts (those of a scale file) are accepted and listed.
std::string_view name(BlockLayout b);
BlockLayout parse_block_layout(std::string_view s, bool with_tensor = true);
std::string block_layout_names(bool with_tensor = true);  // "tensor, rowwise, 1x128, 128x128, mx32, 1x16"

struct Scaling {
    ScaleMode mode = ScaleMode::none;
    BlockLayout layout = BlockLayout::tensor;
    float value = 1.0f;             // layout == tensor
    const float* blocks = nullptr;  // otherwise: block_scale_count(...) values (E8M0 scales: decode
                                    // them to float32 first, which is exact)
    std::size_t block_count = 0;
    std::size_t rows = 0, cols = 0;  // the matrix view (needed for block layouts)
};

struct ValidateRequest {
    Wide from;                  // type of the input elements
    const void* input;          // n elements, raw little-endian bits
    const std::uint8_t* codes;  // n codes the kernel produced
    std::size_t n;
    Format to;
    Policy policy;  // the reference policy (stochastic rounding is not accepted)
    Scaling scaling;
};

struct ValidateOptions {
    std::size_t examples = 5;     // per class
    bool detect_policies = true;  // find the policies the output equals exactly
    // Called on the calling thread as blocks of 2^16 elements are compared here, with (blocks
    // done, this part's blocks), for a progress line; empty: none. Changes nothing in the report.
    std::function<void(std::uint64_t, std::uint64_t)> progress;
};

struct MismatchExample {
    std::uint64_t index;
    std::uint64_t input_bits;  // as stored (f64: 64 bits, f32: 32, f16/bf16: 16)
    double input;              // its value
    double scaled;             // the value the reference rounds (= input when unscaled)
    double scale;              // the S applied to this element (1 when unscaled)
    std::uint8_t expected, actual;
    double expected_value, actual_value;  // decoded (NaN for NaN codes)
};

struct ClassReport {
    std::uint64_t count = 0;
    std::vector<MismatchExample> examples;  // lowest indices first
};

struct ValidateReport {
    Format to;
    Wide from;
    Policy policy;
    ScaleMode scale_mode;
    BlockLayout layout;
    std::uint64_t total = 0, matches = 0, mismatches = 0;
    std::array<ClassReport, kMismatchClassCount> classes;
    bool policies_detected = false;
    std::vector<Policy> consistent_policies;       // every policy (5 roundings x 3 overflow x 4 NaN)
                                                   // whose codes equal the kernel's on all elements
    std::vector<std::string> consistent_profiles;  // e.g. "cuda-satfinite", "cuda-nosat (e8m0 toward-zero)"

    // The array's shape, row-major (set by the caller; empty or 1-D: positions are flat indices).
    // With 2 or more dimensions, examples give the multi-dimensional position too.
    std::vector<std::uint64_t> shape;

    bool exact() const { return mismatches == 0; }
    // "[3, 17]" for a flat index under `shape` (row-major); "[index]" when 1-D or unset.
    std::string position(std::uint64_t index) const;
    std::vector<std::uint64_t> indices(std::uint64_t index) const;  // the same as numbers
    const ClassReport& operator[](MismatchClass c) const { return classes[static_cast<int>(c)]; }
    // Human-readable, several lines: counts, classes with examples, consistent policies.
    std::string summary() const;
    // The same as JSON text.
    std::string json() const;
};

// Throws std::invalid_argument on an impossible request (null data with n > 0, stochastic
// rounding, a scale count that does not match the layout).
ValidateReport validate(const ValidateRequest& request, const ValidateOptions& options = {});

// The comparison split over the parts of a job (cluster/validate.hpp, docs/mpi.md). Part p of P
// compares the contiguous range [B p / P, B (p + 1) / P) of the array's B blocks of 2^16 elements
// (every part holds the whole request); `gather` carries each part's scan to part 0: integer
// counts per mismatch mask, each mask's lowest-index examples, and which candidate policies
// still hold. These merge exactly (sums of integers, lowest indices, logical AND), so part 0's
// report is the one validate() writes, whatever P.
struct ValidateSplit {
    int part = 0, parts = 1;
    // Collective: every part passes its bytes; part 0 gets all parts' bytes in part order, the
    // others an empty vector (cluster::Comm::gather).
    std::function<std::vector<std::string>(std::string)> gather;
};
// The report on part 0; nullopt on the other parts. Throws as validate() does (on every part).
std::optional<ValidateReport> validate(const ValidateRequest& request, const ValidateOptions& options,
                                       const ValidateSplit& split);

// The comparison done elsewhere (on a GPU: cuda/include/fp8kit/cuda/validate.hpp), the report
// here. The 60 deterministic policies the search tries, in the report's order: validate_policy(s)
// for s < kValidatePolicyCount (numerics/validate_rules.hpp).
using numerics::kValidatePolicyCount;
using numerics::validate_policy;

// What a scan of n elements found: every element whose code differs from the reference code
// (ascending index, with its input bits as stored and the kernel's code), and the policies whose
// codes equal the kernel's on every element (bit s: validate_policy(s); read only with
// ValidateOptions::detect_policies).
struct MismatchScan {
    std::uint64_t n = 0;
    std::vector<std::uint64_t> indices;
    std::vector<std::uint64_t> input_bits;
    std::vector<std::uint8_t> codes;
    std::uint64_t policies = 0;
};

// validate()'s report from a scan: the same classification of each mismatch (lib's one
// classifier), the same class choice, examples and consistent policies and profiles, so for the
// scan of (request's input, codes) the report equals validate(request, options). request.input
// and request.codes are not read (may be null); request.n must equal scan.n; the scaling's block
// scales are read on the host. Throws std::invalid_argument as validate() does, and on a scan
// whose arrays disagree in length or whose indices are not ascending and below n.
ValidateReport validate_mismatches(const ValidateRequest& request, const MismatchScan& scan,
                                   const ValidateOptions& options = {});

// ---- Block scales and codes as kernels store them (docs/validate.md, "NVFP4 and MX outputs") ----

// The type of stored block scales: float32 values, E8M0 bytes (MX: 2^(b - 127), 0xFF NaN) or
// E4M3 bytes (NVFP4: with a float32 second-level scale, StoredScales::global).
enum class ScaleType : std::uint8_t { f32, e8m0, e4m3 };
std::string_view name(ScaleType t);              // "f32", "e8m0", "e4m3"
ScaleType parse_scale_type(std::string_view s);  // throws std::invalid_argument listing the names

// Where each block's scale lies: row-major (rows x blocks across, as validate() reads it),
// row-major padded to 128-row x 4-column multiples (TransformerEngine's MXFP8 / NVFP4 scale_inv
// tensors), or swizzled in cuBLASLt's 128 x 4 tiles (numerics::swizzled_scale_offset: what
// cuBLASLt's block-scaled GEMMs read, TE's swizzle and torchao's to_blocked write). Padding is
// not read.
enum class ScaleOrder : std::uint8_t { row_major, padded, swizzled };
std::string_view name(ScaleOrder o);               // "row-major", "padded", "swizzled"
ScaleOrder parse_scale_order(std::string_view s);  // throws std::invalid_argument listing the names

struct StoredScales {
    const void* data = nullptr;  // `count` entries of `type` (bytes, or float32 for f32)
    std::size_t count = 0;
    ScaleType type = ScaleType::f32;
    ScaleOrder order = ScaleOrder::row_major;
    // E4M3 scales: the tensor's float32 second-level scale G, a dequantisation scale (TE's
    // S_dec = fl32(1 / S_enc), torchao's per_tensor_scale; 1 for none). Each block's value is
    //   ScaleMode::scale_inv: S = fl32(e4m3(b) * G), the elements multiplied by fl32(1 / S)
    //                         (TransformerEngine's order);
    //   ScaleMode::scale:     S = fl32(fl32(1 / G) / e4m3(b)), the elements multiplied by S
    //                         (torchao's nvfp4_quantize; with G = 1 this is fl32(1 / e4m3(b)),
    //                         equal to the scale_inv reading).
    float global = 1.0f;
};

// Entries a scale file must hold for `layout` over a rows x cols input in `order`
// (row-major: block_scale_count; padded and swizzled: MX and 1x16 layouts only, the grid padded
// to 128 x 4 multiples). std::invalid_argument for padded/swizzled with another layout.
std::size_t stored_scale_count(BlockLayout layout, std::size_t rows, std::size_t cols, ScaleOrder order);

// The float32 block scales validate() reads (Scaling::blocks, row-major) from stored ones.
// `mode` says how E4M3 scales combine with the global scale (above); E8M0 and f32 values are
// read as they are (E8M0 decodes exactly). std::invalid_argument naming what is wrong when the
// count does not match stored_scale_count.
std::vector<float> block_scale_values(const StoredScales& s, BlockLayout layout, std::size_t rows, std::size_t cols,
                                      ScaleMode mode);

// Packed E2M1 codes (two per byte along each row, element 2i in the low nibble: torch
// float4_e2m1fn_x2, torchao pack_uint4, cuda_fp4.h __nv_fp4x2_e2m1, TE's NVFP4 data) to one code
// per byte, rows x cols. std::invalid_argument when cols is odd or the byte count is not
// rows * cols / 2.
std::vector<std::uint8_t> unpack_fp4_codes(const std::uint8_t* packed, std::size_t bytes, std::size_t rows,
                                           std::size_t cols);

// One line naming the consistent profiles / policies ("equals profile cuda-satfinite", "equals
// nearest-away, saturate-all, NaN any"), or that none of them matches.
std::string describe_consistency(const ValidateReport& r);

}  // namespace fp8kit

namespace fp8kit {

// TransformerEngine's own quantisation, checked on real data: a DumpTensors file holding both
// `high_precision` and a quantised `quantized` entry (io/te_debug.hpp) with row-wise data. TE's
// codes are compared with the reference for the high_precision tensor under TE's own scale_inv
// (ScaleMode::scale_inv) and `policy`:
//   Float8Tensor            one per-tensor scale_inv (float32)
//   MXFP8Tensor             E8M0 scale_inv per 1 x 32 block (BlockLayout::mx32), read from TE's
//                           padded, optionally GEMM-swizzled layout (dump::detail::te_rowwise_scales)
//   Float8BlockwiseQTensor  float32 scale_inv per 1 x 128 block (stored transposed: blocks x
//                           round_up(rows, 4)) or per 128 x 128 block (is_2D_scaled)
//   NVFP4Tensor             E2M1 codes (two per byte, low nibble first) under TE's stored E4M3
//                           byte per 1 x 16 block and float32 amax, TE's rule
//                           (numerics::nvfp4_te_block): each element is fl32(x * encode) with
//                           encode from TE's byte and S_enc = fl32(2688 / amax), rounded to E2M1
//                           (RNE, satfinite). The report's inputs are those scaled values (its
//                           scale mode: none). TE's scale bytes are compared with the reference's
//                           for the same amax (scale_mismatches), and TE's amax with max |x|.
//                           Not compared: 2.17+ tensors with row_scaled_nvfp4 or nvfp4_use_4over6,
//                           and quantizers with RHT or stochastic rounding (nullopt).
struct TeQuantizedCheck {
    std::string file;
    std::string name;  // "{layer}_{tensor}" from the path, else the file name
    std::string kind;  // "Float8Tensor", "MXFP8Tensor", "Float8BlockwiseQTensor"
    Format format;     // from the tensor's fp8_dtype
    float scale_inv;   // Float8Tensor's; the first block's for block types
    BlockLayout layout = BlockLayout::tensor;
    bool swizzled = false;  // MXFP8, NVFP4: scales were stored GEMM-swizzled
    ValidateReport report;
    // The block scales compared with the reference's for the same input (NVFP4: E4M3 bytes under
    // TE's global encode; MXFP8: E8M0 codes, TE's round-up rule; blockwise: float32 scale_inv from
    // the quantizer's force_pow_2_scales and amax_epsilon, 0 blocks when it has none), those that
    // differ, and (NVFP4) whether TE's amax equals max |high_precision| (as float32).
    std::uint64_t scale_blocks = 0, scale_mismatches = 0;
    bool amax_matches = true;
};
// nullopt when the file lacks either entry or its quantized entry has no row-wise data (or is an
// NVFP4 variant named above as not compared). Throws dump::DumpError naming the file when it cannot be read, or when the two entries
// disagree (shape, scale_inv shapes and types).
std::optional<TeQuantizedCheck> check_te_quantized(const std::string& path, const std::optional<Policy>& policy = {},
                                                   const ValidateOptions& options = {});
// The column-wise copy checked the same way, as a row-wise quantisation of the transposed matrix
// (leading dimensions flattened; report shape K x M, name "{layer}_{tensor}/columnwise"):
// Float8Tensor's data_transpose under its scale_inv, Float8BlockwiseQTensor's and MXFP8Tensor's
// columnwise_data under columnwise_scale_inv (MXFP8: 32 x 1 blocks along dim 0), NVFP4Tensor's
// columnwise_data under columnwise_scale_inv and amax_columnwise, of x^T after TE's random
// Hadamard transform when the quantizer has with_rht. nullopt when the file lacks either entry or
// the column-wise copy, for the NVFP4 variants named above, and for NVFP4 column-wise scales
// stored GEMM-swizzled. Throws as check_te_quantized.
std::optional<TeQuantizedCheck> check_te_quantized_columnwise(const std::string& path,
                                                              const std::optional<Policy>& policy = {},
                                                              const ValidateOptions& options = {});

}  // namespace fp8kit
