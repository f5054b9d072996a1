#include "fp8kit/io/array_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>
#include <hdf5.h>

#include "fp8kit/io/npy.hpp"

namespace fp8kit {

std::string_view name(ElementType t) {
    switch (t) {
        case ElementType::f64: return "f64";
        case ElementType::f32: return "f32";
        case ElementType::f16: return "f16";
        case ElementType::bf16: return "bf16";
        case ElementType::u8: return "u8";
    }
    return "?";
}

std::optional<ElementType> parse_element_type(std::string_view s) {
    for (ElementType t : {ElementType::f64, ElementType::f32, ElementType::f16, ElementType::bf16, ElementType::u8})
        if (s == name(t)) return t;
    return std::nullopt;
}

std::size_t element_size(ElementType t) {
    switch (t) {
        case ElementType::f64: return 8;
        case ElementType::f32: return 4;
        case ElementType::f16:
        case ElementType::bf16: return 2;
        case ElementType::u8: return 1;
    }
    return 1;
}

std::optional<Wide> as_wide(ElementType t) {
    switch (t) {
        case ElementType::f64: return Wide::f64;
        case ElementType::f32: return Wide::f32;
        case ElementType::f16: return Wide::f16;
        case ElementType::bf16: return Wide::bf16;
        case ElementType::u8: return std::nullopt;
    }
    return std::nullopt;
}

std::size_t ArrayFile::size() const { return data.size() / element_size(type); }

std::string shape_text(const std::vector<std::size_t>& shape) {
    if (shape.empty()) return "scalar";
    std::string s;
    for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? " x " : "") + std::to_string(shape[i]);
    return s;
}

std::optional<std::vector<std::size_t>> parse_shape(std::string_view s) {
    std::vector<std::size_t> out;
    std::size_t v = 0;
    bool digit = false;
    for (std::size_t i = 0; i <= s.size(); ++i) {
        const char c = i < s.size() ? s[i] : ',';
        if (c >= '0' && c <= '9') {
            if (v > (SIZE_MAX - 9) / 10) return std::nullopt;
            v = v * 10 + static_cast<std::size_t>(c - '0');
            digit = true;
        } else if (c == 'x' || c == ',') {
            if (!digit) return std::nullopt;
            out.push_back(v);
            v = 0;
            digit = false;
        } else {
            return std::nullopt;
        }
    }
    return out;
}

namespace {

ElementType npy_type(const NpyHeader& h, const std::string& path) {
    const char k = h.kind;
    const std::size_t n = h.item_size;
    if (k == 'f' && n == 8) return ElementType::f64;
    if (k == 'f' && n == 4) return ElementType::f32;
    if (k == 'f' && n == 2) return ElementType::f16;
    if ((k == 'u' || k == 'V') && n == 2) return ElementType::bf16;
    if ((k == 'u' || k == 'V') && n == 1) return ElementType::u8;
    throw ArrayFileError(fmt::format("{}: unsupported dtype '{}' (expected <f8, <f4, <f2, <u2 or V2 for "
                                     "bfloat16 bits, |u1 or V1 for 8-bit codes)", path, h.descr));
}

ArrayFile load_npy(const std::string& path) {
    try {
        NpyArray a = read_npy(path);
        ArrayFile f{path, npy_type(a.header, path), a.header.shape, std::move(a.data)};
        return f;
    } catch (const NpyError& e) {
        throw ArrayFileError(e.what());
    }
}

ArrayFile load_raw(const std::string& path, const RawLayout& raw) {
    if (!raw.type)
        throw ArrayFileError(fmt::format("{}: a raw file needs its element type (--dtype)", path));
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> f(std::fopen(path.c_str(), "rb"), &std::fclose);
    if (!f) throw ArrayFileError(fmt::format("{}: cannot open: {}", path, std::strerror(errno)));
    std::fseek(f.get(), 0, SEEK_END);
    const long end = std::ftell(f.get());
    if (end < 0) throw ArrayFileError(fmt::format("{}: cannot tell its size", path));
    std::rewind(f.get());
    const auto bytes = static_cast<std::size_t>(end);
    const std::size_t es = element_size(*raw.type);
    ArrayFile a{path, *raw.type, raw.shape, {}};
    if (a.shape.empty()) {
        if (bytes % es != 0)
            throw ArrayFileError(fmt::format("{}: wrong size: {} bytes is not a whole number of {} elements",
                                             path, bytes, name(*raw.type)));
        a.shape = {bytes / es};
    }
    std::size_t n = 1;
    for (std::size_t d : a.shape) n *= d;
    if (n * es != bytes)
        throw ArrayFileError(fmt::format("{}: wrong size: shape {} of {} needs {} bytes, the file has {}", path,
                                         shape_text(a.shape), name(*raw.type), n * es, bytes));
    a.data.resize(bytes);
    if (bytes && std::fread(a.data.data(), 1, bytes, f.get()) != bytes)
        throw ArrayFileError(fmt::format("{}: read failed", path));
    return a;
}

// RAII for HDF5 handles.
struct H5Handle {
    hid_t id;
    herr_t (*close)(hid_t);
    ~H5Handle() { if (id >= 0) close(id); }
};

ArrayFile load_hdf5(const std::string& source, const std::string& file, const std::string& dataset) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);  // errors become our one-line messages
    H5Handle f{H5Fopen(file.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT), H5Fclose};
    if (f.id < 0) throw ArrayFileError(fmt::format("{}: cannot open HDF5 file '{}'", source, file));
    if (H5Lexists(f.id, dataset.c_str(), H5P_DEFAULT) <= 0)
        throw ArrayFileError(fmt::format("{}: no dataset '{}' in '{}'", source, dataset, file));
    H5Handle d{H5Dopen2(f.id, dataset.c_str(), H5P_DEFAULT), H5Dclose};
    if (d.id < 0) throw ArrayFileError(fmt::format("{}: '{}' is not a dataset", source, dataset));
    H5Handle t{H5Dget_type(d.id), H5Tclose};
    H5Handle s{H5Dget_space(d.id), H5Sclose};
    if (t.id < 0 || s.id < 0) throw ArrayFileError(fmt::format("{}: cannot read the dataset's type", source));
    const H5T_class_t cls = H5Tget_class(t.id);
    const std::size_t size = H5Tget_size(t.id);
    std::optional<ElementType> type;
    if (cls == H5T_FLOAT) {
        if (H5Tget_order(t.id) != H5T_ORDER_LE)
            throw ArrayFileError(fmt::format("{}: big-endian floats are not supported", source));
        std::size_t spos, epos, esize, mpos, msize;
        H5Tget_fields(t.id, &spos, &epos, &esize, &mpos, &msize);
        if (size == 8 && msize == 52) type = ElementType::f64;
        else if (size == 4 && msize == 23) type = ElementType::f32;
        else if (size == 2 && msize == 10) type = ElementType::f16;
        else if (size == 2 && msize == 7) type = ElementType::bf16;
    } else if (cls == H5T_INTEGER || cls == H5T_OPAQUE) {
        if (cls == H5T_INTEGER && size > 1 && H5Tget_order(t.id) != H5T_ORDER_LE)
            throw ArrayFileError(fmt::format("{}: big-endian integers are not supported", source));
        if (size == 1) type = ElementType::u8;
        else if (size == 2 && (cls == H5T_OPAQUE || H5Tget_sign(t.id) == H5T_SGN_NONE)) type = ElementType::bf16;
    }
    if (!type)
        throw ArrayFileError(fmt::format("{}: unsupported dataset type (expected IEEE float64/32/16, bfloat16 "
                                         "as uint16 or 2-byte opaque, or 1-byte codes)", source));
    const int rank = H5Sget_simple_extent_ndims(s.id);
    if (rank < 0) throw ArrayFileError(fmt::format("{}: cannot read the dataset's shape", source));
    std::vector<hsize_t> dims(static_cast<std::size_t>(rank));
    H5Sget_simple_extent_dims(s.id, dims.data(), nullptr);
    ArrayFile a{source, *type, {}, {}};
    std::size_t n = 1;
    for (hsize_t v : dims) { a.shape.push_back(static_cast<std::size_t>(v)); n *= static_cast<std::size_t>(v); }
    a.data.resize(n * element_size(*type));
    // The file's own type as memory type: bytes are copied as stored (little-endian checked above).
    if (n && H5Dread(d.id, t.id, H5S_ALL, H5S_ALL, H5P_DEFAULT, a.data.data()) < 0)
        throw ArrayFileError(fmt::format("{}: reading the dataset failed", source));
    return a;
}

bool ends_with(const std::string& s, const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

}  // namespace

ArrayFile load_array(const std::string& source, const RawLayout& raw) {
    // HDF5: "file.h5:/dataset". A ':' followed by '/' splits, the last one wins (paths may hold ':').
    const std::size_t colon = source.rfind(":/");
    if (colon != std::string::npos && colon > 0) {
        H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
        const std::string file = source.substr(0, colon);
        if (ends_with(file, ".h5") || ends_with(file, ".hdf5") || ends_with(file, ".hdf") ||
            H5Fis_hdf5(file.c_str()) > 0)
            return load_hdf5(source, file, source.substr(colon + 1));
    }
    if (ends_with(source, ".npy")) return load_npy(source);
    return load_raw(source, raw);
}

}  // namespace fp8kit
