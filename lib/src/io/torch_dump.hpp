// torch.save files (not installed): the tensors of a TransformerEngine DumpTensors file, read from
// the zip archive (zip_stored.hpp) and the pickle (torch_pickle.hpp) without running any of it.
//
// torch.save (torch/serialization.py, _save) writes <archive>/data.pkl, one entry
// <archive>/data/<key> per storage (raw little-endian elements), <archive>/byteorder ("little")
// and <archive>/version. A tensor is _rebuild_tensor_v2(storage, storage_offset, size, stride,
// requires_grad, backward_hooks[, metadata]) (torch/_utils.py).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/io/dump.hpp"
#include "io/zip_stored.hpp"

namespace fp8kit::dump::detail {

struct TorchTensor {
    std::string dtype;  // torch's name: "float32", "bfloat16", "uint8", ...
    std::string key;    // storage entry data/<key>
    std::uint64_t storage_numel = 0, offset = 0;
    std::vector<std::uint64_t> shape, stride;
    std::uint64_t numel() const;
};

// A TransformerEngine QuantizedTensor as its reconstructor's arguments
// (transformer_engine/pytorch/tensor/*_tensor.py, __reduce_ex__ and _make_*_in_reduce_ex; TE 2.16
// to 2.18 write the tuples below to module-level reconstructors; 2.15 writes the 2.16 tuples to the
// bound classmethod Cls._make_in_reduce_ex, read as a name by torch_pickle):
//   Float8Tensor   (data, fp8_dtype, fp8_scale_inv, dtype, shape[, data_transpose (TE main, 2.20.dev)])
//   MXFP8Tensor    (rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv,
//                   fp8_dtype, dtype, shape, quantizer, with_gemm_swizzled_scales)
//   NVFP4Tensor    (shape, rowwise_data, rowwise_scale_inv, columnwise_data, columnwise_scale_inv,
//                   amax_rowwise, amax_columnwise, fp4_dtype, dtype, quantizer,
//                   with_gemm_swizzled_scales) in 2.16; 2.17+ append row_scaled_nvfp4,
//                   nvfp4_use_4over6, nvfp4_e4m3_max
//   Float8BlockwiseQTensor (shape, rowwise_data, rowwise_scale_inv, columnwise_data,
//                   columnwise_scale_inv, fp8_dtype, dtype, quantizer, is_2D_scaled, data_format)
struct TeQuantized {
    std::string kind;  // "Float8Tensor", "MXFP8Tensor", "NVFP4Tensor", "Float8BlockwiseQTensor"
    std::optional<TorchTensor> data, transpose, scale_inv;  // row-wise data and scale_inv
    std::optional<TorchTensor> columnwise_data, columnwise_scale_inv, amax, columnwise_amax;
    int fp8_dtype = -1;  // TE's DType value (NVTEDType: 7 = E4M3, 8 = E5M2, 10 = E2M1)
    std::string dtype;   // the dequantised dtype
    std::vector<std::uint64_t> shape;
    bool swizzled = false;           // MXFP8/NVFP4 with_gemm_swizzled_scales: cuBLAS's tiled scale layout
    bool is_2d = false;              // blockwise: 128x128 blocks (else 1x128)
    bool row_scaled = false;         // NVFP4 (2.17+) row_scaled_nvfp4
    bool use_4over6 = false;         // NVFP4 (2.17+) nvfp4_use_4over6
    std::optional<double> e4m3_max;  // NVFP4 (2.17+) nvfp4_e4m3_max
    bool te215 = false;              // written by TE 2.15 (bound classmethod)
    std::string quantizer;           // the quantizer's class ("" when None)
    std::vector<std::pair<std::string, std::string>> quantizer_state;  // its scalar fields, as text
};

struct TorchEntry {
    std::string key;  // the dict key ("high_precision", "quantized"), or "tensor" for a bare tensor
    std::optional<TorchTensor> tensor;
    std::optional<TeQuantized> quantized;
};

class TorchFile {
public:
    explicit TorchFile(const std::string& path);  // throws DumpError
    const std::string& path() const { return zip_.path(); }
    const std::vector<TorchEntry>& entries() const { return entries_; }
    const TorchEntry* find(const std::string& key) const;
    // Checks `t` against its storage (entry present and long enough, every element inside it).
    // Throws DumpError naming `name`.
    void check(const TorchTensor& t, const std::string& name, const ReadOptions& opts) const;
    // The elements of `t` in row-major order as stored (little-endian), `per_call` elements at a
    // time. Call check() first.
    void read(const TorchTensor& t, std::size_t per_call,
              const std::function<void(const std::uint8_t*, std::size_t, std::uint64_t)>& fn) const;
    std::vector<std::uint8_t> read_all(const TorchTensor& t) const;  // row-major, as stored

private:
    ZipStored zip_;
    std::vector<TorchEntry> entries_;
};

std::size_t torch_element_size(const std::string& dtype);         // 0 when not a known dtype
std::optional<DType> torch_dump_dtype(const std::string& dtype);  // analysable dtypes
std::optional<DType> te_fp8_dtype(int te_dtype);                  // 7 -> e4m3, 8 -> e5m2

std::unique_ptr<Source> open_torch(const std::string& path, const ReadOptions& opts);

}  // namespace fp8kit::dump::detail
