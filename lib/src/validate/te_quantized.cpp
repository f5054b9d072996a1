// TransformerEngine's Float8Tensor codes against the reference (see check_te_quantized in
// validate.hpp). TE's cast multiplies by the quantisation scale and stores scale_inv = 1/scale
// (transformer_engine/pytorch/tensor/float8_tensor.py keeps only _scale_inv in the pickle), so the
// reference is ScaleMode::scale_inv: q = fp8(fl(x * fl32(1 / scale_inv))); a scale that is not
// a power of two can differ from TE's by one ulp there, which validate classifies as `scale`.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "fp8kit/convert/hadamard.hpp"
#include "fp8kit/emu/pack.hpp"
#include "fp8kit/emu/profiles.hpp"
#include "fp8kit/numerics/hadamard.hpp"
#include "fp8kit/numerics/scale_rules.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/validate.hpp"
#include "io/torch_dump.hpp"

namespace fp8kit {

namespace {

std::vector<float> f32_of(const std::vector<std::uint8_t>& b) {
    std::vector<float> v(b.size() / 4);
    if (!v.empty()) std::memcpy(v.data(), b.data(), v.size() * 4);  // (never memcpy from a null data())
    return v;
}

std::string file_name(const std::string& path) {
    const auto te = te::parse_dump_path(path);
    return te ? te->layer + "_" + te->tensor : path.substr(path.rfind('/') + 1);
}

// The quantizer's field `key` as written by dump_torch (True/False, numbers), or nullopt.
std::optional<std::string> state_of(const dump::detail::TeQuantized& q, const char* key) {
    for (const auto& [k, v] : q.quantizer_state)
        if (k == key) return v;
    return std::nullopt;
}

// float32, float16 and bfloat16 input bits as float32 (exact); nullopt for float64, which TE does
// not quantise.
std::optional<std::vector<float>> input_f32(const std::uint8_t* raw, Wide from, std::size_t n) {
    std::vector<float> xf(n);
    for (std::size_t k = 0; k < n; ++k) {
        if (from == Wide::f32) {
            std::memcpy(&xf[k], raw + 4 * k, 4);
        } else if (from == Wide::bf16) {  // the high half of a float32
            std::uint16_t h;
            std::memcpy(&h, raw + 2 * k, 2);
            const std::uint32_t b = std::uint32_t(h) << 16;
            std::memcpy(&xf[k], &b, 4);
        } else if (from == Wide::f16) {  // (1024 + m) 2^(e - 25), subnormals m 2^-24
            std::uint16_t h;
            std::memcpy(&h, raw + 2 * k, 2);
            const int e = h >> 10 & 0x1f;
            const float v = std::ldexp(static_cast<float>((h & 0x3ff) | (e ? 0x400 : 0)), (e ? e : 1) - 25);
            xf[k] = e == 0x1f ? ((h & 0x3ff) ? NAN : INFINITY) : v;
            if (h & 0x8000) xf[k] = -xf[k];
        } else {
            return std::nullopt;
        }
    }
    return xf;
}

// max |x| over a rectangle of a rows x cols float32 matrix, as TE's kernels reduce it (fmaxf: a
// NaN is dropped).
float block_amax(const std::vector<float>& x, std::uint64_t cols, std::uint64_t r0, std::uint64_t r1, std::uint64_t c0,
                 std::uint64_t c1) {
    float m = 0.0f;
    for (std::uint64_t r = r0; r < r1; ++r)
        for (std::uint64_t c = c0; c < c1; ++c) m = std::fmax(m, std::fabs(x[r * cols + c]));
    return m;
}

bool state_is(const dump::detail::TeQuantized& q, const char* key, const char* value) {
    for (const auto& [k, v] : q.quantizer_state)
        if (k == key) return v == value;
    return false;
}

// A rows x cols row-major matrix of `size`-byte elements, transposed.
std::vector<std::uint8_t> transposed(const std::vector<std::uint8_t>& m, std::uint64_t rows, std::uint64_t cols,
                                     std::size_t size) {
    std::vector<std::uint8_t> t(m.size());
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t c = 0; c < cols; ++c)
            std::memcpy(&t[(c * rows + r) * size], &m[(r * cols + c) * size], size);
    return t;
}

// NVFP4 (row-wise, or with `columnwise` the column-wise copy). The column-wise copy is the
// row-wise quantisation of x^T (K x M, the leading dimensions flattened into M), after TE's random
// Hadamard transform when the quantizer has with_rht (te_rht16_columnwise, with TE's wgrad signs
// or none, from rht_matrix_random_sign_mask_t): columnwise_data (K, M / 2) packed,
// columnwise_scale_inv (round_up(K, 128), round_up(M / 16, 4)) and amax_columnwise
// (transformer_engine/pytorch/tensor/nvfp4_tensor.py, make_empty, get_columnwise_shape and
// get_scale_shape; custom_recipes/quantization_nvfp4.py NVFP4QuantizerRef._quantize: col_input =
// _apply_rht(tensor.t()), global_amax_col = max |col_input|). Column-wise scales stored
// GEMM-swizzled are not compared.
std::optional<TeQuantizedCheck> check_nvfp4(const dump::detail::TorchFile& f, const std::string& path,
                                            const dump::detail::TorchTensor& x, const dump::detail::TeQuantized& q,
                                            bool columnwise, const std::optional<Policy>& policy,
                                            const ValidateOptions& options) {
    using namespace dump::detail;
    const bool rht = state_is(q, "with_rht", "True");
    if (q.row_scaled || q.use_4over6 || (rht && !columnwise) || state_is(q, "stochastic_rounding", "True") ||
        state_is(q, "with_2d_quantization", "True"))
        return std::nullopt;
    const std::optional<TorchTensor>& data = columnwise ? q.columnwise_data : q.data;
    const std::optional<TorchTensor>& scale_inv = columnwise ? q.columnwise_scale_inv : q.scale_inv;
    const std::optional<TorchTensor>& amax_t = columnwise ? q.columnwise_amax : q.amax;
    if (!data || (columnwise && q.swizzled)) return std::nullopt;
    const auto signs = state_of(q, "rht_matrix_random_sign_mask_t");
    const bool random_signs = signs && *signs != "0";
    if (rht && random_signs && *signs != std::to_string(numerics::kTeRhtNegativeSigns)) return std::nullopt;
    const std::string label = file_name(path);
    const std::string name = columnwise ? label + "/columnwise" : label;
    const std::string data_name = label + (columnwise ? "/quantized/columnwise" : "/quantized");
    const auto xd = torch_dump_dtype(x.dtype);
    if (!xd || dump::fp8_format(*xd) || *xd == dump::DType::f64)
        throw dump::DumpError(path, label + "/high_precision",
                              fmt::format("torch.{}: not a float32/16 or bfloat16 tensor", x.dtype));
    if (q.fp8_dtype != 10)
        throw dump::DumpError(path, data_name, fmt::format("fp4_dtype {} is not E2M1 (10)", q.fp8_dtype));
    std::uint64_t m_rows = 1, k_cols = x.shape.empty() ? 1 : x.shape.back();
    for (std::size_t d = 0; d + 1 < x.shape.size(); ++d) m_rows *= x.shape[d];
    std::vector<std::uint64_t> want = q.shape;
    if (columnwise) want = {k_cols, m_rows};
    if (!want.empty()) want.back() = (want.back() + 1) / 2;
    const std::uint64_t rows = columnwise ? k_cols : m_rows, cols = columnwise ? m_rows : k_cols;
    if (x.shape != q.shape || cols % 16 || data->dtype != "uint8" || data->shape != want)
        throw dump::DumpError(path, data_name,
                              fmt::format("high_precision is {} but the NVFP4Tensor is {} with {} data {} "
                                          "(the {} must be a multiple of 16)",
                                          fmt::join(x.shape, "x"), fmt::join(q.shape, "x"), data->dtype,
                                          fmt::join(data->shape, "x"), columnwise ? "row count" : "last dimension"));
    if (!scale_inv || scale_inv->dtype != "uint8" || !amax_t || amax_t->dtype != "float32" || amax_t->numel() != 1)
        throw dump::DumpError(path, data_name,
                              fmt::format("NVFP4Tensor without uint8 {0} scale_inv and one float32 amax_{0}",
                                          columnwise ? "columnwise" : "rowwise"));
    const dump::ReadOptions opts;
    f.check(x, label + "/high_precision", opts);
    f.check(*data, data_name, opts);
    f.check(*scale_inv, data_name + " scale_inv", opts);
    f.check(*amax_t, data_name + " amax", opts);
    auto raw = f.read_all(x);
    const auto packed = f.read_all(*data);
    const auto amax_bytes = f.read_all(*amax_t);
    float amax;
    std::memcpy(&amax, amax_bytes.data(), 4);
    const std::uint64_t nb = cols / 16;
    std::vector<std::uint8_t> bytes;
    try {
        bytes = te::te_rowwise_scales(f.read_all(*scale_inv), scale_inv->shape, rows, nb, q.swizzled);
    } catch (const std::invalid_argument& e) {
        throw dump::DumpError(path, data_name + " scale_inv", e.what());
    }
    if (columnwise) {  // x^T, Hadamard-transformed when TE's quantizer does so
        if (rht) {
            try {
                const auto t = te_rht16_columnwise(raw.data(), dump::delivered_as(*xd), m_rows, k_cols, random_signs);
                raw.assign(t.begin(), t.end());
            } catch (const std::invalid_argument& e) {
                throw dump::DumpError(path, label + "/high_precision", e.what());
            }
        } else {
            raw = transposed(raw, m_rows, k_cols, torch_element_size(x.dtype));
        }
    }
    // The input as float32 (exact for f32/f16/bf16).
    const std::size_t n = rows * cols;
    const std::vector<float> xf = *input_f32(raw.data(), dump::delivered_as(*xd), n);
    float ref_amax = 0;
    for (float v : xf) ref_amax = std::max(ref_amax, std::fabs(v));
    const float s_enc = numerics::nvfp4_te_global_encode(amax);
    const float s_dec = numerics::div_rn(1.0f, s_enc);
    std::vector<float> scaled(n);
    std::uint64_t scale_miss = 0;
    for (std::uint64_t r = 0; r < rows; ++r)
        for (std::uint64_t b = 0; b < nb; ++b) {
            const float* blk = xf.data() + r * cols + b * 16;
            float bmax = 0;
            for (int k = 0; k < 16; ++k) bmax = std::max(bmax, std::fabs(blk[k]));
            const std::uint8_t te_byte = bytes[r * nb + b];
            scale_miss += numerics::nvfp4_te_block(bmax, s_enc, amax).scale_code != te_byte;
            float enc = numerics::div_rn(1.0f, numerics::mul_rn(numerics::e4m3_value(te_byte), s_dec));
            enc =
                std::isnan(enc) ? std::numeric_limits<float>::max() : std::min(enc, std::numeric_limits<float>::max());
            for (int k = 0; k < 16; ++k) scaled[r * cols + b * 16 + k] = numerics::mul_rn(blk[k], enc);
        }
    std::vector<std::uint8_t> codes(n);
    emu::unpack_fp4_array(packed.data(), codes.data(), n, emu::NibbleOrder::low_first);
    ValidateRequest req;
    req.from = Wide::f32;
    req.input = scaled.data();
    req.codes = codes.data();
    req.n = n;
    req.to = Format::e2m1;
    req.policy = policy ? *policy : emu::profile_policy(Profile::cuda_satfinite, req.to, req.from).policy;
    req.scaling.mode = ScaleMode::none;
    TeQuantizedCheck out{path, name, q.kind, req.to, amax, BlockLayout::tensor, q.swizzled, validate(req, options)};
    out.report.shape = columnwise ? std::vector<std::uint64_t>{rows, cols} : x.shape;
    out.scale_blocks = rows * nb;
    out.scale_mismatches = scale_miss;
    out.amax_matches = ref_amax == amax;
    return out;
}

// The FP8 types' codes (row-wise, or with `columnwise` the column-wise copy) against the reference
// of the high-precision tensor under TE's own scale_inv. The column-wise copies are checked as a
// row-wise quantisation of the transposed matrix (cols x rows, the leading dimensions flattened),
// which is what TE computes:
// - Float8Tensor `data_transpose` has the transposed shape (last dimension first) and the same
//   scale_inv (transformer_engine/pytorch/csrc/quantizer.cpp, make_transpose_shape).
// - Float8BlockwiseQTensor `columnwise_data` has the transposed shape and its scale_inv is laid
//   out for the transposed matrix exactly as the row-wise one is for the matrix
//   (transformer_engine/pytorch/tensor/float8_blockwise_tensor.py, get_columnwise_shape and
//   get_scale_shape(columnwise=True): 1x128 (ceil(M/128), round_up(K, 4)), 128x128 (ceil(K/128),
//   round_up(ceil(M/128), 4)) for an M x K tensor).
// - MXFP8Tensor `columnwise_data` keeps the tensor's shape, with one E8M0 scale per 32 x 1 block
//   along dim 0, stored (round_up(M/32, 4), round_up(K, 128)), element [row block, column]
//   (transformer_engine/pytorch/tensor/mxfp8_tensor.py, make_empty and get_scale_shape); its
//   codes and scales are transposed here (GEMM-swizzled scales: see below).
std::optional<TeQuantizedCheck> check_fp8(const dump::detail::TorchFile& f, const std::string& path,
                                          const std::string& file_label, const dump::detail::TorchTensor& x,
                                          const dump::detail::TeQuantized& fq, bool columnwise,
                                          const std::optional<Policy>& policy, const ValidateOptions& options) {
    using namespace dump::detail;
    const std::string name = columnwise ? file_label + "/columnwise" : file_label;
    const std::string data_name = file_label + (columnwise ? "/quantized/columnwise" : "/quantized");
    const bool mx = fq.kind == "MXFP8Tensor";
    if (fq.kind != "Float8Tensor" && !mx && fq.kind != "Float8BlockwiseQTensor") return std::nullopt;
    const std::optional<TorchTensor>& data = !columnwise                 ? fq.data
                                             : fq.kind == "Float8Tensor" ? fq.transpose
                                                                         : fq.columnwise_data;
    const std::optional<TorchTensor>& scale_inv =
        columnwise && fq.kind != "Float8Tensor" ? fq.columnwise_scale_inv : fq.scale_inv;
    if (!data) return std::nullopt;
    // The matrix view of the tensor: M = product of the leading dimensions, K = the last.
    std::uint64_t m_rows = 1, k_cols = x.shape.empty() ? 1 : x.shape.back();
    for (std::size_t d = 0; d + 1 < x.shape.size(); ++d) m_rows *= x.shape[d];
    auto want_shape = fq.shape;
    if (columnwise && !mx && !want_shape.empty())
        std::rotate(want_shape.rbegin(), want_shape.rbegin() + 1, want_shape.rend());
    const auto fp8 = te_fp8_dtype(fq.fp8_dtype);
    if (!fp8)
        throw dump::DumpError(path, data_name, fmt::format("fp8_dtype {} is not E4M3 (7) or E5M2 (8)", fq.fp8_dtype));
    const auto xd = torch_dump_dtype(x.dtype);
    if (!xd || dump::fp8_format(*xd))
        throw dump::DumpError(path, file_label + "/high_precision",
                              fmt::format("torch.{}: not a float64/32/16 or bfloat16 tensor", x.dtype));
    const char* const which = columnwise ? "column-wise" : "row-wise";
    if (x.shape != fq.shape || data->shape != want_shape || data->dtype != "uint8")
        throw dump::DumpError(
            path, data_name,
            fmt::format("high_precision is {} but the {} is {} with {} {} data {}", fmt::join(x.shape, "x"), fq.kind,
                        fmt::join(fq.shape, "x"), which, data->dtype, fmt::join(data->shape, "x")));
    if (!scale_inv) throw dump::DumpError(path, data_name, fmt::format("{} without its {} scale_inv", fq.kind, which));
    if (columnwise && mx && m_rows % 32)
        throw dump::DumpError(path, data_name,
                              fmt::format("MXFP8Tensor column-wise data of {} rows, not a multiple of 32", m_rows));
    const TorchTensor& si = *scale_inv;
    const dump::ReadOptions opts;
    f.check(x, file_label + "/high_precision", opts);
    f.check(*data, data_name, opts);
    f.check(si, data_name + " scale_inv", opts);
    auto input = f.read_all(x);
    auto codes = f.read_all(*data);
    const auto s = f.read_all(si);
    std::uint64_t rows = m_rows, cols = k_cols;
    std::vector<std::uint64_t> report_shape = x.shape;
    if (columnwise) {  // the transposed matrix, K x M
        input = transposed(input, m_rows, k_cols, torch_element_size(x.dtype));
        if (mx) codes = transposed(codes, m_rows, k_cols, 1);
        std::swap(rows, cols);
        report_shape = {rows, cols};
    }

    ValidateRequest req;
    req.from = dump::delivered_as(*xd);
    req.input = input.data();
    req.codes = codes.data();
    req.n = codes.size();
    req.to = *dump::fp8_format(*fp8);
    // TE's casts are cuda_fp8.h's (round to nearest even, __NV_SATFINITE).
    req.policy = policy ? *policy : emu::profile_policy(Profile::cuda_satfinite, req.to, req.from).policy;
    req.scaling.mode = ScaleMode::scale_inv;
    req.scaling.rows = rows;
    req.scaling.cols = cols;
    std::vector<float> blocks;
    auto bad_scales = [&](const std::string& why) { return dump::DumpError(path, data_name + " scale_inv", why); };
    if (fq.kind == "Float8Tensor") {
        if (si.dtype != "float32" || si.numel() != 1)
            throw bad_scales(fmt::format("torch.{} with {} elements, not one float32", si.dtype, si.numel()));
        req.scaling.layout = BlockLayout::tensor;
        std::memcpy(&req.scaling.value, s.data(), 4);
    } else if (fq.kind == "MXFP8Tensor") {
        if (si.dtype != "uint8") throw bad_scales(fmt::format("torch.{}, not uint8 E8M0 scales", si.dtype));
        const std::uint64_t nb = (cols + 31) / 32;
        std::vector<std::uint8_t> e8;
        if (columnwise) {  // stored [block of M, K] padded to (round_up(M/32, 4), round_up(K, 128))
            const std::uint64_t pr = (nb + 3) / 4 * 4, pc = (rows + 127) / 128 * 128;
            if (si.shape != std::vector<std::uint64_t>{pr, pc})
                throw bad_scales(fmt::format("{}, expected {}x{} for 32x1 blocks", fmt::join(si.shape, "x"), pr, pc));
            if (fq.swizzled) {
                // cuBLAS's tiles over the transposed scales: TE's tests/pytorch/mxfp8/mxfp8_utils.py
                // _columnwise_swizzle_mxfp8_scale equals _rowwise_swizzle_mxfp8_scale of
                // scale.transpose(0, 1) with M and K swapped, viewed back as (M/32, K).
                try {
                    e8 = te::te_rowwise_scales(s, {pc, pr}, rows, nb, true);
                } catch (const std::invalid_argument& e) {
                    throw bad_scales(e.what());
                }
            } else {
                for (std::uint64_t r = 0; r < rows; ++r)
                    for (std::uint64_t b = 0; b < nb; ++b) e8.push_back(s[b * pc + r]);
            }
        } else {
            try {
                e8 = te::te_rowwise_scales(s, si.shape, rows, nb, fq.swizzled);
            } catch (const std::invalid_argument& e) {
                throw bad_scales(e.what());
            }
        }
        blocks.resize(e8.size());
        for (std::size_t k = 0; k < e8.size(); ++k)  // E8M0: 2^(e - 127), 0xff NaN; exact in float32
            blocks[k] = e8[k] == 0xff ? std::numeric_limits<float>::quiet_NaN() : std::ldexp(1.0f, int(e8[k]) - 127);
        req.scaling.layout = BlockLayout::mx32;
    } else if (fq.kind == "Float8BlockwiseQTensor") {
        if (si.dtype != "float32") throw bad_scales(fmt::format("torch.{}, not float32", si.dtype));
        const std::vector<float> v = f32_of(s);
        const std::uint64_t kb = (cols + 127) / 128, rb = (rows + 127) / 128;
        if (fq.is_2d) {
            // (ceil(rows/128), round_up(ceil(cols/128), 4)), element [row block, column block]
            const std::uint64_t pc = (kb + 3) / 4 * 4;
            if (si.shape != std::vector<std::uint64_t>{rb, pc})
                throw bad_scales(
                    fmt::format("{}, expected {}x{} for 128x128 blocks", fmt::join(si.shape, "x"), rb, pc));
            for (std::uint64_t r = 0; r < rb; ++r)
                for (std::uint64_t c = 0; c < kb; ++c) blocks.push_back(v[r * pc + c]);
            req.scaling.layout = BlockLayout::b128x128;
        } else {
            // (ceil(cols/128), round_up(rows, 4)), element [column block, row]: transposed
            const std::uint64_t pr = (rows + 3) / 4 * 4;
            if (si.shape != std::vector<std::uint64_t>{kb, pr})
                throw bad_scales(fmt::format("{}, expected {}x{} for 1x128 blocks", fmt::join(si.shape, "x"), kb, pr));
            for (std::uint64_t r = 0; r < rows; ++r)
                for (std::uint64_t c = 0; c < kb; ++c) blocks.push_back(v[c * pr + r]);
            req.scaling.layout = BlockLayout::b1x128;
        }
    } else {
        return std::nullopt;
    }
    if (!blocks.empty()) {
        req.scaling.blocks = blocks.data();
        req.scaling.block_count = blocks.size();
        req.scaling.value = blocks.front();
    }
    // The block scales against TE's rule for the same input (the reference's scale, bit for bit):
    // MXFP8 E8M0 codes by numerics::mx_code_roundup (ptx.cuh float_to_e8m0); blockwise scale_inv
    // = 1 / compute_scale_from_types(block amax, epsilon, force_pow_2_scales) of the quantizer's
    // fields (recipe_common.cuh; value_for_inf the input type's largest finite value; the 1x128
    // kernel divides in double, quantize_transpose_vector_blockwise.cu `1.0 / scale`, the 128x128
    // kernel in float, quantize_transpose_square_blockwise.cu `1.0f / block_tile_scale`).
    std::uint64_t scale_blocks = 0, scale_miss = 0;
    const auto xf = input_f32(input.data(), req.from, rows * cols);
    const float fmax = numerics::format_max(req.to);
    if (xf && fq.kind == "MXFP8Tensor") {
        const std::uint64_t nb = (cols + 31) / 32;
        for (std::uint64_t r = 0; r < rows; ++r)
            for (std::uint64_t b = 0; b < nb; ++b) {
                const std::uint8_t ref = numerics::mx_code_roundup(
                    block_amax(*xf, cols, r, r + 1, b * 32, std::min(cols, b * 32 + 32)), fmax);
                const float te = blocks[r * nb + b];
                const float want = numerics::e8m0_scale_pair(ref).scale_inv;
                scale_miss += std::memcmp(&te, &want, 4) != 0;
                ++scale_blocks;
            }
    }
    const auto pow2 = state_of(fq, "force_pow_2_scales");
    const auto eps = state_of(fq, "amax_epsilon");
    if (xf && fq.kind == "Float8BlockwiseQTensor" && pow2 && eps) {
        const float vfi = req.from == Wide::f16    ? 65504.0f
                          : req.from == Wide::bf16 ? numerics::float_of(0x7F7F0000u)
                                                   : std::numeric_limits<float>::max();
        const float e = static_cast<float>(std::stod(*eps));
        const std::uint64_t kb = (cols + 127) / 128, rb = fq.is_2d ? (rows + 127) / 128 : rows, rh = fq.is_2d ? 128 : 1;
        for (std::uint64_t r = 0; r < rb; ++r)
            for (std::uint64_t c = 0; c < kb; ++c) {
                const float a =
                    block_amax(*xf, cols, r * rh, std::min(rows, r * rh + rh), c * 128, std::min(cols, c * 128 + 128));
                const float scale = numerics::te_scale(a, fmax, e, *pow2 == "True", vfi);
                const float want =
                    fq.is_2d ? numerics::div_rn(1.0f, scale) : static_cast<float>(1.0 / static_cast<double>(scale));
                scale_miss += std::memcmp(&blocks[r * kb + c], &want, 4) != 0;
                ++scale_blocks;
            }
    }
    TeQuantizedCheck out{
        path, name, fq.kind, req.to, req.scaling.value, req.scaling.layout, fq.swizzled, validate(req, options)};
    out.report.shape = report_shape;
    out.scale_blocks = scale_blocks;
    out.scale_mismatches = scale_miss;
    return out;
}

// The file's two entries, or nullptr when either is missing.
const dump::detail::TeQuantized* te_pair(const dump::detail::TorchFile& f, const dump::detail::TorchTensor** x) {
    const auto* hp = f.find("high_precision");
    const auto* q = f.find("quantized");
    if (!hp || !hp->tensor || !q || !q->quantized) return nullptr;
    *x = &*hp->tensor;
    return &*q->quantized;
}

}  // namespace

std::optional<TeQuantizedCheck> check_te_quantized(const std::string& path, const std::optional<Policy>& policy,
                                                   const ValidateOptions& options) {
    const dump::detail::TorchFile f(path);
    const dump::detail::TorchTensor* x = nullptr;
    const auto* q = te_pair(f, &x);
    if (!q || !q->data) return std::nullopt;
    if (q->kind == "NVFP4Tensor") return check_nvfp4(f, path, *x, *q, false, policy, options);
    return check_fp8(f, path, file_name(path), *x, *q, false, policy, options);
}

std::optional<TeQuantizedCheck> check_te_quantized_columnwise(const std::string& path,
                                                              const std::optional<Policy>& policy,
                                                              const ValidateOptions& options) {
    const dump::detail::TorchFile f(path);
    const dump::detail::TorchTensor* x = nullptr;
    const auto* q = te_pair(f, &x);
    if (!q) return std::nullopt;
    if (q->kind == "NVFP4Tensor") return check_nvfp4(f, path, *x, *q, true, policy, options);
    return check_fp8(f, path, file_name(path), *x, *q, true, policy, options);
}

}  // namespace fp8kit
