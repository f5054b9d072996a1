// HDF5 dumps: every numeric dataset of any group hierarchy is a tensor.
//
// Only calls whose signature is the same in HDF5 1.10.5 .. 1.14 are used: numbered ones (H5Dopen2,
// H5Ovisit2, H5Pget_filter2, H5Eset_auto2, H5Ewalk2), with H5_USE_110_API (lib/CMakeLists.txt)
// mapping H5O_info_t / H5O_iterate_t to their 1.10 layouts on 1.12+.
#include <hdf5.h>
#if defined(__unix__)
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>
#endif

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>
#include <cstring>
#include <mutex>

#include <fmt/format.h>

#include "io/dump_internal.hpp"
#include "io/hdf5_filters.hpp"

namespace fp8kit::dump::detail {
namespace {

// Owns one hid_t and closes it with the matching H5?close.
class Handle {
public:
    using Closer = herr_t (*)(hid_t);
    Handle() = default;
    Handle(hid_t id, Closer close) : id_(id), close_(close) {}
    Handle(Handle&& o) noexcept : id_(o.id_), close_(o.close_) { o.id_ = -1; }
    Handle& operator=(Handle&& o) noexcept {
        if (this != &o) {
            reset();
            id_ = o.id_;
            close_ = o.close_;
            o.id_ = -1;
        }
        return *this;
    }
    Handle(const Handle&) = delete;
    Handle& operator=(const Handle&) = delete;
    ~Handle() { reset(); }
    void reset() {
        if (id_ >= 0 && close_) close_(id_);
        id_ = -1;
    }
    hid_t get() const { return id_; }
    bool ok() const { return id_ >= 0; }

private:
    hid_t id_ = -1;
    Closer close_ = nullptr;
};

// HDF5 prints its error stack to stderr by default; fp8kit reports errors itself.
void silence_hdf5() {
    static std::once_flag once;
    std::call_once(once, [] { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); });
}

herr_t collect_error(unsigned n, const H5E_error2_t* err, void* data) {
    auto* out = static_cast<std::vector<std::string>*>(data);
    char minor[160] = {};
    H5Eget_msg(err->min_num, nullptr, minor, sizeof minor);
    if (n < 2) out->push_back(err->desc && *err->desc ? fmt::format("{} ({})", err->desc, minor)
                                                    : std::string(minor));
    return 0;
}

// The most specific messages on HDF5's error stack (then cleared), e.g. "truncated file: eof = ...".
std::string hdf5_detail() {
    std::vector<std::string> msgs;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_UPWARD, collect_error, &msgs);
    H5Eclear2(H5E_DEFAULT);
    if (msgs.empty()) return "HDF5 reported no detail";
    std::string s = msgs[0];
    for (std::size_t i = 1; i < msgs.size(); ++i) s += "; " + msgs[i];
    return s;
}

std::optional<std::string> string_attr(hid_t obj, const char* attr) {
    if (H5Aexists(obj, attr) <= 0) return std::nullopt;
    Handle a(H5Aopen(obj, attr, H5P_DEFAULT), H5Aclose);
    if (!a.ok()) return std::nullopt;
    Handle t(H5Aget_type(a.get()), H5Tclose);
    Handle sp(H5Aget_space(a.get()), H5Sclose);
    if (!t.ok() || !sp.ok() || H5Tget_class(t.get()) != H5T_STRING ||
        H5Sget_simple_extent_npoints(sp.get()) != 1)
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

std::optional<std::int64_t> step_attr(hid_t obj) {
    if (H5Aexists(obj, "step") <= 0) return std::nullopt;
    Handle a(H5Aopen(obj, "step", H5P_DEFAULT), H5Aclose);
    Handle t(H5Aget_type(a.get()), H5Tclose);
    Handle sp(H5Aget_space(a.get()), H5Sclose);
    if (!t.ok() || !sp.ok() || H5Sget_simple_extent_npoints(sp.get()) != 1) return std::nullopt;
    switch (H5Tget_class(t.get())) {
        case H5T_INTEGER: {
            long long v = 0;
            if (H5Aread(a.get(), H5T_NATIVE_LLONG, &v) < 0) return std::nullopt;
            return v;
        }
        case H5T_FLOAT: {
            double v = 0;
            // Only integral values that an int64 holds (the cast is undefined outside that).
            if (H5Aread(a.get(), H5T_NATIVE_DOUBLE, &v) < 0 || !(std::fabs(v) < 9.2e18) || v != std::floor(v))
                return std::nullopt;
            return static_cast<std::int64_t>(v);
        }
        case H5T_STRING: {
            const auto s = string_attr(obj, "step");
            if (!s || s->empty() || s->size() > 18 ||
                !std::all_of(s->begin(), s->end(), [](char c) { return c >= '0' && c <= '9'; }))
                return std::nullopt;
            return std::stoll(*s);
        }
        default: return std::nullopt;
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

Plan plan_dataset(hid_t dset) {
    Handle type(H5Dget_type(dset), H5Tclose);
    if (!type.ok()) return fail(Plan::error, "cannot read the datatype: " + hdf5_detail());
    const H5T_class_t cls = H5Tget_class(type.get());
    const std::size_t size = H5Tget_size(type.get());
    const auto attr = string_attr(dset, "dtype");
    Plan p;
    if (cls == H5T_FLOAT) {
        std::size_t spos, epos, esize, mpos, msize;
        H5Tget_fields(type.get(), &spos, &epos, &esize, &mpos, &msize);
        const std::size_t bias = H5Tget_ebias(type.get());
        const FloatLayout* hit = nullptr;
        for (const auto& f : kFloats)
            if (f.size == size && f.spos == spos && f.epos == epos && f.esize == esize &&
                f.mpos == mpos && f.msize == msize && f.bias == bias && H5Tget_offset(type.get()) == 0)
                hit = &f;
        if (!hit)
            return fail(Plan::error,
                        fmt::format("unsupported dtype: {}-byte float with sign bit {}, {} exponent "
                                    "bits at {}, {} mantissa bits, bias {}",
                                    size, spos, esize, epos, msize, bias));
        p.dtype = hit->dtype;
        p.storage = fmt::format("float{}", 8 * size);
        if (p.dtype == DType::bf16) p.storage = "bfloat16";
        p.mem_type = Handle(H5Tcopy(type.get()), H5Tclose);
        H5Tset_order(p.mem_type.get(), H5T_ORDER_LE);
    } else if (cls == H5T_INTEGER || cls == H5T_OPAQUE) {
        const bool is_int = cls == H5T_INTEGER;
        const std::string stored = is_int ? fmt::format("{}int{}", H5Tget_sign(type.get()) == H5T_SGN_2 ? "" : "u", 8 * size)
                                          : fmt::format("opaque{}", size);
        if (!attr)
            return fail(Plan::skip, fmt::format("{} dataset without a 'dtype' attribute naming a float "
                                                "type: not analysed", stored));
        std::optional<DType> d;
        if (const auto f = parse_format(*attr)) {
            switch (*f) {
                case Format::e4m3: d = DType::e4m3; break;
                case Format::e5m2: d = DType::e5m2; break;
                case Format::e4m3fnuz: d = DType::e4m3fnuz; break;
                case Format::e5m2fnuz: d = DType::e5m2fnuz; break;
                case Format::e8m0: d = DType::e8m0; break;
                default: break;  // FP4/FP6 and the other ml_dtypes types: not a stored dump type yet
            }
        } else if (const auto w = parse_wide(*attr)) {
            d = *w == Wide::f64 ? DType::f64 : *w == Wide::f32 ? DType::f32 : *w == Wide::f16 ? DType::f16 : DType::bf16;
        }
        if (!d) return fail(Plan::error, fmt::format("unsupported dtype '{}' (attribute 'dtype' of {} data)", *attr, stored));
        if (stored_size(*d) != size)
            return fail(Plan::error, fmt::format("attribute dtype='{}' needs {}-byte elements but the data is {}",
                                                 *attr, stored_size(*d), stored));
        p.dtype = *d;
        p.storage = stored;
        // Same type in little-endian order: bytes are swapped if needed, values never converted
        // (a signed int16 holding bf16 bits must not be clipped to unsigned).
        p.mem_type = Handle(H5Tcopy(type.get()), H5Tclose);
        if (is_int) H5Tset_order(p.mem_type.get(), H5T_ORDER_LE);
    } else {
        return fail(Plan::skip, fmt::format("{} dataset is not a tensor: not analysed", class_name(cls)));
    }

    Handle space(H5Dget_space(dset), H5Sclose);
    if (!space.ok()) return fail(Plan::error, "cannot read the dataspace: " + hdf5_detail());
    if (H5Sget_simple_extent_type(space.get()) == H5S_NULL)
        return fail(Plan::error, "empty dataset (null dataspace)");
    const int rank = H5Sget_simple_extent_ndims(space.get());
    if (rank < 0) return fail(Plan::error, "cannot read the shape: " + hdf5_detail());
    p.dims.resize(rank);
    H5Sget_simple_extent_dims(space.get(), p.dims.data(), nullptr);
    p.numel = 1;
    for (hsize_t d : p.dims)
        if (mul_overflows(p.numel, d, p.numel)) return fail(Plan::error, "shape overflows 64 bits");
    if (p.numel == 0) return fail(Plan::error, fmt::format("empty dataset (shape [{}])", fmt::join(p.dims, ", ")));

    Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
    const int nfilters = dcpl.ok() ? H5Pget_nfilters(dcpl.get()) : 0;
    for (int i = 0; i < nfilters; ++i) {
        unsigned flags = 0, config = 0;
        std::size_t nelmts = 0;
        char fname[128] = {};
        const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &nelmts,
                                               nullptr, sizeof fname, fname, &config);
        if (id < 0) return fail(Plan::error, "cannot read the filter pipeline: " + hdf5_detail());
        if (H5Zfilter_avail(id) <= 0) {
            H5Eclear2(H5E_DEFAULT);
            return fail(Plan::error,
                        fmt::format("compressed with HDF5 filter {} ('{}'), which this HDF5 cannot "
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

herr_t collect_dataset(hid_t, const char* name, const H5O_info_t* info, void* data) {
    report_progress();
    if (info->type == H5O_TYPE_DATASET) static_cast<std::vector<std::string>*>(data)->push_back(name);
    return 0;
}

class Hdf5Source final : public Source {
public:
    Hdf5Source(const std::string& path, const ReadOptions& opts) : opts_(opts) {
        silence_hdf5();
        path_ = path;
        file_ = Handle(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose);
        if (!file_.ok()) throw DumpError(path, "", "cannot open as HDF5: " + hdf5_detail());
        std::vector<std::string> names;
        // H5Ovisit visits each object once, however many hard links reach it (no cycles).
        if (H5Ovisit2(file_.get(), H5_INDEX_NAME, H5_ITER_INC, collect_dataset, &names, H5O_INFO_BASIC) < 0)
            errors_.push_back({path, "", "could not list every object (file corrupt?): " + hdf5_detail()});
        for (const auto& n : names) {
            report_progress();
            list(n);
        }
    }

    void read(const TensorInfo& t, const ChunkFn& fn) override {
        auto err = [&](const std::string& m) { return DumpError(path_, t.name, m); };
        Handle dapl(H5Pcreate(H5P_DATASET_ACCESS), H5Pclose);
        Handle probe(H5Dopen2(file_.get(), t.name.c_str(), H5P_DEFAULT), H5Dclose);
        if (!probe.ok()) throw err("cannot open dataset: " + hdf5_detail());
        Plan plan = plan_dataset(probe.get());
        if (plan.kind != Plan::tensor) throw err(plan.message);
        if (plan.dtype != t.dtype) throw err("dataset changed since it was listed");
        const int rank = static_cast<int>(plan.dims.size());
        std::vector<hsize_t> chunk(rank, 1);
        {
            Handle dcpl(H5Dget_create_plist(probe.get()), H5Pclose);
            if (rank > 0 && H5Pget_layout(dcpl.get()) == H5D_CHUNKED)
                H5Pget_chunk(dcpl.get(), rank, chunk.data());
        }
        const std::size_t budget = elements_per_read(plan.dtype, opts_);
        const std::size_t ssize = stored_size(plan.dtype);

        // Slabs: fixed indices in dims < k, a run of L along dim k (a multiple of the chunk edge
        // when possible), all of dims > k. Each slab is contiguous in row-major order.
        int k = 0;
        std::uint64_t inner = 1;  // elements of dims > k
        if (rank > 0) {
            k = rank - 1;
            for (int d = 0; d < rank; ++d) {
                std::uint64_t rest = 1;
                for (int j = d + 1; j < rank; ++j) rest *= plan.dims[j];
                if (rest * std::min<hsize_t>(chunk[d], plan.dims[d]) <= budget) { k = d; break; }
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
                    throw err(fmt::format("compact dataset stores {} bytes but its shape and type need {}: corrupt file",
                                          static_cast<std::uint64_t>(stored), need));
            }
        }

        if (rank > 0 && read_chunks_directly(t, dset.get(), plan, chunk, fn)) return;

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
                if (H5Sselect_hyperslab(fspace.get(), H5S_SELECT_SET, start.data(), nullptr,
                                        count.data(), nullptr) < 0)
                    throw err("cannot select elements: " + hdf5_detail());
            }
            // The memory space has the selection's own shape: libhdf5 then copies whole runs
            // (a 1-D memory space against an n-D selection goes element-run by element-run
            // through its general iterator, several times slower).
            Handle mspace(rank > 0 ? H5Screate_simple(rank, count.data(), nullptr) : H5Screate(H5S_SCALAR),
                          H5Sclose);
            if (H5Dread(dset.get(), plan.mem_type.get(), rank > 0 ? mspace.get() : H5S_ALL,
                        rank > 0 ? fspace.get() : H5S_ALL, H5P_DEFAULT, buf_.data()) < 0)
                throw err(fmt::format("cannot read elements {}..{}: {}", first, first + n - 1, hdf5_detail()));
            deliver(plan.dtype, buf_.data(), static_cast<std::size_t>(n), first, scratch_, fn);
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

private:
    // Chunked datasets compressed with deflate and/or shuffle (what h5py and torch dumps use) are
    // read chunk by chunk with H5Dread_chunk and decoded by hdf5_filters.cpp, which demands that
    // each chunk decode to exactly its size (libhdf5 1.10 does not check, and over-reads its own
    // buffer on a short chunk). Slabs are whole rows of chunks along dimension 0, so each chunk is
    // decoded once. Returns false, having read nothing, where this does not apply (other filters,
    // a type conversion, or a row of chunks over 64 MiB): then H5Dread does the work.
    bool read_chunks_directly(const TensorInfo& t, hid_t dset, const Plan& plan,
                              const std::vector<hsize_t>& chunk, const ChunkFn& fn) {
        auto err = [&](const std::string& m) { return DumpError(path_, t.name, m); };
        Handle dcpl(H5Dget_create_plist(dset), H5Pclose);
        Handle ftype(H5Dget_type(dset), H5Tclose);
        if (!dcpl.ok() || !ftype.ok() || H5Pget_layout(dcpl.get()) != H5D_CHUNKED) return false;
        if (H5Tequal(ftype.get(), plan.mem_type.get()) <= 0) return false;
        const int nfilters = H5Pget_nfilters(dcpl.get());
        if (nfilters <= 0 || nfilters > 2) return false;
        std::vector<FilterStep> pipeline;
        for (int i = 0; i < nfilters; ++i) {
            unsigned flags = 0, config = 0, cd[4] = {};
            std::size_t ncd = 4;
            const H5Z_filter_t id = H5Pget_filter2(dcpl.get(), static_cast<unsigned>(i), &flags, &ncd, cd, 0,
                                                   nullptr, &config);
            if (id == H5Z_FILTER_DEFLATE) pipeline.push_back({FilterStep::deflate, 1});
            else if (id == H5Z_FILTER_SHUFFLE && ncd >= 1) pipeline.push_back({FilterStep::shuffle, cd[0]});
            else return false;
        }
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
            chunk_total > kMaxRowBytes)
            return false;
        const std::size_t chunk_bytes = static_cast<std::size_t>(chunk_elems * ssize);
        // Chunks never written read as the fill value.
        std::vector<unsigned char> fill(ssize, 0);
        H5D_fill_value_t fill_state = H5D_FILL_VALUE_UNDEFINED;
        if (H5Pfill_value_defined(dcpl.get(), &fill_state) >= 0 && fill_state != H5D_FILL_VALUE_UNDEFINED)
            H5Pget_fill_value(dcpl.get(), plan.mem_type.get(), fill.data());
        H5Eclear2(H5E_DEFAULT);

        std::vector<hsize_t> grid(rank), idx(rank, 0), offset(rank, 0), ext(rank), row(rank, 0);
        for (int d = 0; d < rank; ++d) grid[d] = (plan.dims[d] + chunk[d] - 1) / chunk[d];
        const std::size_t budget = elements_per_read(plan.dtype, opts_);
        chunk_buf_.resize(chunk_bytes);
        std::uint64_t first = 0;
        for (hsize_t c0 = 0; c0 < grid[0]; ++c0) {
            const hsize_t r0 = c0 * chunk[0], rows = std::min<hsize_t>(chunk[0], plan.dims[0] - r0);
            const std::uint64_t slab_elems = rows * inner;
            buf_.resize(static_cast<std::size_t>(slab_elems * ssize));
            std::fill(idx.begin(), idx.end(), 0);
            idx[0] = c0;
            for (;;) {  // every chunk of this row: odometer over dims 1..rank-1 of the grid
                for (int d = 0; d < rank; ++d) {
                    offset[d] = idx[d] * chunk[d];
                    ext[d] = std::min<hsize_t>(chunk[d], plan.dims[d] - offset[d]);
                }
                const std::string where = fmt::format("chunk at [{}]", fmt::join(offset, ", "));
                unsigned mask = 0;
                haddr_t addr = HADDR_UNDEF;
                hsize_t stored = 0;
                if (H5Dget_chunk_info_by_coord(dset, offset.data(), &mask, &addr, &stored) < 0)
                    throw err(fmt::format("cannot locate {}: {}", where, hdf5_detail()));
                if (addr == HADDR_UNDEF) {
                    for (std::size_t b = 0; b < chunk_bytes; b += ssize) std::memcpy(&chunk_buf_[b], fill.data(), ssize);
                } else {
                    if (stored > (std::uint64_t(4) << 30))
                        throw err(fmt::format("{} claims {} stored bytes: corrupt file", where, static_cast<std::uint64_t>(stored)));
                    raw_.resize(static_cast<std::size_t>(stored));
                    std::uint32_t read_mask = 0;
                    if (H5Dread_chunk(dset, H5P_DEFAULT, offset.data(), &read_mask, raw_.data()) < 0)
                        throw err(fmt::format("cannot read {}: {}", where, hdf5_detail()));
                    const std::string bad = decode_chunk(pipeline, read_mask, raw_.data(), raw_.size(),
                                                         chunk_bytes, decode_scratch_, chunk_buf_.data());
                    if (!bad.empty()) throw err(fmt::format("{}: {}: corrupt file", where, bad));
                }
                // Copy the part of the chunk inside the dataset: runs along the last dimension.
                std::fill(row.begin(), row.end(), 0);
                const hsize_t run = ext[rank - 1];
                for (;;) {
                    std::uint64_t src = 0, dst = 0;
                    for (int d = 0; d < rank - 1; ++d) {
                        src = src * chunk[d] + row[d];
                        dst = dst * plan.dims[d] + (d == 0 ? row[0] : offset[d] + row[d]);
                    }
                    src *= chunk[rank - 1];
                    dst = dst * plan.dims[rank - 1] + (rank == 1 ? 0 : offset[rank - 1]);
                    std::memcpy(&buf_[static_cast<std::size_t>(dst * ssize)], &chunk_buf_[static_cast<std::size_t>(src * ssize)],
                                static_cast<std::size_t>(run * ssize));
                    int d = rank - 2;
                    while (d >= 0 && ++row[d] == ext[d]) row[d--] = 0;
                    if (d < 0) break;
                }
                int d = rank - 1;
                while (d >= 1 && ++idx[d] == grid[d]) idx[d--] = 0;
                if (d < 1) break;
            }
            for (std::uint64_t p = 0; p < slab_elems; p += budget) {
                const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(budget, slab_elems - p));
                deliver(plan.dtype, &buf_[static_cast<std::size_t>(p * ssize)], n, first + p, scratch_, fn);
            }
            first += slab_elems;
        }
        return true;
    }

    void list(const std::string& name) {
        Handle d(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
        if (!d.ok()) {
            errors_.push_back({path_, name, "cannot open dataset: " + hdf5_detail()});
            return;
        }
        Plan plan = plan_dataset(d.get());
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
        t.step = step_attr(d.get());
        if (const auto r = string_attr(d.get(), "role")) {
            if (const auto role = parse_role(*r)) {
                t.role = *role;
            } else {
                notes_.push_back({path_, name, fmt::format("attribute role='{}' is not one of activation, "
                                                           "weight, gradient, optimizer_state: guessed from the name", *r)});
            }
        }
        const bool had_role = t.role != Role::unknown;
        complete_guesses(t);
        if (had_role) t.role_guessed = false;
        H5Eclear2(H5E_DEFAULT);
        tensors_.push_back(std::move(t));
    }

    ReadOptions opts_;
    Handle file_;
    std::vector<std::uint8_t> buf_, scratch_;
    std::vector<unsigned char> raw_, chunk_buf_, decode_scratch_;  // read_chunks_directly
};

}  // namespace

namespace {

// libhdf5 1.10 can crash on corrupt metadata while a file is listed: H5HG_read trusts the size of
// an object in a global heap collection, where variable-length string attributes ('dtype',
// 'role') live, and a flipped byte there makes it copy gigabytes (SIGSEGV inside H5Aread; found
// by tests/corrupt). No API reads such an attribute without that code, so the listing is first
// done in a child process. Returns why the child did not finish, or "" when it did (the listing
// is then repeated here, on the same bytes, with the same result).
std::string listing_crashes(const std::string& path, const ReadOptions& opts) {
#if defined(__unix__)
    if (opts.hdf5_listing_timeout_ms == 0) return "";
    int fds[2];
    if (::pipe(fds) != 0) return "";  // no pipe to spare: list without the guard
    const pid_t pid = fork();
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
        for (const int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT})
            std::signal(sig, SIG_DFL);
        g_progress_fd = fds[1];
        try {
            Hdf5Source probe(path, opts);
        } catch (...) {
            // An error is an answer too: the parent reports it from its own listing.
        }
        _exit(0);
    }
    ::close(fds[1]);
    if (pid < 0) {
        ::close(fds[0]);
        return "";
    }
    // Wait for the end of the pipe (the child exited), giving up after a silence of the limit.
    bool hung = false;
    for (;;) {
        pollfd p{fds[0], POLLIN, 0};
        const int r = ::poll(&p, 1, static_cast<int>(opts.hdf5_listing_timeout_ms));
        if (r < 0 && errno == EINTR) continue;
        if (r == 0) {
            hung = true;
            break;
        }
        char buf[256];
        const ssize_t n = r > 0 ? ::read(fds[0], buf, sizeof buf) : 0;
        if (n <= 0 && !(n < 0 && errno == EINTR)) break;
    }
    ::close(fds[0]);
    if (hung) ::kill(pid, SIGKILL);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) return "";
    }
    if (hung)
        return fmt::format("libhdf5 made no progress for {} s while listing the file's objects (a loop "
                           "in corrupt metadata): stopped",
                           opts.hdf5_listing_timeout_ms / 1000.0);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
    if (WIFSIGNALED(status))
        return fmt::format("libhdf5 crashed ({}) while listing the file's objects: its metadata is "
                           "corrupt",
                           strsignal(WTERMSIG(status)));
    return fmt::format("libhdf5 stopped (exit status {}) while listing the file's objects: its metadata "
                       "is corrupt",
                       WIFEXITED(status) ? WEXITSTATUS(status) : -1);
#else
    (void)path, (void)opts;
    return "";
#endif
}

}  // namespace

std::unique_ptr<Source> open_hdf5(const std::string& path, const ReadOptions& opts) {
    const std::string crash = listing_crashes(path, opts);
    if (!crash.empty()) throw DumpError(path, "", crash);
    return std::make_unique<Hdf5Source>(path, opts);
}

}  // namespace fp8kit::dump::detail
