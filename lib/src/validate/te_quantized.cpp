// TransformerEngine's Float8Tensor codes against the reference (see check_te_quantized in
// validate.hpp). TE's cast multiplies by the quantisation scale and stores scale_inv = 1/scale
// (transformer_engine/pytorch/tensor/float8_tensor.py keeps only _scale_inv in the pickle), so the
// reference is ScaleMode::scale_inv: q = fp8(fl(x * fl32(1 / scale_inv))); a scale that is not
// a power of two can differ from TE's by one ulp there, which validate classifies as `scale`.
#include <cmath>
#include <cstring>
#include <limits>

#include <fmt/format.h>

#include "fp8kit/emu/profiles.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/validate.hpp"
#include "io/torch_dump.hpp"

namespace fp8kit {

namespace {

std::vector<float> f32_of(const std::vector<std::uint8_t>& b) {
    std::vector<float> v(b.size() / 4);
    std::memcpy(v.data(), b.data(), v.size() * 4);
    return v;
}

}  // namespace

std::optional<TeQuantizedCheck> check_te_quantized(const std::string& path, const std::optional<Policy>& policy,
                                                   const ValidateOptions& options) {
    using namespace dump::detail;
    const TorchFile f(path);
    const TorchEntry* hp = f.find("high_precision");
    const TorchEntry* q = f.find("quantized");
    if (!hp || !hp->tensor || !q || !q->quantized || !q->quantized->data || q->quantized->kind == "NVFP4Tensor")
        return std::nullopt;
    const auto te = te::parse_dump_path(path);
    const std::string name = te ? te->layer + "_" + te->tensor : path.substr(path.rfind('/') + 1);
    const TorchTensor& x = *hp->tensor;
    const TeQuantized& fq = *q->quantized;
    const auto fp8 = te_fp8_dtype(fq.fp8_dtype);
    if (!fp8) throw dump::DumpError(path, name + "/quantized", fmt::format("fp8_dtype {} is not E4M3 (7) or E5M2 (8)", fq.fp8_dtype));
    const auto xd = torch_dump_dtype(x.dtype);
    if (!xd || dump::fp8_format(*xd))
        throw dump::DumpError(path, name + "/high_precision", fmt::format("torch.{}: not a float64/32/16 or bfloat16 tensor", x.dtype));
    if (x.shape != fq.shape || fq.data->shape != fq.shape || fq.data->dtype != "uint8")
        throw dump::DumpError(path, name, fmt::format("high_precision is {} but the {} is {} with {} data {}",
                                                      fmt::join(x.shape, "x"), fq.kind, fmt::join(fq.shape, "x"),
                                                      fq.data->dtype, fmt::join(fq.data->shape, "x")));
    if (!fq.scale_inv) throw dump::DumpError(path, name + "/quantized", fmt::format("{} without its row-wise scale_inv", fq.kind));
    const TorchTensor& si = *fq.scale_inv;
    const dump::ReadOptions opts;
    f.check(x, name + "/high_precision", opts);
    f.check(*fq.data, name + "/quantized", opts);
    f.check(si, name + "/quantized scale_inv", opts);
    const auto input = f.read_all(x);
    const auto codes = f.read_all(*fq.data);
    const auto s = f.read_all(si);
    // The matrix view: rows = product of the leading dimensions, cols = the last.
    std::uint64_t rows = 1, cols = x.shape.empty() ? 1 : x.shape.back();
    for (std::size_t d = 0; d + 1 < x.shape.size(); ++d) rows *= x.shape[d];

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
    auto bad_scales = [&](const std::string& why) {
        return dump::DumpError(path, name + "/quantized scale_inv", why);
    };
    if (fq.kind == "Float8Tensor") {
        if (si.dtype != "float32" || si.numel() != 1)
            throw bad_scales(fmt::format("torch.{} with {} elements, not one float32", si.dtype, si.numel()));
        req.scaling.layout = BlockLayout::tensor;
        std::memcpy(&req.scaling.value, s.data(), 4);
    } else if (fq.kind == "MXFP8Tensor") {
        if (si.dtype != "uint8") throw bad_scales(fmt::format("torch.{}, not uint8 E8M0 scales", si.dtype));
        const std::uint64_t nb = (cols + 31) / 32;
        std::vector<std::uint8_t> e8;
        try {
            e8 = te::te_rowwise_scales(s, si.shape, rows, nb, fq.swizzled);
        } catch (const std::invalid_argument& e) {
            throw bad_scales(e.what());
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
                throw bad_scales(fmt::format("{}, expected {}x{} for 128x128 blocks", fmt::join(si.shape, "x"), rb, pc));
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
    TeQuantizedCheck out{path, name, fq.kind, req.to, req.scaling.value, req.scaling.layout, fq.swizzled,
                         validate(req, options)};
    out.report.shape = x.shape;
    return out;
}

}  // namespace fp8kit
