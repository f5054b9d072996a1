// TransformerEngine's Float8Tensor codes against the reference (see check_te_quantized in
// validate.hpp). TE's cast multiplies by the quantisation scale and stores scale_inv = 1/scale
// (transformer_engine/pytorch/tensor/float8_tensor.py keeps only _scale_inv in the pickle), so the
// reference is ScaleMode::scale_inv: q = fp8(fl(x * fl32(1 / scale_inv))); a scale that is not
// a power of two can differ from TE's by one ulp there, which validate classifies as `scale`.
#include <cstring>

#include <fmt/format.h>

#include "fp8kit/emu/profiles.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/validate.hpp"
#include "io/torch_dump.hpp"

namespace fp8kit {

std::optional<TeQuantizedCheck> check_te_quantized(const std::string& path, const std::optional<Policy>& policy,
                                                   const ValidateOptions& options) {
    using namespace dump::detail;
    const TorchFile f(path);
    const TorchEntry* hp = f.find("high_precision");
    const TorchEntry* q = f.find("quantized");
    if (!hp || !hp->tensor || !q || !q->quantized || q->quantized->kind != "Float8Tensor" || !q->quantized->data)
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
        throw dump::DumpError(path, name, fmt::format("high_precision is {} but the Float8Tensor is {} with {} data {}",
                                                      fmt::join(x.shape, "x"), fmt::join(fq.shape, "x"),
                                                      fq.data->dtype, fmt::join(fq.data->shape, "x")));
    const TorchTensor& si = *fq.scale_inv;
    if (si.dtype != "float32" || si.numel() != 1)
        throw dump::DumpError(path, name + "/quantized", fmt::format("scale_inv is torch.{} with {} elements, not one float32",
                                                                     si.dtype, si.numel()));
    const dump::ReadOptions opts;
    f.check(x, name + "/high_precision", opts);
    f.check(*fq.data, name + "/quantized", opts);
    f.check(si, name + "/quantized scale_inv", opts);
    const auto input = f.read_all(x);
    const auto codes = f.read_all(*fq.data);
    const auto s = f.read_all(si);
    float scale_inv;
    std::memcpy(&scale_inv, s.data(), 4);

    ValidateRequest req;
    req.from = dump::delivered_as(*xd);
    req.input = input.data();
    req.codes = codes.data();
    req.n = codes.size();
    req.to = *dump::fp8_format(*fp8);
    // TE's casts are cuda_fp8.h's (round to nearest even, __NV_SATFINITE).
    req.policy = policy ? *policy : emu::profile_policy(Profile::cuda_satfinite, req.to, req.from).policy;
    req.scaling.mode = ScaleMode::scale_inv;
    req.scaling.layout = BlockLayout::tensor;
    req.scaling.value = scale_inv;
    TeQuantizedCheck out{path, name, req.to, scale_inv, validate(req, options)};
    out.report.shape = x.shape;
    return out;
}

}  // namespace fp8kit
