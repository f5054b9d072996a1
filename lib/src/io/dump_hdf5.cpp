// HDF5 dumps: every numeric dataset of any group hierarchy is a tensor.
//
// Only calls whose signature is the same in HDF5 1.10.5 .. 1.14 are used: numbered ones (H5Dopen2,
// H5Ovisit2, H5Pget_filter2, H5Eset_auto2, H5Ewalk2), with H5_USE_110_API (lib/CMakeLists.txt)
// mapping H5O_info_t / H5O_iterate_t to their 1.10 layouts on 1.12+.
#include <hdf5.h>
#if defined(__unix__)
#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <unordered_map>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstring>

#include <fmt/format.h>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/io/gate.hpp"
#include "fp8kit/parallel/pool.hpp"
#include "io/chunk_task.hpp"
#include "io/dump_internal.hpp"
#include "io/hdf5_filters.hpp"
#include "io/hdf5_handle.hpp"
#include "io/hdf5_outside.hpp"
#include "io/hdf5_walk.hpp"
#include "io/listing_wire.hpp"

namespace fp8kit::dump::detail {
namespace {

// The type an opaque HDF5 type stands for without a 'dtype' attribute: its tag when that names a
// type ("bfloat16", "float8_e4m3fn", "NUMPY:bfloat16"), else bfloat16 for 2-byte data (h5py's
// save of ml_dtypes.bfloat16); nullopt when nothing says. `implied` gets the storage suffix.
std::optional<std::string> opaque_type_name(hid_t type, std::size_t size, std::string& implied) {
    if (char* tag = H5Tget_tag(type)) {
        std::string t(tag);
        H5free_memory(tag);
        if (const auto colon = t.rfind(':'); colon != std::string::npos) t = t.substr(colon + 1);
        if (parse_format(t) || parse_wide(t)) {
            implied = " (tag " + t + ")";
            return t;
        }
    }
    if (size == 2) {
        implied = " (bfloat16: 2-byte opaque, as h5py saves ml_dtypes.bfloat16)";
        return std::string("bfloat16");
    }
    return std::nullopt;
}

std::optional<std::string> string_attr(hid_t obj, const char* attr) {
    if (H5Aexists(obj, attr) <= 0) return std::nullopt;
    Handle a(H5Aopen(obj, attr, H5P_DEFAULT), H5Aclose);
    if (!a.ok()) return std::nullopt;
    Handle t(H5Aget_type(a.get()), H5Tclose);
    Handle sp(H5Aget_space(a.get()), H5Sclose);
    if (!t.ok() || !sp.ok() || H5Tget_class(t.get()) != H5T_STRING || H5Sget_simple_extent_npoints(sp.get()) != 1)
        return std::nullopt;
    if (H5Tis_variable_str(t.get()) > 0) {
        Handle mt(H5Tcopy(H5T_C_S1), H5Tclose);
        H5Tset_size(mt.get(), H5T_VARIABLE);
        H5Tset_cset(mt.get(), H5Tget_cset(t.get()));
        char* p = nullptr;
        if (H5Aread(a.get(), mt.get(), &p) < 0) return std::nullopt;
        std::string s = p ? p : "";
        if (p) H5free_memory(p);
        return s;
    }
    std::vector<char> buf(H5Tget_size(t.get()) + 1, '\0');
    if (H5Aread(a.get(), t.get(), buf.data()) < 0) return std::nullopt;
    std::string s(buf.data());
    while (!s.empty() && s.back() == ' ') s.pop_back();
    return s;
}

const char* class_name(H5T_class_t c);

// The dataset's `step` attribute: nullopt when it has none. One that is present but is not one
// integer an int64 holds (an array, a fraction, a non-number string, an unsigned value past
// 2^63 - 1, another type) gives nullopt too, and *why says what it is, for a note: the step is
// then guessed from the name, as without the attribute, and the report says so.
std::optional<std::int64_t> step_attr(hid_t obj, std::string* why) {
    if (H5Aexists(obj, "step") <= 0) return std::nullopt;
    Handle a(H5Aopen(obj, "step", H5P_DEFAULT), H5Aclose);
    Handle t(H5Aget_type(a.get()), H5Tclose);
    Handle sp(H5Aget_space(a.get()), H5Sclose);
    auto unusable = [&](const std::string& what) -> std::optional<std::int64_t> {
        *why = "attribute step " + what + ", not an integer step: the step is guessed from the name";
        return std::nullopt;
    };
    if (!t.ok() || !sp.ok()) return unusable("cannot be read");
    if (const auto n = H5Sget_simple_extent_npoints(sp.get()); n != 1)
        return unusable(fmt::format("holds {} values", n));
    switch (H5Tget_class(t.get())) {
        case H5T_INTEGER: {
            if (H5Tget_sign(t.get()) == H5T_SGN_NONE) {
                unsigned long long u = 0;
                if (H5Aread(a.get(), H5T_NATIVE_ULLONG, &u) < 0) return unusable("cannot be read");
                if (u > static_cast<unsigned long long>(INT64_MAX)) return unusable(fmt::format("= {}", u));
                return static_cast<std::int64_t>(u);
            }
            long long v = 0;
            if (H5Aread(a.get(), H5T_NATIVE_LLONG, &v) < 0) return unusable("cannot be read");
            return v;
        }
        case H5T_FLOAT: {
            double v = 0;
            // Only integral values that an int64 holds (the cast is undefined outside that).
            if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) < 0) return unusable("cannot be read");
            if (!(std::fabs(v) < 9.2e18) || v != std::floor(v)) return unusable(fmt::format("= {}", v));
            return static_cast<std::int64_t>(v);
        }
        case H5T_STRING: {
            const auto s = string_attr(obj, "step");
            if (!s || s->empty() || s->size() > 18 ||
                !std::all_of(s->begin(), s->end(), [](char c) { return c >= '0' && c <= '9'; }))
                return unusable(s ? "= '" + io::quoted(*s, 64) + "'" : "cannot be read");
            return std::stoll(*s);
        }
        default: return unusable(fmt::format("is an HDF5 {}", class_name(H5Tget_class(t.get()))));
    }
}

// How one dataset is read, or why it is not.
struct Plan {
    enum Kind { tensor, skip, error } kind = error;
    std::string message;  // for skip / error
    DType dtype = DType::f32;
    std::string storage;
    Handle mem_type;  // the type H5Dread converts to: the stored width, little-endian
    std::vector<hsize_t> dims;
    std::uint64_t numel = 0;
};

const char* class_name(H5T_class_t c) {
    switch (c) {
        case H5T_INTEGER: return "integer";
        case H5T_FLOAT: return "float";
        case H5T_TIME: return "time";
        case H5T_STRING: return "string";
        case H5T_BITFIELD: return "bitfield";
        case H5T_OPAQUE: return "opaque";
        case H5T_COMPOUND: return "compound";
        case H5T_REFERENCE: return "reference";
        case H5T_ENUM: return "enum";
        case H5T_VLEN: return "variable-length";
        case H5T_ARRAY: return "array";
        default: return "unknown-class";
    }
}

Plan fail(Plan::Kind k, std::string msg) {
    Plan p;
    p.kind = k;
    p.message = std::move(msg);
    return p;
}

// Float layouts fp8kit reads bit for bit (HDF5 could convert others, but not provably exactly).
struct FloatLayout {
    std::size_t size, spos, epos, esize, mpos, msize, bias;
    DType dtype;
};
constexpr FloatLayout kFloats[] = {
    {8, 63, 52, 11, 0, 52, 1023, DType::f64},
    {4, 31, 23, 8, 0, 23, 127, DType::f32},
    {2, 15, 10, 5, 0, 10, 15, DType::f16},
    {2, 15, 7, 8, 0, 7, 127, DType::bf16},  // HDF5 2.0's H5T_FLOAT_BFLOAT16LE
};

// What plan_dataset needs beyond the dataset: where it lives and what the caller accepts.
struct PlanContext {
    hid_t file;
    const std::string& name;    // the dataset's path, for messages about mappings
    const std::string& folder;  // the dump's folder (read only the files named)
    const ReadOptions& opts;
    bool untagged_codes = false;  // validate: 1-byte / 2-byte integers without 'dtype' are codes / bf16
};

// The float layout's fields that decide a value: every one of them must be IEEE's (or bfloat16's),
// or the bits would be read as something they are not (an H5T_NORM_NONE float stores its leading
// mantissa bit; a moved sign, exponent or mantissa, a bias, a precision or offset that leaves
// padding bits all change the value).
const FloatLayout* float_layout(hid_t type, std::string& why) {
    const std::size_t size = H5Tget_size(type);
    std::size_t spos, epos, esize, mpos, msize;
    H5Tget_fields(type, &spos, &epos, &esize, &mpos, &msize);
    const std::size_t bias = H5Tget_ebias(type);
    const H5T_norm_t norm = H5Tget_norm(type);
    const std::size_t precision = H5Tget_precision(type);
    const int offset = H5Tget_offset(type);
    const H5T_order_t order = H5Tget_order(type);
    for (const auto& f : kFloats)
        if (f.size == size && f.spos == spos && f.epos == epos && f.esize == esize && f.mpos == mpos &&
            f.msize == msize && f.bias == bias && norm == H5T_NORM_IMPLIED && precision == 8 * size && offset == 0 &&
            (order == H5T_ORDER_LE || order == H5T_ORDER_BE))
            return &f;
    why = fmt::format(
        "unsupported dtype: {}-byte float with sign bit {}, {} exponent bits at {}, {} mantissa "
        "bits at {}, bias {}, {} normalisation, precision {} at offset {}{}: not an IEEE or "
        "bfloat16 layout, so its bits are not read",
        size, spos, esize, epos, msize, mpos, bias,
        norm == H5T_NORM_IMPLIED  ? "implied"
        : norm == H5T_NORM_MSBSET ? "msb-set"
                                  : "no",
        precision, offset, order == H5T_ORDER_LE || order == H5T_ORDER_BE ? "" : ", mixed byte order");
    return nullptr;
}

Plan plan_dataset(hid_t dset, const PlanContext& ctx) {
    // 1. Where the bytes are: nothing outside the named file is opened (hdf5_outside.hpp).
    {
        Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
        if (!dcpl.ok()) return fail(Plan::error, "cannot read the storage layout: " + hdf5_detail());
        const Outside out =
            check_outside(ctx.file, dcpl.get(), ctx.name, ctx.folder, ctx.opts.allow_external_in_dump_folder);
        if (out.refused) return fail(Plan::skip, out.message);
    }
    Handle type(H5Dget_type(dset), H5Tclose);
    if (!type.ok()) return fail(Plan::error, "cannot read the datatype: " + hdf5_detail());
    const H5T_class_t cls = H5Tget_class(type.get());
    const std::size_t size = H5Tget_size(type.get());
    const auto attr = string_attr(dset, "dtype");
    Plan p;
    if (cls == H5T_FLOAT) {
        std::string why;
        const FloatLayout* hit = float_layout(type.get(), why);
        if (!hit) return fail(Plan::error, why);
        p.dtype = hit->dtype;
        p.storage = fmt::format("float{}", 8 * size);
        if (p.dtype == DType::bf16) p.storage = "bfloat16";
        p.mem_type = Handle(H5Tcopy(type.get()), H5Tclose);
        H5Tset_order(p.mem_type.get(), H5T_ORDER_LE);
    } else if (cls == H5T_INTEGER || cls == H5T_OPAQUE) {
        const bool is_int = cls == H5T_INTEGER;
        const std::string stored =
            is_int ? fmt::format("{}int{}", H5Tget_sign(type.get()) == H5T_SGN_2 ? "" : "u", 8 * size)
                   : fmt::format("opaque{}", size);
        std::optional<std::string> spec = attr;
        std::string implied;
        const bool untagged_codes = !attr && ctx.untagged_codes && (size == 1 || size == 2);
        // h5py saves an ml_dtypes array (bfloat16, float8_*) as opaque data of its element size,
        // without a tag or attribute: the tag names the type when a writer set one, and 2-byte
        // opaque data can only be bfloat16 (float16 is stored as an HDF5 float). One byte is
        // ambiguous between the FP8 formats: a failed input that says how to tag it.
        if (!spec && !is_int && !untagged_codes) {
            spec = opaque_type_name(type.get(), size, implied);
            if (!spec)
                return fail(Plan::error, fmt::format("{} data without a 'dtype' attribute: which 8-bit format? Tag it, "
                                                     "e.g. in h5py: dataset.attrs['dtype'] = 'float8_e4m3fn' (or "
                                                     "float8_e5m2, e4m3fnuz, e5m2fnuz, e8m0, float4_e2m1fn, "
                                                     "float6_e2m3fn, float6_e3m2fn, float8_e3m4, float8_e4m3b11fnuz, "
                                                     "float8_e4m3)",
                                                     stored));
        }
        if (untagged_codes) {
            p.dtype = size == 1 ? DType::e4m3 : DType::bf16;  // stored bytes kept: codes / bf16 bits
            p.storage = stored;
            p.mem_type = Handle(H5Tcopy(type.get()), H5Tclose);
            if (is_int) H5Tset_order(p.mem_type.get(), H5T_ORDER_LE);
        } else if (!spec)
            return fail(Plan::skip, fmt::format("{} dataset without a 'dtype' attribute naming a float "
                                                "type: not analysed",
                                                stored));
        const std::optional<std::string>& attr_or_tag = spec;
        std::optional<DType> d;
        if (untagged_codes) {
            // untagged codes, planned above
        } else if (const auto f = parse_format(*attr_or_tag)) {
            switch (*f) {
                case Format::e4m3: d = DType::e4m3; break;
                case Format::e5m2: d = DType::e5m2; break;
                case Format::e4m3fnuz: d = DType::e4m3fnuz; break;
                case Format::e5m2fnuz: d = DType::e5m2fnuz; break;
                case Format::e8m0: d = DType::e8m0; break;
                case Format::e2m1: d = DType::e2m1; break;
                case Format::e2m3: d = DType::e2m3; break;
                case Format::e3m2: d = DType::e3m2; break;
                case Format::e3m4: d = DType::e3m4; break;
                case Format::e4m3b11fnuz: d = DType::e4m3b11fnuz; break;
                case Format::e4m3ieee: d = DType::e4m3ieee; break;
            }
        } else if (const auto w = parse_wide(*attr_or_tag)) {
            d = *w == Wide::f64   ? DType::f64
                : *w == Wide::f32 ? DType::f32
                : *w == Wide::f16 ? DType::f16
                                  : DType::bf16;
        }
        if (!untagged_codes) {
            if (!d)
                return fail(Plan::error,
                            fmt::format("unsupported dtype '{}' ({} of {} data)", io::quoted(*attr_or_tag, 64),
                                        attr ? "attribute 'dtype'" : "opaque tag", stored));
            if (stored_size(*d) != size)
                return fail(Plan::error, fmt::format("{} dtype='{}' needs {}-byte elements but the data is {}",
                                                     attr ? "attribute" : "opaque tag", io::quoted(*attr_or_tag, 64),
                                                     stored_size(*d), stored));
            p.dtype = *d;
            p.storage = stored + implied;
        }
        // Same type in little-endian order: bytes are swapped if needed, values never converted
        // (a signed int16 holding bf16 bits must not be clipped to unsigned).
        p.mem_type = Handle(H5Tcopy(type.get()), H5Tclose);
        if (is_int) H5Tset_order(p.mem_type.get(), H5T_ORDER_LE);
    } else {
        return fail(Plan::skip, fmt::format("{} dataset is not a tensor: not analysed", class_name(cls)));
    }

    Handle space(H5Dget_space(dset), H5Sclose);
    if (!space.ok()) return fail(Plan::error, "cannot read the dataspace: " + hdf5_detail());
    if (H5Sget_simple_extent_type(space.get()) == H5S_NULL) return fail(Plan::error, "empty dataset (null dataspace)");
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) return fail(Plan::error, "cannot read the shape: " + hdf5_detail());
    p.dims.resize(rank);
    H5Sget_simple_extent_dims(space.get(), p.dims.data(), nullptr);
    // 2. What the header claims, refused before anything is read when it cannot be or is too much.
    p.numel = 1;
    bool wraps = false;
    for (hsize_t d : p.dims) wraps |= mul_overflows(p.numel, d, p.numel);
    std::uint64_t bytes = 0;
    wraps = wraps || mul_overflows(p.numel, size, bytes);
    if (wraps)
        return fail(Plan::error,
                    fmt::format("shape [{}] of {}-byte elements claims more than 2^64 bytes: corrupt header",
                                fmt::join(p.dims, ", "), size));
    if (p.numel == 0) return fail(Plan::error, fmt::format("empty dataset (shape [{}])", fmt::join(p.dims, ", ")));
    if (p.numel > ctx.opts.max_elements)
        return fail(Plan::error, fmt::format("shape [{}] claims {} elements ({} bytes), over the limit of {} elements "
                                             "per tensor (--max-elements raises it)",
                                             fmt::join(p.dims, ", "), p.numel, bytes, ctx.opts.max_elements));

    Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
    if (dcpl.ok() && H5Pget_layout(dcpl.get()) == H5D_CHUNKED && rank > 0) {
        // 3. One chunk is decoded whole (by fp8kit or libhdf5): its size is bounded too.
        std::vector<hsize_t> chunk(rank, 1);
        std::uint64_t cbytes = size;
        bool cwraps = H5Pget_chunk(dcpl.get(), rank, chunk.data()) < 0;
        for (hsize_t c : chunk) cwraps |= mul_overflows(cbytes, c, cbytes);
        if (cwraps || cbytes > ctx.opts.max_chunk_bytes)
            return fail(Plan::error, fmt::format("chunks of shape [{}] hold {} bytes each, over the limit of {} MiB "
                                                 "(--max-chunk-mib raises it)",
                                                 fmt::join(chunk, ", "),
                                                 cwraps ? std::string("more than 2^64") : std::to_string(cbytes),
                                                 ctx.opts.max_chunk_bytes >> 20));
    }
    const int nfilters = dcpl.ok() ? H5Pget_nfilters(dcpl.get()) : 0;
    for (int i = 0; i < nfilters; ++i) {
        unsigned flags = 0, config = 0;
        std::size_t nelmts = 0;
        char fname[128] = {};
        const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelmts, nullptr,
                                               sizeof fname, fname, &config);
        if (id < 0) return fail(Plan::error, "cannot read the filter pipeline: " + hdf5_detail());
        if (H5Zfilter_avail(id) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            return fail(Plan::error, fmt::format("compressed with HDF5 filter {} ('{}'), which this HDF5 cannot "
                                                 "decode: install the filter plugin and set HDF5_PLUGIN_PATH",
                                                 id, fname));
        }
    }
    p.kind = Plan::tensor;
    return p;
}

// Where a listing in a child process reports progress (one byte per object), -1 elsewhere.
int g_progress_fd = -1;

void report_progress() {
    if (g_progress_fd >= 0) {
        const char dot = '.';
        (void)!::write(g_progress_fd, &dot, 1);
    }
}

class Hdf5Source final : public Source {
public:
    // Lists every dataset of the file, or only `only` (a dataset path: validate's file.h5:/x).
    // `raw`: read() delivers the stored little-endian elements (FP8 codes not decoded) and
    // integers without a 'dtype' attribute are read as codes (1 byte) or bfloat16 bits (2 bytes).
    Hdf5Source(const std::string& path, const ReadOptions& opts, const std::string& only = "", bool raw = false)
        : opts_(opts), raw_delivery_(raw) {
        open_file(path);
        if (!only.empty()) {
            const std::string bad = check_link_path(file_.get(), only);
            if (!bad.empty()) throw DumpError(path, only, bad);
            H5O_info_t info{};
            if (H5Oget_info_by_name2(file_.get(), only.c_str(), &info, H5O_INFO_BASIC, dapl_.get()) < 0 ||
                info.type != H5O_TYPE_DATASET)
                throw DumpError(path, only,
                                "not a dataset (or reached through an external link, which "
                                "is not followed: fp8kit reads only the files named)");
            list(only);
            return;
        }
        // Each object once, however many hard links reach it; no soft or external link followed.
        const std::string why = walk_datasets(
            file_.get(),
            [&](hid_t parent, const std::string& link, const std::string& full) { list(full, parent, link); },
            report_progress);
        if (!why.empty()) errors_.push_back({path, "", why});
    }

    // The file with the listing a child process made of it (listing_crashes): not listed again.
    Hdf5Source(const std::string& path, const ReadOptions& opts, Listing listed) : opts_(opts) {
        open_file(path);
        tensors_ = std::move(listed.tensors);
        errors_ = std::move(listed.errors);
        notes_ = std::move(listed.notes);
        for (std::size_t i = 0; i < listed.extents.size() && i < tensors_.size(); ++i)
            if (listed.extents[i].bytes != 0) extents_[tensors_[i].name] = listed.extents[i];
    }

    Listing listing() const {
        Listing l{tensors_, errors_, notes_, {}};
        l.extents.reserve(tensors_.size());
        for (const TensorInfo& t : tensors_) {
            const auto it = extents_.find(t.name);
            l.extents.push_back(it == extents_.end() ? Extent{} : it->second);
        }
        return l;
    }

    ~Hdf5Source() override {
        if (raw_fd_ >= 0) ::close(raw_fd_);
    }

    void read(const TensorInfo& t, const ChunkFn& fn) override {
        silence_hdf5();  // per thread: libhdf5's error stack and its printing are per thread
        if (read_known_extent(t, fn)) return;
        auto err = [&](const std::string& m) { return DumpError(path_, t.name, m); };
        Handle probe(H5Dopen2(file_.get(), t.name.c_str(), dapl_.get()), H5Dclose);
        if (!probe.ok()) throw err("cannot open dataset: " + hdf5_detail());
        Plan plan = plan_dataset(probe.get(), context(t.name));
        if (plan.kind != Plan::tensor) throw err(plan.message);
        if (plan.dtype != t.dtype) throw err("dataset changed since it was listed");
        const int rank = static_cast<int>(plan.dims.size());
        std::vector<hsize_t> chunk(rank, 1);
        {
            Handle dcpl(H5Dget_create_plist(probe.get()), H5Pclose);
            if (rank > 0 && H5Pget_layout(dcpl.get()) == H5D_CHUNKED) H5Pget_chunk(dcpl.get(), rank, chunk.data());
        }
        // fp8kit's own readers first (chunk tasks on the thread pool), on the handle already open.
        if (runs_ && read_fill_run(probe.get(), plan, fn)) return;
        if (runs_ && read_sparse_runs(t, probe.get(), plan, chunk, fn)) return;
        if (rank > 0 && read_chunks_directly(t, probe.get(), plan, chunk, fn)) return;
        if (read_contiguous_directly(t, probe.get(), plan, fn)) return;

        const std::size_t budget = elements_per_read(plan.dtype, opts_);
        const std::size_t ssize = stored_size(plan.dtype);
        Handle dapl = confined_access(folder_);

        // Slabs: fixed indices in dims < k, a run of L along dim k (a multiple of the chunk edge
        // when possible), all of dims > k. Each slab is contiguous in row-major order.
        int k = 0;
        std::uint64_t inner = 1;  // elements of dims > k
        if (rank > 0) {
            k = rank - 1;
            for (int d = 0; d < rank; ++d) {
                std::uint64_t rest = 1;
                for (int j = d + 1; j < rank; ++j) rest *= plan.dims[j];
                if (rest * std::min<hsize_t>(chunk[d], plan.dims[d]) <= budget) {
                    k = d;
                    break;
                }
            }
            for (int j = k + 1; j < rank; ++j) inner *= plan.dims[j];
        }
        hsize_t run = 1;
        if (rank > 0) {
            const hsize_t edge = std::min<hsize_t>(chunk[k], plan.dims[k]);
            const hsize_t fit = std::max<std::uint64_t>(1, budget / inner);
            run = fit >= edge ? fit / edge * edge : fit;
            run = std::min<hsize_t>(run, plan.dims[k]);
        }
        // Slabs revisit chunks only when an outer dimension (< k) is chunked by more than one
        // index: then the cache holds every chunk below dim k, so each is decompressed once.
        bool revisits = false;
        for (int j = 0; j < k; ++j) revisits |= chunk[j] > 1;
        // ... or when a slab is shorter than a chunk along dim k: then each chunk stays cached
        // until every slab through it is read, and is decompressed once, not once per slab.
        if (rank > 0) revisits |= run < std::min<hsize_t>(chunk[k], plan.dims[k]);
        if (revisits) {
            std::uint64_t chunks = 1, chunk_bytes = ssize;
            for (int j = k; j < rank; ++j) chunks *= (plan.dims[j] + chunk[j] - 1) / chunk[j];
            for (int j = 0; j < rank; ++j) chunk_bytes *= chunk[j];
            const std::uint64_t want = std::min<std::uint64_t>(chunks * chunk_bytes, opts_.hdf5_cache_bytes);
            H5Pset_chunk_cache(dapl.get(), static_cast<std::size_t>(std::max<std::uint64_t>(521, chunks * 7 + 1)),
                               static_cast<std::size_t>(std::max<std::uint64_t>(want, 1 << 20)), 1.0);
        }
        probe.reset();
        Handle dset(H5Dopen2(file_.get(), t.name.c_str(), dapl.get()), H5Dclose);
        if (!dset.ok()) throw err("cannot open dataset: " + hdf5_detail());
        Handle fspace(H5Dget_space(dset.get()), H5Sclose);
        // A compact dataset's bytes live in its object header. libhdf5 1.10 trusts the header's
        // size field and reads past its own buffer when a corrupt file claims fewer bytes than
        // the shape needs (found by tests/corrupt under AddressSanitizer), so check first.
        {
            Handle dcpl(H5Dget_create_plist(dset.get()), H5Pclose);
            Handle ftype(H5Dget_type(dset.get()), H5Tclose);
            if (dcpl.ok() && ftype.ok() && H5Pget_layout(dcpl.get()) == H5D_COMPACT) {
                const hsize_t stored = H5Dget_storage_size(dset.get());
                const std::uint64_t need = plan.numel * static_cast<std::uint64_t>(H5Tget_size(ftype.get()));
                if (stored < need)
                    throw err(
                        fmt::format("compact dataset stores {} bytes but its shape and type need {}: corrupt file",
                                    static_cast<std::uint64_t>(stored), need));
            }
        }

        const std::uint64_t max_run = rank > 0 ? run * inner : 1;
        buf_.resize(static_cast<std::size_t>(max_run) * ssize);
        std::vector<hsize_t> start(rank, 0), count(rank, 1);
        for (int j = k + 1; j < rank; ++j) count[j] = plan.dims[j];
        std::uint64_t first = 0;
        while (first < plan.numel) {
            std::uint64_t n = 1;
            if (rank > 0) {
                count[k] = std::min<hsize_t>(run, plan.dims[k] - start[k]);
                n = count[k] * inner;
                if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr) < 0)
                    throw err("cannot select elements: " + hdf5_detail());
            }
            // The memory space has the selection's own shape: libhdf5 then copies whole runs
            // (a 1-D memory space against an n-D selection goes element-run by element-run
            // through its general iterator, several times slower).
            Handle mspace(rank > 0 ? H5Screate_simple(rank, count.data(), nullptr) : H5Screate(H5S_SCALAR), H5Sclose);
            if (H5Dread(dset.get(), plan.mem_type.get(), rank > 0 ? mspace.get() : H5S_ALL,
                        rank > 0 ? fspace.get() : H5S_ALL, H5P_DEFAULT, buf_.data()) < 0)
                throw err(fmt::format("cannot read elements {}..{}: {}", first, first + n - 1, hdf5_detail()));
            emit(plan.dtype, buf_.data(), static_cast<std::size_t>(n), first, scratch_, fn);
            first += n;
            if (rank > 0) {
                // Advance: along dim k, then carry into the outer dims.
                start[k] += count[k];
                for (int d = k; d > 0 && start[d] >= plan.dims[d]; --d) {
                    start[d] = 0;
                    ++start[d - 1];
                }
            }
        }
    }

    std::shared_ptr<const void> map(const TensorInfo& t) override {
        const auto it = extents_.find(t.name);
        // Raw delivery (array_file's validate inputs) hands over the stored elements as they are,
        // which is what the mapping holds: mapped too, FP8 codes excepted as in both modes.
        if (fp8_format(t.dtype) || it == extents_.end()) return nullptr;
        const Extent& e = it->second;
        std::uint64_t bytes = 0;
        if (fd() < 0 || user_block() != 0 || mul_overflows(t.numel, stored_size(t.dtype), bytes) || bytes != e.bytes ||
            e.addr > file_size_ || bytes > file_size_ - e.addr)
            return nullptr;
        return map_extent(fd(), e.addr, bytes);
    }

    // Straight into `dest` where the stored bytes are the delivered ones: the chunk tasks and the
    // contiguous preads of the direct paths write there on the workers (into_); what libhdf5
    // reads (other layouts and filters) comes through read() and is copied on this thread.
    void read_into(const TensorInfo& t, void* dest, const PlacedFn& placed) override {
        if (raw_delivery_ || fp8_format(t.dtype)) return Source::read_into(t, dest, placed);
        Into into{static_cast<unsigned char*>(dest), &placed};
        struct Reset {
            Into*& at;
            ~Reset() { at = nullptr; }
        } reset{into_};
        into_ = &into;
        const std::size_t esize = wide_size(t.wide);
        read(t, [&](const Chunk& c) {
            std::memcpy(into.dest + c.first * esize, c.bits, c.count * esize);
            if (placed) placed(c.first, c.count);
        });
    }

private:
    // The value chunks never written read as: the fill value when one is defined, else zeros
    // (what H5Dread gives; tests/dump/test_hdf5_chunks.cpp compares the two).
    static std::vector<unsigned char> fill_value(hid_t dcpl, const Plan& plan) {
        std::vector<unsigned char> fill(stored_size(plan.dtype), 0);
        H5D_fill_value_t fill_state = H5D_FILL_VALUE_UNDEFINED;
        if (H5Pfill_value_defined(dcpl, &fill_state) >= 0 && fill_state != H5D_FILL_VALUE_UNDEFINED)
            H5Pget_fill_value(dcpl, plan.mem_type.get(), fill.data());
        H5Eclear2(H5E_DEFAULT);
        return fill;
    }

    // read_runs: a chunked dataset with no chunk written is its fill value numel times, delivered
    // as one Chunk with repeat = numel (O(1): a 2^40-element header costs nothing to read). False,
    // having read nothing, when any chunk is written or the layout is not chunked.
    bool read_fill_run(hid_t dset, const Plan& plan, const ChunkFn& fn) {
        Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
        if (!dcpl.ok() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED || plan.numel < 2) return false;
        // The bytes of every allocated chunk (H5D__chunk_allocated: one pass over the chunk index,
        // no data read); 0 only when nothing was ever written.
        if (H5Dget_storage_size(dset) != 0) return false;
        H5Eclear2(H5E_DEFAULT);
        const std::vector<unsigned char> fill = fill_value(dcpl.get(), plan);
        const std::uint64_t n = plan.numel;
        emit(plan.dtype, fill.data(), 1, 0, scratch_, [&](const Chunk& c) {
            Chunk run = c;
            run.repeat = n;
            fn(run);
        });
        return true;
    }

    // The filters of `dcpl` as fp8kit decodes them (deflate, shuffle); false where another
    // filter (a plugin) is in the pipeline: then libhdf5 decodes.
    static bool own_pipeline(hid_t dcpl, std::vector<FilterStep>& pipeline) {
        const int nfilters = H5Pget_nfilters(dcpl);
        if (nfilters < 0 || nfilters > 2) return false;
        for (int i = 0; i < nfilters; ++i) {
            unsigned flags = 0, config = 0, cd[4] = {};
            std::size_t ncd = 4;
            const H5Z_filter_t id =
                H5Pget_filter2(dcpl, static_cast<unsigned>(i), &flags, &ncd, cd, 0, nullptr, &config);
            if (id == H5Z_FILTER_DEFLATE)
                pipeline.push_back({FilterStep::deflate, 1});
            else if (id == H5Z_FILTER_SHUFFLE && ncd >= 1)
                pipeline.push_back({FilterStep::shuffle, cd[0]});
            else
                return false;
        }
        return true;
    }

    // read_runs on a chunked dataset with some chunks written (at most kLocateMax) whose chunks
    // hold whole rows (every dimension but the first spans the dataset, as for 1-D data): each
    // stretch of rows no chunk covers is one fill-value run (Chunk::repeat), in O(1) however many
    // elements the header declares; the written chunks are read and decoded in row order. The work
    // follows the chunks written, not the declared size (a 2^40-element dataset with one chunk
    // written: one chunk's work). False, having read nothing, where this does not apply.
    bool read_sparse_runs(const TensorInfo& t, hid_t dset, const Plan& plan, const std::vector<hsize_t>& chunk,
                          const ChunkFn& fn) {
        constexpr hsize_t kLocateMax = 1024;
        const int rank = static_cast<int>(plan.dims.size());
        Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
        Handle ftype(H5Dget_type(dset), H5Tclose);
        Handle space(H5Dget_space(dset), H5Sclose);
        std::vector<FilterStep> pipeline;
        if (rank < 1 || !dcpl.ok() || !ftype.ok() || !space.ok() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED ||
            H5Tequal(ftype.get(), plan.mem_type.get()) <= 0 || !own_pipeline(dcpl.get(), pipeline) || fd() < 0 ||
            user_block() != 0 || chunk[0] == 0)
            return false;
        std::uint64_t inner = 1, chunk_elems = 1, chunk_bytes = 0;
        bool overflow = false;
        for (int d = 1; d < rank; ++d) {
            if (chunk[d] != plan.dims[d]) return false;  // not whole rows
            overflow |= mul_overflows(inner, plan.dims[d], inner);
        }
        overflow |= mul_overflows(chunk[0], inner, chunk_elems);
        overflow |= mul_overflows(chunk_elems, stored_size(plan.dtype), chunk_bytes);
        const hsize_t grid0 = (plan.dims[0] + chunk[0] - 1) / chunk[0];
        hsize_t written = 0;
        if (overflow || inner == 0 || chunk_bytes > opts_.max_chunk_bytes ||
            H5Dget_num_chunks(dset, space.get(), &written) < 0 || written > kLocateMax || written >= grid0) {
            H5Eclear2(H5E_DEFAULT);
            return false;  // a size that does not add up, many chunks written, or none missing
        }
        // 1. Where the written chunks are (H5Dget_chunk_info walks the index to the k-th chunk:
        // at most kLocateMax^2 / 2 steps), sorted by row.
        struct At {
            hsize_t row;
            std::uint64_t addr, size;
            unsigned mask;
        };
        std::vector<At> at;
        std::vector<hsize_t> offset(rank);
        for (hsize_t k = 0; k < written; ++k) {
            Located c;
            if (!chunk_info(dset, space.get(), k, offset, c) || offset[0] % chunk[0] != 0 || offset[0] >= plan.dims[0])
                return false;
            at.push_back({offset[0], c.addr, c.size, c.mask});
        }
        std::sort(at.begin(), at.end(), [](const At& a, const At& b) { return a.row < b.row; });
        for (std::size_t k = 1; k < at.size(); ++k)
            if (at[k].row == at[k - 1].row) return false;  // listed twice: leave it to libhdf5
        // 2. In row order: a fill run for each gap, the decoded rows of each written chunk.
        const std::vector<unsigned char> fill = fill_value(dcpl.get(), plan);
        const std::size_t budget = elements_per_read(plan.dtype, opts_);
        const std::size_t ssize = stored_size(plan.dtype);
        std::uint64_t pos = 0;
        auto run_to = [&](std::uint64_t end) {
            if (end <= pos) return;
            const std::uint64_t n = end - pos, first = pos;
            emit(plan.dtype, fill.data(), 1, first, scratch_, [&](const Chunk& c) {
                Chunk run = c;
                run.repeat = n;
                fn(run);
            });
        };
        std::vector<unsigned char> decoded(static_cast<std::size_t>(chunk_bytes));
        for (const At& a : at) {
            run_to(std::uint64_t{a.row} * inner);
            pos = std::max<std::uint64_t>(pos, a.row * inner);
            ChunkTask task;
            task.fd = fd();
            task.offset = a.addr;
            task.size = a.size;
            task.filter_mask = a.mask;
            task.pipeline = &pipeline;
            task.decoded_bytes = decoded.size();
            const std::string bad = run_chunk_task(task, fill, decoded.data());
            if (!bad.empty())
                throw DumpError(path_, t.name, fmt::format("chunk at [{}]: {}: corrupt file", a.row, bad));
            const std::uint64_t rows = std::min<hsize_t>(chunk[0], plan.dims[0] - a.row), n = rows * inner;
            for (std::uint64_t p = 0; p < n; p += budget) {
                const std::size_t m = static_cast<std::size_t>(std::min<std::uint64_t>(budget, n - p));
                emit(plan.dtype, &decoded[static_cast<std::size_t>(p * ssize)], m, pos + p, scratch_, fn);
            }
            pos += n;
        }
        run_to(plan.numel);
        return true;
    }

    void open_file(const std::string& path) {
        silence_hdf5();
        path_ = path;
        folder_ = dump_folder(path);
        dapl_ = confined_access(folder_);
        try {
            io::check_input(path);  // libhdf5 opens by name: a FIFO would block it (io/gate.hpp)
        } catch (const io::InputError& e) {
            throw DumpError(path, "", e.reason);
        }
        Handle fapl(H5Pcreate(H5P_FILE_ACCESS), H5Pclose);
        file_ = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, fapl.get()), H5Fclose);
        if (!file_.ok()) throw DumpError(path, "", "cannot open as HDF5: " + hdf5_detail());
    }

    // Where a contiguous dataset stored as it is delivered (no conversion, no filter, no external
    // file) lies in the file; bytes 0 where that does not apply or libhdf5 cannot say (not
    // allocated: the fill value). Checked against the file's size when read.
    static Extent contiguous_extent(hid_t dset, const Plan& plan) {
        Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
        Handle ftype(H5Dget_type(dset), H5Tclose);
        Extent e;
        if (dcpl.ok() && ftype.ok() && H5Pget_layout(dcpl.get()) == H5D_CONTIGUOUS &&
            H5Pget_external_count(dcpl.get()) == 0 && H5Tequal(ftype.get(), plan.mem_type.get()) > 0 &&
            H5Pget_nfilters(dcpl.get()) == 0) {
            const haddr_t addr = H5Dget_offset(dset);
            const hsize_t stored = H5Dget_storage_size(dset);
            std::uint64_t bytes = 0;
            if (addr != HADDR_UNDEF && !mul_overflows(plan.numel, stored_size(plan.dtype), bytes) && stored == bytes)
                e = Extent{addr, bytes};
        }
        H5Eclear2(H5E_DEFAULT);
        return e;
    }

    // A tensor whose extent the listing learned (extents_) is read from it without opening the
    // dataset again (10^5 tiny datasets: libhdf5's open and attribute reads were half the time).
    bool read_known_extent(const TensorInfo& t, const ChunkFn& fn) {
        const auto it = extents_.find(t.name);
        if (it == extents_.end() || it->second.bytes == 0) return false;
        return read_extent(t, t.dtype, it->second, fn);
    }

    // Contiguous datasets stored as they are delivered: large preads at the address libhdf5
    // gives, by worker threads, a piece of the read budget each, delivered in order (the same
    // pieces for any thread count). Returns false, having read nothing, where this does not
    // apply: then H5Dread does the work.
    bool read_contiguous_directly(const TensorInfo& t, hid_t dset, const Plan& plan, const ChunkFn& fn) {
        const Extent e = contiguous_extent(dset, plan);
        return e.bytes != 0 && read_extent(t, plan.dtype, e, fn);
    }

    bool read_extent(const TensorInfo& t, DType dtype, const Extent& e, const ChunkFn& fn) {
        std::uint64_t bytes = 0;
        const std::size_t ssize = stored_size(dtype);
        if (fd() < 0 || user_block() != 0 || mul_overflows(t.numel, ssize, bytes) || bytes != e.bytes ||
            e.addr > file_size_ || bytes > file_size_ - e.addr)
            return false;  // a size that does not add up: libhdf5 decides
        const std::uint64_t addr = e.addr;
        const std::size_t budget = elements_per_read(dtype, opts_);
        const std::uint64_t pieces = (t.numel + budget - 1) / budget;
        struct Slot {
            std::vector<unsigned char> bytes;
            std::string bad;
        };
        auto piece = [&](std::size_t i) { return std::min<std::uint64_t>(budget, t.numel - i * budget); };
        auto failed = [&](std::size_t i, const std::string& why) {
            return DumpError(
                path_, t.name,
                fmt::format("cannot read elements {}..{}: {}", i * budget, i * budget + piece(i) - 1, why));
        };
        if (bytes <= kReadHere && t.numel <= budget) {  // small: no hand-off to a worker
            unsigned char* at = into_ ? into_->dest : nullptr;
            if (!at) {
                buf_.resize(static_cast<std::size_t>(bytes));
                at = buf_.data();
            }
            if (std::string why = pread_exact(fd(), at, static_cast<std::size_t>(bytes), addr); !why.empty())
                throw failed(0, why);
            if (!into_)
                emit(dtype, at, static_cast<std::size_t>(t.numel), 0, scratch_, fn);
            else if (*into_->placed && t.numel > 0)
                (*into_->placed)(0, static_cast<std::size_t>(t.numel));
            return true;
        }
        const std::size_t window = parallel::default_window();
        std::vector<Slot> slots(window);
        if (into_) {  // read_into: each worker preads its piece where it belongs, then places it
            const int file = fd();
            parallel::ordered(
                static_cast<std::size_t>(pieces), window, [](std::size_t, std::size_t) {},
                [&](std::size_t i, std::size_t s) {
                    const std::uint64_t at = i * budget * ssize;
                    slots[s].bad =
                        pread_exact(file, into_->dest + at, static_cast<std::size_t>(piece(i) * ssize), addr + at);
                    if (slots[s].bad.empty() && *into_->placed)
                        (*into_->placed)(i * budget, static_cast<std::size_t>(piece(i)));
                },
                [&](std::size_t i, std::size_t s) {
                    if (!slots[s].bad.empty()) throw failed(i, slots[s].bad);
                });
            return true;
        }
        parallel::ordered(
            static_cast<std::size_t>(pieces), window, [](std::size_t, std::size_t) {},
            [&](std::size_t i, std::size_t s) {
                slots[s].bytes.resize(static_cast<std::size_t>(piece(i) * ssize));
                slots[s].bad =
                    pread_exact(fd(), slots[s].bytes.data(), slots[s].bytes.size(), addr + i * budget * ssize);
            },
            [&](std::size_t i, std::size_t s) {
                if (!slots[s].bad.empty()) throw failed(i, slots[s].bad);
                emit(dtype, slots[s].bytes.data(), static_cast<std::size_t>(piece(i)), i * budget, scratch_, fn);
            });
        return true;
    }

    // Chunked datasets compressed with deflate and/or shuffle (what h5py and torch dumps use), or
    // not filtered, are read as chunk tasks (chunk_task.hpp): the chunks' addresses come from
    // libhdf5 on this thread, worker threads pread and decode them (hdf5_filters.cpp demands that
    // each chunk decode to exactly its size: libhdf5 1.10 does not check, and over-reads its own
    // buffer on a short chunk), and the decoded chunks come back in chunk order, so what is
    // delivered never depends on the thread count. Slabs are whole rows of chunks along dimension
    // 0, so each chunk is decoded once. Returns false, having read nothing, where this does not
    // apply (other filters, a type conversion, or a row of chunks over 64 MiB): then H5Dread does
    // the work.
    bool read_chunks_directly(const TensorInfo& t, hid_t dset, const Plan& plan, const std::vector<hsize_t>& chunk,
                              const ChunkFn& fn) {
        auto err = [&](const std::string& m) { return DumpError(path_, t.name, m); };
        Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
        Handle ftype(H5Dget_type(dset), H5Tclose);
        if (!dcpl.ok() || !ftype.ok() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return false;
        if (H5Tequal(ftype.get(), plan.mem_type.get()) <= 0) return false;
        // Unfiltered chunks too: libhdf5's H5Dread over many small chunks builds a map entry per
        // chunk (2^20 one-element chunks: 6.7 GB and 35 s), where this path holds a few chunks.
        std::vector<FilterStep> pipeline;
        if (!own_pipeline(dcpl.get(), pipeline)) return false;
        const int rank = static_cast<int>(plan.dims.size());
        const std::size_t ssize = stored_size(plan.dtype);
        // Sizes from a possibly corrupt layout message: any product that overflows 64 bits, or a
        // row of chunks over the limit, leaves the dataset to H5Dread.
        std::uint64_t inner = 1, chunk_elems = 1, row_elems = 0, row_bytes = 0, chunk_total = 0;
        bool overflow = false;
        for (int d = 1; d < rank; ++d) overflow |= mul_overflows(inner, plan.dims[d], inner);
        for (int d = 0; d < rank; ++d) overflow |= mul_overflows(chunk_elems, chunk[d], chunk_elems);
        overflow |= mul_overflows(std::min<hsize_t>(chunk[0], plan.dims[0]), inner, row_elems);
        overflow |= mul_overflows(row_elems, ssize, row_bytes);
        overflow |= mul_overflows(chunk_elems, ssize, chunk_total);
        constexpr std::uint64_t kMaxRowBytes = std::uint64_t(64) << 20;
        if (overflow || chunk_elems == 0 || row_bytes > std::max<std::uint64_t>(kMaxRowBytes, opts_.chunk_bytes) ||
            chunk_total > opts_.max_chunk_bytes)
            return false;
        const std::size_t chunk_bytes = static_cast<std::size_t>(chunk_elems * ssize);
        // Chunks never written read as the fill value.
        const std::vector<unsigned char> fill = fill_value(dcpl.get(), plan);

        std::vector<hsize_t> grid(rank);
        std::uint64_t per_row = 1;  // chunks in one row of the grid (dims 1..rank-1)
        for (int d = 0; d < rank; ++d) grid[d] = (plan.dims[d] + chunk[d] - 1) / chunk[d];
        for (int d = 1; d < rank; ++d) per_row *= grid[d];
        const std::uint64_t nchunks = per_row * grid[0];
        const std::vector<Located> located = locate_chunks(dset, grid, chunk, nchunks);
        const std::size_t budget = elements_per_read(plan.dtype, opts_);
        // Several rows of chunks per slab when rows are small (2^20 one-element chunks would
        // otherwise make 2^20 deliveries of one element), as many as the budget holds.
        const std::uint64_t row_span = std::max<std::uint64_t>(1, std::min<hsize_t>(chunk[0], plan.dims[0]) * inner);
        const hsize_t rows_per_slab = std::max<std::uint64_t>(1, budget / row_span);

        // Per slot of the window: the task, its chunk's grid offset, the stored bytes when this
        // thread read them, and the decoded chunk.
        struct Slot {
            ChunkTask task;
            std::vector<hsize_t> offset;
            std::vector<unsigned char> stored, decoded;
            std::string bad;
        };
        const std::size_t window = parallel::default_window();
        std::vector<Slot> slots(window);
        auto where = [&](const std::vector<hsize_t>& offset) {
            return fmt::format("chunk at [{}]", fmt::join(offset, ", "));
        };
        // 1. On this thread, in chunk order: where chunk i is (libhdf5 calls stay here).
        auto prepare = [&](std::size_t i, std::size_t s) {
            Slot& sl = slots[s];
            sl.offset.assign(rank, 0);
            std::uint64_t rest = i % per_row;
            sl.offset[0] = (i / per_row) * chunk[0];
            for (int d = rank - 1; d >= 1; --d) {
                sl.offset[d] = (rest % grid[d]) * chunk[d];
                rest /= grid[d];
            }
            sl.task = ChunkTask{};
            sl.task.pipeline = &pipeline;
            sl.task.decoded_bytes = chunk_bytes;
            sl.bad.clear();
            if (!located.empty()) {
                const Located& at = located[i];
                sl.task.fd = fd();
                sl.task.offset = at.addr;
                sl.task.size = at.size;
                sl.task.filter_mask = at.mask;
                return;
            }
            // Too many chunks to list their addresses (libhdf5 1.10 finds the i-th by walking the
            // index): the bytes are read here. H5Dget_chunk_storage_size looks the chunk up in the
            // index (H5D__chunk_lookup: a B-tree search); H5Dget_chunk_info_by_coord in 1.10 walks
            // every chunk of the index instead, quadratic in the number of chunks. A chunk never
            // written is the fill value: libhdf5 1.10 then fails with "chunk storage is not
            // allocated" (H5Dchunk.c, H5D__get_chunk_storage_size); any other failure is an error.
            hsize_t stored = 0;
            if (H5Dget_chunk_storage_size(dset, sl.offset.data(), &stored) < 0) {
                const std::string why = hdf5_detail();
                if (why.rfind("chunk storage is not allocated", 0) != 0)
                    throw err(fmt::format("cannot locate {}: {}", where(sl.offset), why));
                stored = 0;
            }
            if (stored == 0) return;
            if (stored > (std::uint64_t(4) << 30))
                throw err(fmt::format("{} claims {} stored bytes: corrupt file", where(sl.offset),
                                      static_cast<std::uint64_t>(stored)));
            sl.stored.resize(static_cast<std::size_t>(stored));
            std::uint32_t read_mask = 0;
            if (H5Dread_chunk(dset, H5P_DEFAULT, sl.offset.data(), &read_mask, sl.stored.data()) < 0)
                throw err(fmt::format("cannot read {}: {}", where(sl.offset), hdf5_detail()));
            sl.task.stored = sl.stored.data();
            sl.task.size = stored;
            sl.task.filter_mask = read_mask;
        };
        // Copies the part of decoded chunk `sl` inside the dataset to `out`, whose row 0 is the
        // chunk's row `base_row` (runs along the last dimension). Any thread: nothing shared.
        auto scatter = [&](const Slot& sl, unsigned char* out, hsize_t base_row) {
            std::vector<hsize_t> ext(rank), row(rank, 0);
            for (int d = 0; d < rank; ++d) ext[d] = std::min<hsize_t>(chunk[d], plan.dims[d] - sl.offset[d]);
            const hsize_t run = ext[rank - 1];
            for (;;) {
                std::uint64_t src = 0, dst = 0;
                for (int d = 0; d < rank - 1; ++d) {
                    src = src * chunk[d] + row[d];
                    dst = dst * plan.dims[d] + (d == 0 ? base_row + row[0] : sl.offset[d] + row[d]);
                }
                src *= chunk[rank - 1];
                dst = dst * plan.dims[rank - 1] + (rank == 1 ? base_row : sl.offset[rank - 1]);
                std::memcpy(out + dst * ssize, &sl.decoded[static_cast<std::size_t>(src * ssize)],
                            static_cast<std::size_t>(run * ssize));
                int d = rank - 2;
                while (d >= 0 && ++row[d] == ext[d]) row[d--] = 0;
                if (d < 0) break;
            }
        };
        // read_into: a chunk that spans every dimension but the first holds whole rows of the
        // tensor, one contiguous range of `dest`: a worker places it (and decodes straight into
        // `dest` when the chunk lies inside the dataset). Other chunk shapes are scattered into
        // `dest` by the workers and placed slab by slab on this thread.
        bool whole_rows = per_row == 1;
        for (int d = 1; d < rank; ++d) whole_rows &= chunk[d] == plan.dims[d];
        // 2. On a worker: read and decode (read_into: into `dest`).
        auto work = [&](std::size_t, std::size_t s) {
            Slot& sl = slots[s];
            if (into_ && whole_rows) {
                const hsize_t rows = std::min<hsize_t>(chunk[0], plan.dims[0] - sl.offset[0]);
                unsigned char* at = into_->dest + sl.offset[0] * inner * ssize;
                if (rows == chunk[0]) {
                    sl.bad = run_chunk_task(sl.task, fill, at);
                } else {
                    sl.decoded.resize(chunk_bytes);
                    sl.bad = run_chunk_task(sl.task, fill, sl.decoded.data());
                    if (sl.bad.empty())
                        std::memcpy(at, sl.decoded.data(), static_cast<std::size_t>(rows * inner * ssize));
                }
                if (sl.bad.empty() && *into_->placed)
                    (*into_->placed)(sl.offset[0] * inner, static_cast<std::size_t>(rows * inner));
                return;
            }
            sl.decoded.resize(chunk_bytes);
            sl.bad = run_chunk_task(sl.task, fill, sl.decoded.data());
            if (into_ && sl.bad.empty()) scatter(sl, into_->dest, sl.offset[0]);
        };
        // 3. On this thread, in chunk order: copy the part of the chunk inside the dataset into
        // the slab, and deliver the slab when its last chunk is in (read_into: the workers copied
        // it; place the slab unless they placed its chunks).
        std::uint64_t first = 0, slab_elems = 0;
        auto consume = [&](std::size_t i, std::size_t s) {
            Slot& sl = slots[s];
            if (!sl.bad.empty()) throw err(fmt::format("{}: {}: corrupt file", where(sl.offset), sl.bad));
            const hsize_t c0 = i / per_row, g0 = c0 / rows_per_slab * rows_per_slab;
            const hsize_t g1 = std::min<hsize_t>(grid[0], g0 + rows_per_slab);
            if (i % per_row == 0 && c0 == g0) {  // a slab begins
                const hsize_t r0 = g0 * chunk[0], rows = std::min<hsize_t>((g1 - g0) * chunk[0], plan.dims[0] - r0);
                slab_elems = rows * inner;
                if (!into_) buf_.resize(static_cast<std::size_t>(slab_elems * ssize));
            }
            if (!into_) scatter(sl, buf_.data(), (c0 - g0) * chunk[0]);
            if (i + 1 == std::min<std::uint64_t>(nchunks, g1 * per_row)) {  // the slab's last chunk
                if (into_) {
                    if (!whole_rows && *into_->placed) (*into_->placed)(first, static_cast<std::size_t>(slab_elems));
                } else {
                    for (std::uint64_t p = 0; p < slab_elems; p += budget) {
                        const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(budget, slab_elems - p));
                        emit(plan.dtype, &buf_[static_cast<std::size_t>(p * ssize)], n, first + p, scratch_, fn);
                    }
                }
                first += slab_elems;
            }
        };
        parallel::ordered(static_cast<std::size_t>(nchunks), window, prepare, work, consume);
        return true;
    }

    // Where each chunk's bytes are, in chunk order (row-major over the grid of chunks), so that
    // worker threads pread them; empty when libhdf5 cannot say cheaply or the answer is odd
    // (then the reader's own thread reads each chunk with H5Dread_chunk). libhdf5 1.10 has no
    // call that lists every chunk at once (H5Dchunk_iter is 1.14) and H5Dget_chunk_info finds
    // the k-th chunk by walking the index from the start, so this is done for datasets of at
    // most kLocateMax chunks (kLocateMax^2 / 2 index steps). A file with a user block is left
    // out too (chunk addresses are relative to the HDF5 base address).
    struct Located {
        std::uint64_t addr = 0, size = 0;  // size 0: never written
        unsigned mask = 0;
    };
    // The k-th written chunk (H5Dget_chunk_info): its offset in elements into `offset`, where its
    // bytes are and its filter mask into `out`; false (libhdf5's error cleared) when libhdf5 cannot
    // say or the bytes are not within the file (more than 4 GiB, or past its end).
    bool chunk_info(hid_t dset, hid_t space, hsize_t k, std::vector<hsize_t>& offset, Located& out) {
        unsigned mask = 0;
        haddr_t addr = HADDR_UNDEF;
        hsize_t size = 0;
        if (H5Dget_chunk_info(dset, space, k, offset.data(), &mask, &addr, &size) < 0 || addr == HADDR_UNDEF ||
            size == 0 || size > (std::uint64_t(4) << 30) || addr > file_size_ || size > file_size_ - addr) {
            H5Eclear2(H5E_DEFAULT);
            return false;
        }
        out = Located{addr, size, mask};
        return true;
    }
    std::vector<Located> locate_chunks(hid_t dset, const std::vector<hsize_t>& grid, const std::vector<hsize_t>& chunk,
                                       std::uint64_t nchunks) {
        constexpr std::uint64_t kLocateMax = 1024;
        if (nchunks > kLocateMax || user_block() != 0 || fd() < 0) return {};
        Handle space(H5Dget_space(dset), H5Sclose);
        hsize_t n = 0;
        if (!space.ok() || H5Dget_num_chunks(dset, space.get(), &n) < 0 || n > nchunks) {
            H5Eclear2(H5E_DEFAULT);
            return {};
        }
        const int rank = static_cast<int>(grid.size());
        std::vector<Located> out(static_cast<std::size_t>(nchunks));
        std::vector<hsize_t> offset(rank);
        for (hsize_t k = 0; k < n; ++k) {
            Located c;
            if (!chunk_info(dset, space.get(), k, offset, c)) return {};
            std::uint64_t lin = 0;
            for (int d = 0; d < rank; ++d) {
                if (offset[d] % chunk[d] != 0 || offset[d] / chunk[d] >= grid[d]) return {};
                lin = lin * grid[d] + offset[d] / chunk[d];
            }
            if (out[lin].size != 0) return {};  // listed twice: leave it to libhdf5
            out[lin] = c;
        }
        return out;
    }

    // The file, opened once for pread by the chunk tasks (-1 when it cannot be: then libhdf5 reads).
    int fd() {
        if (!fd_tried_) {
            fd_tried_ = true;
            try {
                io::InputFile f = io::open_input(path_);
                file_size_ = f.size();
                raw_fd_ = f.release();
            } catch (const io::InputError&) {
                raw_fd_ = -1;
            }
        }
        return raw_fd_;
    }

    hsize_t user_block() {
        if (!user_block_) user_block_ = find_user_block();
        return *user_block_;
    }
    hsize_t find_user_block() {
        Handle fcpl(H5Fget_create_plist(file_.get()), H5Pclose);
        hsize_t ub = 0;
        if (!fcpl.ok() || H5Pget_userblock(fcpl.get(), &ub) < 0) {
            H5Eclear2(H5E_DEFAULT);
            return 1;
        }
        return ub;
    }

    // `name`: the dataset's path; opened as `link` of `parent` (default: the path from the file).
    void list(const std::string& name, hid_t parent = -1, const std::string& link = "") {
        Handle d(
            parent < 0 ? H5Dopen2(file_.get(), name.c_str(), dapl_.get()) : H5Dopen2(parent, link.c_str(), dapl_.get()),
            H5Dclose);
        if (!d.ok()) {
            errors_.push_back({path_, name, "cannot open dataset: " + hdf5_detail()});
            return;
        }
        Plan plan = plan_dataset(d.get(), context(name));
        if (plan.kind == Plan::skip) {
            notes_.push_back({path_, name, plan.message});
            return;
        }
        if (plan.kind == Plan::error) {
            errors_.push_back({path_, name, plan.message});
            return;
        }
        TensorInfo t;
        t.file = path_;
        t.name = name;
        t.shape.assign(plan.dims.begin(), plan.dims.end());
        t.numel = plan.numel;
        t.storage = plan.storage;
        t.dtype = plan.dtype;
        t.wide = delivered_as(plan.dtype);
        std::string step_why;
        t.step = step_attr(d.get(), &step_why);
        if (!step_why.empty()) notes_.push_back({path_, name, step_why});
        if (const auto r = string_attr(d.get(), "role")) {
            if (const auto role = parse_role(*r)) {
                t.role = *role;
            } else {
                notes_.push_back({path_, name,
                                  fmt::format("attribute role='{}' is not one of activation, "
                                              "weight, gradient, optimizer_state: guessed from the name",
                                              io::quoted(*r, 64))});
            }
        }
        const bool had_role = t.role != Role::unknown;
        complete_guesses(t);
        if (had_role) t.role_guessed = false;
        H5Eclear2(H5E_DEFAULT);
        if (const Extent e = contiguous_extent(d.get(), plan); e.bytes != 0) extents_[t.name] = e;
        tensors_.push_back(std::move(t));
    }

    PlanContext context(const std::string& name) const {
        return PlanContext{file_.get(), name, folder_, opts_, raw_delivery_};
    }

    // deliver(), or in raw mode the stored elements as they are (Chunk::count stored elements).
    void emit(DType d, const void* stored, std::size_t n, std::uint64_t first, std::vector<std::uint8_t>& scratch,
              const ChunkFn& fn) {
        if (raw_delivery_)
            fn(Chunk{delivered_as(d), stored, n, first});
        else
            deliver(d, stored, n, first, scratch, fn);
    }

    ReadOptions opts_;
    bool raw_delivery_ = false;
    struct Into {
        unsigned char* dest;
        const PlacedFn* placed;
    };
    Into* into_ = nullptr;                                 // read_into in progress: the direct paths write here
    std::unordered_map<std::string, Extent> extents_;      // what listing learned (contiguous_extent)
    static constexpr std::uint64_t kReadHere = 256 << 10;  // read_extent: bytes read on the caller's thread
    std::string folder_;
    Handle dapl_;  // confined_access(folder_): every dataset is opened with it
    Handle file_;
    std::vector<std::uint8_t> buf_, scratch_;
    int raw_fd_ = -1;  // fd(): the file for pread
    bool fd_tried_ = false;
    std::uint64_t file_size_ = 0;
    std::optional<hsize_t> user_block_;
};

}  // namespace

namespace {

// libhdf5 1.10 can crash on corrupt metadata while a file is listed: H5HG_read trusts the size of
// an object in a global heap collection, where variable-length string attributes ('dtype',
// 'role') live, and a flipped byte there makes it copy gigabytes (SIGSEGV inside H5Aread; found
// by tests/corrupt). No API reads such an attribute without that code, so the listing is first
// done in a child process. Returns why the child did not finish, or "" when it did. The child then
// sends its listing after its progress dots (a 'L' and listing_wire.hpp's bytes), put in `listed`,
// so the file is listed once; without a whole listing from the child (it could not open the file,
// or no guard ran) `listed` stays empty and the caller lists the file itself.
#if defined(__unix__)
// One listing in a child process (see listing_crashes): what the parent saw of it.
struct ChildListing {
    bool started = false;  // the pipe could be made and the child forked
    bool hung = false;     // a silence of the limit: the child was killed
    int status = 0;        // waitpid's status when not hung
    bool in_listing = false;
    std::string received;  // the listing's bytes after the 'L'
};

ChildListing list_in_child(const std::string& path, const ReadOptions& opts, const std::string& only, bool raw,
                           bool want_listing) {
    ChildListing out;
    int fds[2];
    if (::pipe(fds) != 0) return out;  // no pipe to spare: list without the guard
    pid_t pid = -1;
    parallel::while_idle([&] { pid = fork(); });  // no pool worker inside the allocator (pool.hpp)
    if (pid == 0) {
        // The child: stdout and stderr to /dev/null, list while reporting progress, and leave
        // without running exit handlers or flushing stdio.
        ::close(fds[0]);
        const int null_fd = ::open("/dev/null", O_WRONLY);
        if (null_fd >= 0) {
            ::dup2(null_fd, STDOUT_FILENO);
            ::dup2(null_fd, STDERR_FILENO);
        }
        // Die of a crash as the kernel delivers it: handlers inherited from the host program
        // (a test framework's, a sanitizer's) would report it as the host's own failure.
        for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT}) std::signal(sig, SIG_DFL);
        g_progress_fd = fds[1];
        try {
            Hdf5Source probe(path, opts, only, raw);
            if (want_listing) {
                const std::string bytes = "L" + encode_listing(probe.listing());
                for (std::size_t at = 0; at < bytes.size();) {
                    const ssize_t n = ::write(fds[1], bytes.data() + at, bytes.size() - at);
                    if (n < 0 && errno == EINTR) continue;
                    if (n <= 0) break;
                    at += static_cast<std::size_t>(n);
                }
            }
        } catch (...) {
            // An error is an answer too: the parent reports it from its own listing.
        }
        _exit(0);
    }
    ::close(fds[1]);
    if (pid < 0) {
        ::close(fds[0]);
        return out;
    }
    out.started = true;
    // Wait for the end of the pipe (the child exited), giving up after a silence of the limit.
    for (;;) {
        pollfd p{fds[0], POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(opts.hdf5_listing_timeout_ms));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            out.hung = true;
            break;
        }
        char buf[65536];
        const ssize_t n = r > 0 ? ::read(fds[0], buf, sizeof buf) : 0;
        if (n <= 0 && !(n < 0 && errno == EINTR)) break;
        for (ssize_t k = 0; k < n; ++k) {  // progress dots, then 'L' and the listing
            if (out.in_listing) {
                out.received.append(buf + k, buf + n);
                break;
            }
            if (buf[k] == 'L') out.in_listing = true;
        }
    }
    ::close(fds[0]);
    if (out.hung) ::kill(pid, SIGKILL);
    while (waitpid(pid, &out.status, 0) < 0) {
        if (errno != EINTR) {
            out.started = false;  // the child's fate is unknown: list without the guard's verdict
            return out;
        }
    }
    return out;
}
#endif

std::string listing_crashes(const std::string& path, const ReadOptions& opts, const std::string& only = "",
                            bool raw = false, std::optional<Listing>* listed = nullptr) {
#if defined(__unix__)
    if (opts.hdf5_listing_timeout_ms == 0) return "";
    // A child that made no progress for the limit is tried once more before the file is called
    // looping: a fork taken while another thread of the host program held a lock the child needs
    // (a sanitizer's allocator: parallel/pool.hpp) or a stalled machine must not turn a sound
    // file into an error. A file that really loops costs twice the limit.
    ChildListing c = list_in_child(path, opts, only, raw, listed != nullptr);
    if (c.started && c.hung) c = list_in_child(path, opts, only, raw, listed != nullptr);
    if (!c.started) return "";
    if (c.hung)
        return fmt::format(
            "libhdf5 made no progress for {} s, twice, while listing the file's objects (a loop "
            "in corrupt metadata): stopped",
            opts.hdf5_listing_timeout_ms / 1000.0);
    const int status = c.status;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
        Listing l;
        if (listed && c.in_listing && decode_listing(c.received, l)) *listed = std::move(l);
        return "";
    }
    if (WIFSIGNALED(status))
        return fmt::format(
            "libhdf5 crashed ({}) while listing the file's objects: its metadata is "
            "corrupt",
            strsignal(WTERMSIG(status)));
    return fmt::format(
        "libhdf5 stopped (exit status {}) while listing the file's objects: its metadata "
        "is corrupt",
        WIFEXITED(status) ? WEXITSTATUS(status) : -1);
#else
    (void)path, (void)opts, (void)only, (void)raw, (void)listed;
    return "";
#endif
}

}  // namespace

std::unique_ptr<Source> open_hdf5(const std::string& path, const ReadOptions& opts) {
    std::optional<Listing> listed;
    const std::string crash = listing_crashes(path, opts, "", false, &listed);
    if (!crash.empty()) throw DumpError(path, "", crash);
    if (listed) return std::make_unique<Hdf5Source>(path, opts, std::move(*listed));
    return std::make_unique<Hdf5Source>(path, opts);
}

std::unique_ptr<Source> open_hdf5_dataset(const std::string& path, const std::string& dataset,
                                          const ReadOptions& opts) {
    silence_hdf5();
    const std::string crash = listing_crashes(path, opts, dataset, true);
    if (!crash.empty()) throw DumpError(path, dataset, crash);
    return std::make_unique<Hdf5Source>(path, opts, dataset, true);
}

}  // namespace fp8kit::dump::detail
