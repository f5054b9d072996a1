// torch.save files as dumps: TransformerEngine's DumpTensors output (see torch_dump.hpp).
#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "fp8kit/emu/pack.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "io/dump_internal.hpp"
#include "io/torch_dump.hpp"
#include "io/torch_pickle.hpp"

namespace fp8kit::dump::detail {
namespace {

using K = PValue::Kind;
constexpr std::size_t kMaxPickle = std::size_t(64) << 20;

struct Bad : std::runtime_error {
    using std::runtime_error::runtime_error;
};

// A ZipError/PickleError message without its leading "path: " (DumpError names the file).
std::string after_path(const std::string& path, const char* what) {
    const std::string m = what;
    return m.rfind(path + ": ", 0) == 0 ? m.substr(path.size() + 2) : m;
}

const std::map<std::string, std::pair<std::string, std::size_t>, std::less<>>& dtype_table() {
    // torch dtype name -> (typed storage class, element bytes)
    static const std::map<std::string, std::pair<std::string, std::size_t>, std::less<>> t = {
        {"float64", {"torch.DoubleStorage", 8}},
        {"float32", {"torch.FloatStorage", 4}},
        {"float16", {"torch.HalfStorage", 2}},
        {"bfloat16", {"torch.BFloat16Storage", 2}},
        {"uint8", {"torch.ByteStorage", 1}},
        {"int8", {"torch.CharStorage", 1}},
        {"int16", {"torch.ShortStorage", 2}},
        {"int32", {"torch.IntStorage", 4}},
        {"int64", {"torch.LongStorage", 8}},
        {"bool", {"torch.BoolStorage", 1}},
        {"float8_e4m3fn", {"torch.Float8_e4m3fnStorage", 1}},
        {"float8_e5m2", {"torch.Float8_e5m2Storage", 1}},
        {"float8_e4m3fnuz", {"torch.Float8_e4m3fnuzStorage", 1}},
        {"float8_e5m2fnuz", {"torch.Float8_e5m2fnuzStorage", 1}},
        {"float8_e8m0fnu", {"torch.Float8_e8m0fnuStorage", 1}},
        // Only through _rebuild_tensor_v3 (torch/storage.py _new_dtypes): no typed storage class.
        {"float4_e2m1fn_x2", {"", 1}},
        {"uint16", {"", 2}},
        {"uint32", {"", 4}},
        {"uint64", {"", 8}},
        {"bits8", {"", 1}},
        {"bits16", {"", 2}},
        {"bits1x8", {"", 1}},
        {"bits2x4", {"", 1}},
        {"bits4x2", {"", 1}},
        {"complex32", {"", 4}},
        {"bcomplex32", {"", 4}},
    };
    return t;
}

std::string storage_dtype(const std::string& storage_type) {
    for (const auto& [dt, st] : dtype_table())
        if (!st.first.empty() && st.first == storage_type) return dt;
    throw Bad(
        fmt::format("storage type {} does not say its element type (untyped storages are not read)", storage_type));
}

std::string torch_dtype(const PValue& v) {
    if (v.kind != K::global || v.text.rfind("torch.", 0) != 0 || !dtype_table().count(v.text.substr(6)))
        throw Bad(fmt::format("expected a torch dtype, found {}", describe(v)));
    return v.text.substr(6);
}

std::int64_t integer(const PValue& v, const char* what) {
    if (v.kind != K::integer) throw Bad(fmt::format("{}: expected an integer, found {}", what, describe(v)));
    return v.i;
}

std::vector<std::uint64_t> dims(const PValue& v, const char* what) {
    const PValue* t = &v;
    if (v.kind == K::object && v.text == "torch.Size" && v.items.size() == 1) t = v.items[0].get();
    if (t->kind != K::tuple) throw Bad(fmt::format("{}: expected a tuple, found {}", what, describe(v)));
    std::vector<std::uint64_t> out;
    for (const auto& e : t->items) {
        const std::int64_t x = integer(*e, what);
        if (x < 0) throw Bad(fmt::format("{}: negative value {}", what, x));
        out.push_back(static_cast<std::uint64_t>(x));
    }
    return out;
}

// _rebuild_tensor_v2(storage, storage_offset, size, stride, ...), _rebuild_tensor(storage,
// storage_offset, size, stride), _rebuild_parameter(data, requires_grad, backward_hooks), and
// _rebuild_tensor_v3(storage, storage_offset, size, stride, requires_grad, backward_hooks, dtype
// [, metadata]) (torch/_utils.py): torch/_tensor.py _reduce_ex_internal writes v3 for the dtypes
// of torch/storage.py _new_dtypes (float8 and float4 types, uint16/32/64, bits*, complex32), over
// an untyped storage whose persistent id counts bytes (torch/serialization.py persistent_id:
// storage.nbytes()); offset, size and stride count elements of `dtype`.
TorchTensor tensor(const PValue& v) {
    if (v.kind == K::object && v.text == "torch._utils._rebuild_parameter" && !v.items.empty() &&
        v.items[0]->kind == K::object && v.items[0]->text != v.text)
        return tensor(*v.items[0]);
    const bool v3 = v.kind == K::object && v.text == "torch._utils._rebuild_tensor_v3";
    const bool rebuild = v3 || (v.kind == K::object && (v.text == "torch._utils._rebuild_tensor_v2" ||
                                                        v.text == "torch._utils._rebuild_tensor"));
    if (!rebuild || v.items.size() < (v3 ? 7u : 4u)) throw Bad(fmt::format("expected a tensor, found {}", describe(v)));
    const PValue& s = *v.items[0];
    if (s.kind != K::storage) throw Bad(fmt::format("tensor storage is {}, not a storage", describe(s)));
    TorchTensor t;
    if (v3) {
        if (s.text != "torch.UntypedStorage" && s.text != "torch.storage.UntypedStorage")
            throw Bad(fmt::format("_rebuild_tensor_v3 over a {}, not torch.UntypedStorage", s.text));
        const PValue& d = *v.items[6];
        if (d.kind != K::global || d.text.rfind("torch.", 0) != 0)
            throw Bad(fmt::format("expected a torch dtype, found {}", describe(d)));
        // A dtype of a newer torch (torch_pickle's future_dtype) keeps its name and no size: the
        // tensor is listed in a note and skipped (TorchSource), its file still read.
        t.dtype = d.text.substr(6);
        const std::size_t es = torch_element_size(t.dtype);
        t.storage_numel = es ? static_cast<std::uint64_t>(s.i) / es : 0;  // s.i: bytes
    } else {
        t.dtype = storage_dtype(s.text);
        t.storage_numel = static_cast<std::uint64_t>(s.i);
    }
    t.key = s.key;
    const std::int64_t off = integer(*v.items[1], "storage offset");
    if (off < 0) throw Bad(fmt::format("negative storage offset {}", off));
    t.offset = static_cast<std::uint64_t>(off);
    t.shape = dims(*v.items[2], "tensor size");
    t.stride = dims(*v.items[3], "tensor stride");
    if (t.shape.size() != t.stride.size())
        throw Bad(fmt::format("size has {} dimensions, stride {}", t.shape.size(), t.stride.size()));
    return t;
}

std::optional<TorchTensor> optional_tensor(const PValue& v) {
    if (v.kind == K::none) return std::nullopt;
    return tensor(v);
}

int te_dtype(const PValue& e, const char* what) {
    if (e.kind != K::object || e.text.size() < 6 || e.text.compare(e.text.size() - 6, 6, ".DType") != 0 ||
        e.items.size() != 1)
        throw Bad(fmt::format("{} is {}, not TransformerEngine's DType", what, describe(e)));
    return static_cast<int>(integer(*e.items[0], what));
}

bool flag(const PValue& v, const char* what) {
    if (v.kind == K::none) return false;
    if (v.kind != K::boolean) throw Bad(fmt::format("{}: expected True or False, found {}", what, describe(v)));
    return v.i != 0;
}

// A quantizer object (NEWOBJ + BUILD, interpreted by torch_pickle) or None: its class and scalar fields.
void quantizer(const PValue& v, TeQuantized& q) {
    if (v.kind == K::none) return;
    if (v.kind != K::instance)
        throw Bad(fmt::format("quantizer is {}, not a TransformerEngine quantizer", describe(v)));
    q.quantizer = v.text.substr(v.text.rfind('.') + 1);
    for (const auto& [k, x] : v.entries) {
        if (k->kind != K::string) continue;
        std::string text;
        if (x->kind == K::boolean)
            text = x->i ? "True" : "False";
        else if (x->kind == K::integer)
            text = std::to_string(x->i);
        else if (x->kind == K::floating)
            text = fmt::format("{}", x->f);
        else if (x->kind == K::object && x->items.size() == 1 && x->items[0]->kind == K::integer)
            text = fmt::format("DType({})", x->items[0]->i);
        else
            continue;
        q.quantizer_state.emplace_back(k->text, text);
    }
}

TeQuantized quantized(const PValue& v) {
    static const std::pair<const char*, const char*> kKinds[] = {
        {"transformer_engine.pytorch.tensor.float8_tensor._make_float8_tensor_in_reduce_ex", "Float8Tensor"},
        {"transformer_engine.pytorch.tensor.mxfp8_tensor._make_mxfp8_tensor_in_reduce_ex", "MXFP8Tensor"},
        {"transformer_engine.pytorch.tensor.nvfp4_tensor._make_nvfp4_tensor_in_reduce_ex", "NVFP4Tensor"},
        {"transformer_engine.pytorch.tensor.float8_blockwise_tensor._make_float8_blockwise_tensor_in_reduce_ex",
         "Float8BlockwiseQTensor"},
        // TE 2.15: the bound classmethods (torch_pickle.cpp), with the 2.16 argument tuples
        // (transformer_engine/pytorch/tensor/*_tensor.py at v2.15, __reduce_ex__).
        {"transformer_engine.pytorch.tensor.float8_tensor.Float8Tensor._make_in_reduce_ex", "Float8Tensor"},
        {"transformer_engine.pytorch.tensor.mxfp8_tensor.MXFP8Tensor._make_in_reduce_ex", "MXFP8Tensor"},
        {"transformer_engine.pytorch.tensor.nvfp4_tensor.NVFP4Tensor._make_in_reduce_ex", "NVFP4Tensor"},
        {"transformer_engine.pytorch.tensor.float8_blockwise_tensor.Float8BlockwiseQTensor._make_in_reduce_ex",
         "Float8BlockwiseQTensor"}};
    TeQuantized q;
    for (const auto& [fn, kind] : kKinds)
        if (v.text == fn) q.kind = kind;
    q.te215 = v.text.size() > 19 && v.text.compare(v.text.size() - 19, 19, "._make_in_reduce_ex") == 0;
    const char* const te_versions = q.te215 ? "2.15" : "2.16 to 2.18";
    const auto& a = v.items;
    auto count = [&](std::initializer_list<std::size_t> allowed, const char* versions) {
        for (std::size_t n : allowed)
            if (a.size() == n) return;
        throw Bad(fmt::format("{} reconstructed from {} arguments: not a layout of TransformerEngine {}", q.kind,
                              a.size(), versions));
    };
    if (q.kind == "Float8Tensor") {
        // (data, fp8_dtype, fp8_scale_inv, dtype, shape[, data_transpose])
        q.te215 ? count({5}, "2.15") : count({5, 6}, "2.16 to 2.18 (5 arguments) or later (6)");
        q.data = optional_tensor(*a[0]);
        q.fp8_dtype = te_dtype(*a[1], "fp8_dtype");
        q.scale_inv = tensor(*a[2]);
        q.dtype = torch_dtype(*a[3]);
        q.shape = dims(*a[4], "shape");
        if (a.size() == 6) q.transpose = optional_tensor(*a[5]);
        if (!q.data && !q.transpose) throw Bad("Float8Tensor without data and without its transpose");
    } else if (q.kind == "MXFP8Tensor") {
        count({9}, te_versions);
        q.data = optional_tensor(*a[0]);
        q.scale_inv = optional_tensor(*a[1]);
        q.columnwise_data = optional_tensor(*a[2]);
        q.columnwise_scale_inv = optional_tensor(*a[3]);
        q.fp8_dtype = te_dtype(*a[4], "fp8_dtype");
        q.dtype = torch_dtype(*a[5]);
        q.shape = dims(*a[6], "shape");
        quantizer(*a[7], q);
        q.swizzled = flag(*a[8], "with_gemm_swizzled_scales");
    } else if (q.kind == "NVFP4Tensor") {
        q.te215 ? count({11}, "2.15") : count({11, 14}, "2.16 (11 arguments) or 2.17 to 2.18 (14)");
        q.shape = dims(*a[0], "shape");
        q.data = optional_tensor(*a[1]);
        q.scale_inv = optional_tensor(*a[2]);
        q.columnwise_data = optional_tensor(*a[3]);
        q.columnwise_scale_inv = optional_tensor(*a[4]);
        q.amax = optional_tensor(*a[5]);
        q.columnwise_amax = optional_tensor(*a[6]);
        q.fp8_dtype = te_dtype(*a[7], "fp4_dtype");
        q.dtype = torch_dtype(*a[8]);
        quantizer(*a[9], q);
        q.swizzled = flag(*a[10], "with_gemm_swizzled_scales");
        if (a.size() == 14) {
            q.row_scaled = flag(*a[11], "row_scaled_nvfp4");
            q.use_4over6 = flag(*a[12], "nvfp4_use_4over6");
            if (a[13]->kind == K::floating)
                q.e4m3_max = a[13]->f;
            else if (a[13]->kind == K::integer)
                q.e4m3_max = static_cast<double>(a[13]->i);
            else if (a[13]->kind != K::none)
                throw Bad(fmt::format("nvfp4_e4m3_max is {}", describe(*a[13])));
        }
    } else if (q.kind == "Float8BlockwiseQTensor") {
        count({10}, te_versions);
        q.shape = dims(*a[0], "shape");
        q.data = optional_tensor(*a[1]);
        q.scale_inv = optional_tensor(*a[2]);
        q.columnwise_data = optional_tensor(*a[3]);
        q.columnwise_scale_inv = optional_tensor(*a[4]);
        q.fp8_dtype = te_dtype(*a[5], "fp8_dtype");
        q.dtype = torch_dtype(*a[6]);
        quantizer(*a[7], q);
        q.is_2d = flag(*a[8], "is_2D_scaled");
    }
    return q;
}

TorchEntry entry(const std::string& key, const PValue& v) {
    TorchEntry e;
    e.key = key;
    if (v.kind == K::object && v.text.rfind("transformer_engine.pytorch.tensor.", 0) == 0)
        e.quantized = quantized(v);
    else
        e.tensor = tensor(v);
    return e;
}

bool row_major(const TorchTensor& t) {
    std::uint64_t expect = 1;
    for (std::size_t d = t.shape.size(); d-- > 0;) {
        if (t.shape[d] != 1 && t.stride[d] != expect) return false;
        expect *= t.shape[d];
    }
    return true;
}

}  // namespace

std::uint64_t TorchTensor::numel() const {
    std::uint64_t n = 1;
    for (auto s : shape)
        if (mul_overflows(n, s, n)) return ~std::uint64_t(0);
    return n;
}

std::size_t torch_element_size(const std::string& dtype) {
    const auto it = dtype_table().find(dtype);
    return it == dtype_table().end() ? 0 : it->second.second;
}

std::optional<DType> torch_dump_dtype(const std::string& d) {
    static const std::pair<const char*, DType> kTable[] = {{"float64", DType::f64},
                                                           {"float32", DType::f32},
                                                           {"float16", DType::f16},
                                                           {"bfloat16", DType::bf16},
                                                           {"float8_e4m3fn", DType::e4m3},
                                                           {"float8_e5m2", DType::e5m2},
                                                           {"float8_e4m3fnuz", DType::e4m3fnuz},
                                                           {"float8_e5m2fnuz", DType::e5m2fnuz},
                                                           {"float8_e8m0fnu", DType::e8m0}};
    for (const auto& [n, t] : kTable)
        if (d == n) return t;
    return std::nullopt;
}

std::optional<DType> te_fp8_dtype(int te) {
    // NVTEDType (transformer_engine/common/include/transformer_engine/transformer_engine.h)
    if (te == 7) return DType::e4m3;
    if (te == 8) return DType::e5m2;
    return std::nullopt;
}

TorchFile::TorchFile(const std::string& path) try : zip_(path) {
    const ZipEntry* pkl = zip_.find("data.pkl");
    if (!pkl) throw DumpError(path, "", fmt::format("no {}/data.pkl: not a torch.save archive", zip_.folder()));
    if (const ZipEntry* bo = zip_.find("byteorder")) {
        const auto b = zip_.read_all(*bo, 16);
        if (std::string(b.begin(), b.end()) != "little")
            throw DumpError(path, "", "byteorder is not 'little': big-endian torch files are not read");
    }
    const auto bytes = zip_.read_all(*pkl, kMaxPickle);
    const PRef top = unpickle(bytes.data(), bytes.size(), path + ": data.pkl");
    try {
        if (top->kind == K::dict) {
            for (const auto& [k, v] : top->entries) {
                if (k->kind != K::string) throw Bad(fmt::format("a dict key is {}, not a string", describe(*k)));
                try {
                    entries_.push_back(entry(k->text, *v));
                } catch (const Bad& b) {
                    throw Bad(fmt::format("{}: {}", io::quoted(k->text, 80), b.what()));
                }
            }
        } else {
            entries_.push_back(entry("tensor", *top));
        }
    } catch (const Bad& b) {
        throw DumpError(path, "", fmt::format("data.pkl: {}", b.what()));
    }
} catch (const ZipError& e) {
    throw DumpError(path, "", after_path(path, e.what()));
} catch (const PickleError& e) {
    throw DumpError(path, "", after_path(path, e.what()));
}

const TorchEntry* TorchFile::find(const std::string& key) const {
    for (const auto& e : entries_)
        if (e.key == key) return &e;
    return nullptr;
}

void TorchFile::check(const TorchTensor& t, const std::string& name, const ReadOptions& opts) const {
    const std::size_t es = torch_element_size(t.dtype);
    const ZipEntry* z = zip_.find("data/" + t.key);
    if (!z) throw DumpError(path(), name, fmt::format("storage data/{} is missing from the archive", t.key));
    std::uint64_t need = 0;
    if (mul_overflows(t.storage_numel, es, need) || z->size < need)
        throw DumpError(path(), name,
                        fmt::format("storage data/{} claims {} elements of {} bytes but holds {} bytes", t.key,
                                    t.storage_numel, es, z->size));
    const std::uint64_t n = t.numel();
    if (n > opts.max_elements)
        throw DumpError(path(), name, fmt::format("{} elements: more than the {} allowed", n, opts.max_elements));
    if (n == 0) return;
    std::uint64_t last = t.offset;  // the highest element index the tensor touches
    for (std::size_t d = 0; d < t.shape.size(); ++d) {
        std::uint64_t span = 0;
        if (mul_overflows(t.shape[d] - 1, t.stride[d], span) || __builtin_add_overflow(last, span, &last))
            throw DumpError(path(), name, "size and stride overflow 64 bits");
    }
    if (last >= t.storage_numel)
        throw DumpError(
            path(), name,
            fmt::format("the tensor (offset {}, size {}, stride {}) reaches element {} of a "
                        "storage of {} elements: storage shorter than its tensor",
                        t.offset, fmt::join(t.shape, "x"), fmt::join(t.stride, ","), last, t.storage_numel));
}

void TorchFile::read(const TorchTensor& t, std::size_t per_call,
                     const std::function<void(const std::uint8_t*, std::size_t, std::uint64_t)>& fn) const {
    const std::size_t es = torch_element_size(t.dtype);
    const ZipEntry& z = *zip_.find("data/" + t.key);
    const std::uint64_t n = t.numel();
    std::vector<std::uint8_t> buf;
    if (row_major(t)) {  // stream straight from the archive
        for (std::uint64_t first = 0; first < n; first += per_call) {
            const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(per_call, n - first));
            buf.resize(k * es);
            zip_.read(z, (t.offset + first) * es, buf.data(), buf.size());
            fn(buf.data(), k, first);
        }
        return;
    }
    // A strided view: read the storage span it touches once, then gather in row-major order.
    std::uint64_t last = t.offset;
    for (std::size_t d = 0; d < t.shape.size(); ++d) last += (t.shape[d] - 1) * t.stride[d];  // check()ed
    std::vector<std::uint8_t> span(static_cast<std::size_t>(last - t.offset + 1) * es);
    zip_.read(z, t.offset * es, span.data(), span.size());
    std::unique_ptr<std::uint64_t[]> idx(new std::uint64_t[t.shape.size()]());
    std::uint64_t pos = 0;
    for (std::uint64_t first = 0; first < n;) {
        const std::size_t k = static_cast<std::size_t>(std::min<std::uint64_t>(per_call, n - first));
        buf.resize(k * es);
        for (std::size_t j = 0; j < k; ++j) {
            std::copy_n(span.data() + pos * es, es, buf.data() + j * es);
            for (std::size_t d = t.shape.size(); d-- > 0;) {  // the next index, row-major
                pos += t.stride[d];
                if (++idx[d] < t.shape[d]) break;
                pos -= t.stride[d] * t.shape[d];
                idx[d] = 0;
            }
        }
        fn(buf.data(), k, first);
        first += k;
    }
}

std::vector<std::uint8_t> TorchFile::read_all(const TorchTensor& t) const {
    std::vector<std::uint8_t> out(static_cast<std::size_t>(t.numel()) * torch_element_size(t.dtype));
    read(t, std::size_t(1) << 20, [&](const std::uint8_t* p, std::size_t k, std::uint64_t first) {
        std::copy(p, p + k * torch_element_size(t.dtype), out.data() + first * torch_element_size(t.dtype));
    });
    return out;
}

}  // namespace fp8kit::dump::detail

namespace fp8kit::dump::detail {
namespace {

// The tensors of one torch.save file: each dict entry that is a tensor, and a TE Float8Tensor's
// codes (listed as FP8 values before scale_inv is applied). Names: "{layer}_{tensor}/{key}" for a
// DumpTensors path (step, rank and role from the path), else "{key}".
class TorchSource final : public Source {
public:
    TorchSource(const std::string& path, const ReadOptions& opts) : opts_(opts), file_(path) {
        path_ = path;
        const auto te = te::parse_dump_path(path);
        for (const auto& e : file_.entries()) {
            TensorInfo t;
            t.file = path;
            t.name = te ? fmt::format("{}_{}/{}", te->layer, te->tensor, e.key) : e.key;
            if (te) {
                t.step = te->step;
                t.step_guessed = true;
                t.role = te::role_of(te->tensor);
                t.role_guessed = true;
            }
            if (e.quantized) {
                add_quantized(t, *e.quantized, false);
                add_quantized(t, *e.quantized, true);
            } else {
                add_plain(t, *e.tensor);
            }
        }
    }

    void read(const TensorInfo& t, const ChunkFn& fn) override {
        std::size_t i = 0;
        while (i < tensors_.size() && tensors_[i].name != t.name) ++i;
        if (i == tensors_.size()) throw DumpError(path_, t.name, "no such tensor in this file");
        std::vector<std::uint8_t> scratch;
        try {
            if (packed_[i]) {
                std::vector<std::uint8_t> codes;
                file_.read(stored_[i], std::max<std::size_t>(1, elements_per_read(t.dtype, opts_) / 2),
                           [&](const std::uint8_t* p, std::size_t n, std::uint64_t first) {
                               codes.resize(2 * n);
                               emu::unpack_fp4_array(p, codes.data(), 2 * n, emu::NibbleOrder::low_first);
                               deliver(t.dtype, codes.data(), 2 * n, 2 * first, scratch, fn);
                           });
                return;
            }
            file_.read(stored_[i], elements_per_read(t.dtype, opts_),
                       [&](const std::uint8_t* p, std::size_t n, std::uint64_t first) {
                           deliver(t.dtype, p, n, first, scratch, fn);
                       });
        } catch (const ZipError& e) {
            throw DumpError(path_, t.name, after_path(path_, e.what()));
        }
    }

private:
    // A TE QuantizedTensor's row-wise codes as "{name}", or with `columnwise` its column-wise copy
    // as "{name}/columnwise": Float8Tensor's data_transpose and Float8BlockwiseQTensor's
    // columnwise_data have the transposed shape (last dimension first:
    // transformer_engine/pytorch/csrc/quantizer.cpp make_transpose_shape,
    // tensor/float8_blockwise_tensor.py get_columnwise_shape), MXFP8Tensor's the tensor's own
    // (tensor/mxfp8_tensor.py get_columnwise_shape). NVFP4Tensor's is the 2-D transpose (K, M / 2)
    // packed (tensor/nvfp4_tensor.py make_empty), Hadamard-transformed when the quantizer has
    // with_rht: listed as K x M codes.
    void add_quantized(TensorInfo t, const TeQuantized& q, bool columnwise) {
        const bool fp4 = q.kind == "NVFP4Tensor";
        const std::optional<TorchTensor>& data = !columnwise                ? q.data
                                                 : q.kind == "Float8Tensor" ? q.transpose
                                                                            : q.columnwise_data;
        if (columnwise) t.name += "/columnwise";
        if (!data) {
            if (!columnwise)
                notes_.push_back({path_, t.name,
                                  fmt::format("TransformerEngine {} holding only its column-wise data: listed as "
                                              "{}/columnwise",
                                              q.kind, t.name)});
            return;
        }
        const auto f =
            fp4 ? (q.fp8_dtype == 10 ? std::optional<DType>(DType::e2m1) : std::nullopt) : te_fp8_dtype(q.fp8_dtype);
        if (!f) {
            errors_.push_back({path_, t.name,
                               fmt::format("{} {} {} is not {}", q.kind, fp4 ? "fp4_dtype" : "fp8_dtype", q.fp8_dtype,
                                           fp4 ? "E2M1 (10)" : "E4M3 (7) or E5M2 (8)")});
            return;
        }
        t.dtype = *f;
        t.storage = fmt::format("TE{} {} {} codes{}{}", q.te215 ? " 2.15" : "", q.kind, name(*f),
                                !columnwise               ? ""
                                : q.kind == "MXFP8Tensor" ? ", column-wise (32x1 blocks)"
                                : fp4                     ? ", column-wise (transposed, after TE's RHT when with_rht)"
                                                          : ", column-wise (transposed)",
                                q.quantizer.empty() ? "" : " (" + q.quantizer + ")");
        auto want = q.shape;
        if (columnwise && fp4 && !want.empty()) {  // always 2-D: (K, M)
            std::uint64_t m = 1;
            for (std::size_t d = 0; d + 1 < want.size(); ++d) m *= want[d];
            want = {want.back(), m};
        } else if (columnwise && q.kind != "MXFP8Tensor" && !want.empty()) {
            std::rotate(want.rbegin(), want.rbegin() + 1, want.rend());
        }
        const auto unpacked = want;
        if (fp4 && !want.empty()) want.back() = (want.back() + 1) / 2;
        if (data->dtype != "uint8" || data->shape != want) {
            errors_.push_back(
                {path_, t.name,
                 fmt::format("{} {}data is {} {}, expected uint8 of shape {}", q.kind, columnwise ? "column-wise " : "",
                             data->dtype, fmt::join(data->shape, "x"), fmt::join(want, "x"))});
            return;
        }
        if (!checked(t, *data)) return;
        if (fp4) {  // an odd last dimension: the last byte's high nibble is padding
            t.shape = unpacked;
            t.numel = 2 * data->numel();
            if (t.shape.empty() || t.shape.back() % 2) {
                notes_.push_back({path_, t.name, "NVFP4Tensor with an odd last dimension: not decoded"});
                return;
            }
        }
        push(t, *data, fp4);
    }

    void add_plain(TensorInfo t, const TorchTensor& tt) {
        bool packed = false;  // two E2M1 codes per byte, low nibble first
        if (tt.dtype == "float4_e2m1fn_x2") {
            // Two E2M1 codes per byte, element 2i in the low nibble (the order TE, torchao and
            // ModelOpt pack; torch itself defines no arithmetic on the type): listed unpacked,
            // the last dimension doubled.
            packed = true;
            t.dtype = DType::e2m1;
            t.storage = "torch.float4_e2m1fn_x2 (two E2M1 codes per byte, low nibble first)";
        } else {
            const auto d = torch_dump_dtype(tt.dtype);
            if (!d) {
                notes_.push_back({path_, t.name,
                                  torch_element_size(tt.dtype)
                                      ? fmt::format("torch.{} tensor: not a floating-point type, skipped", tt.dtype)
                                      : fmt::format("torch.{} tensor: a dtype fp8kit does not know (a newer "
                                                    "torch's), skipped",
                                                    io::quoted(tt.dtype, 48))});
                return;
            }
            t.dtype = *d;
            t.storage = "torch." + tt.dtype;
        }
        if (!checked(t, tt)) return;
        if (packed) {
            if (t.shape.empty()) t.shape.push_back(1);
            t.shape.back() *= 2;
            t.numel *= 2;
        }
        push(t, tt, packed);
    }

    // Checks `tt` against its storage and sets t's shape and count; false (an error kept) if bad.
    bool checked(TensorInfo& t, const TorchTensor& tt) {
        try {
            file_.check(tt, t.name, opts_);
        } catch (const DumpError& err) {
            errors_.push_back({path_, t.name, err.message});
            return false;
        }
        t.shape = tt.shape;
        t.numel = tt.numel();
        return true;
    }

    void push(TensorInfo& t, const TorchTensor& tt, bool packed) {
        t.wide = delivered_as(t.dtype);
        complete_guesses(t);
        tensors_.push_back(t);
        stored_.push_back(tt);
        packed_.push_back(packed);
    }

    ReadOptions opts_;
    TorchFile file_;
    std::vector<TorchTensor> stored_;  // parallel to tensors_
    std::vector<bool> packed_;         // parallel: FP4 codes two per byte
};

}  // namespace

std::unique_ptr<Source> open_torch(const std::string& path, const ReadOptions& opts) {
    return std::make_unique<TorchSource>(path, opts);
}

}  // namespace fp8kit::dump::detail
