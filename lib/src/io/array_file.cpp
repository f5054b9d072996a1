#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/array_file.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <utility>

#include <fmt/format.h>

#include "fp8kit/io/npy.hpp"
#include "fp8kit/io/gate.hpp"
#include "io/chunk_task.hpp"
#include "io/dump_internal.hpp"

#include <fcntl.h>
#include <unistd.h>

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

std::size_t ArrayFile::size() const {
    if (!mapped) return data.size() / element_size(type);
    std::size_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

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
    throw ArrayFileError(
        fmt::format("{}: unsupported dtype '{}' (expected <f8, <f4, <f2, <u2 or V2 for "
                    "bfloat16 bits, |u1 or V1 for 8-bit codes)",
                    path, h.descr));
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

using File = std::unique_ptr<std::FILE, int (*)(std::FILE*)>;

// A raw file's type and shape (from its size when no shape is given), checked against its size;
// leaves `f` open at the start and `bytes` its size.
ArrayFile raw_layout(const std::string& path, const RawLayout& raw, File& f, std::size_t& bytes) {
    if (!raw.type)
        throw ArrayFileError(fmt::format("{}: a raw file needs its element type (--dtype)", io::quoted(path)));
    try {
        f = io::open_input_stream(path);  // regular files only (io/gate.hpp)
    } catch (const io::InputError& e) {
        throw ArrayFileError(e.what());
    }
    std::fseek(f.get(), 0, SEEK_END);
    const long end = std::ftell(f.get());
    if (end < 0) throw ArrayFileError(fmt::format("{}: cannot tell its size", path));
    std::rewind(f.get());
    bytes = static_cast<std::size_t>(end);
    const std::size_t es = element_size(*raw.type);
    ArrayFile a{path, *raw.type, raw.shape, {}};
    if (a.shape.empty()) {
        if (bytes % es != 0)
            throw ArrayFileError(fmt::format("{}: wrong size: {} bytes is not a whole number of {} elements", path,
                                             bytes, name(*raw.type)));
        a.shape = {bytes / es};
    }
    std::size_t n = 1;
    for (std::size_t d : a.shape) n *= d;
    if (n * es != bytes)
        throw ArrayFileError(fmt::format("{}: wrong size: shape {} of {} needs {} bytes, the file has {}", path,
                                         shape_text(a.shape), name(*raw.type), n * es, bytes));
    return a;
}

ArrayFile load_raw(const std::string& path, const RawLayout& raw) {
    File f(nullptr, &std::fclose);
    std::size_t bytes = 0;
    ArrayFile a = raw_layout(path, raw, f, bytes);
    a.data.resize(bytes);
    if (bytes && std::fread(a.data.data(), 1, bytes, f.get()) != bytes)
        throw ArrayFileError(fmt::format("{}: read failed", path));
    return a;
}

// The type and shape of a tensor the dump reader listed, nothing read.
ArrayFile header_of(const std::string& source, const dump::TensorInfo& t) {
    ElementType type = ElementType::u8;
    switch (t.dtype) {
        case dump::DType::f64: type = ElementType::f64; break;
        case dump::DType::f32: type = ElementType::f32; break;
        case dump::DType::f16: type = ElementType::f16; break;
        case dump::DType::bf16: type = ElementType::bf16; break;
        default: type = ElementType::u8; break;  // FP8 and E8M0 codes, one byte each
    }
    ArrayFile a{source, type, {}, {}};
    for (std::uint64_t d : t.shape) a.shape.push_back(static_cast<std::size_t>(d));
    return a;
}

// The tensor read whole into `a` (its header_of): the stored little-endian elements as they are
// (both readers are opened in their raw mode, so FP8 codes arrive undecoded, one byte each).
void read_whole(const std::string& source, dump::Source& src, const dump::TensorInfo& t, ArrayFile& a) {
    const std::size_t es = element_size(a.type);
    a.data.resize(static_cast<std::size_t>(t.numel) * es);  // numel * es checked by the reader
    std::uint64_t got = 0;
    try {
        src.read(t, [&](const dump::Chunk& c) {
            if (c.first + c.count > t.numel) throw ArrayFileError(fmt::format("{}: read past its end", source));
            std::memcpy(a.data.data() + c.first * es, c.bits, c.count * es);
            got += c.count;
        });
    } catch (const dump::DumpError& e) {
        throw ArrayFileError(fmt::format("{}: {}", io::quoted(source), e.message));
    }
    if (got != t.numel) throw ArrayFileError(fmt::format("{}: {} of {} elements read", source, got, t.numel));
}

// The dataset through the dump reader (lib/src/io/dump_hdf5.cpp), in its raw mode: the same
// checks as inspect and sweep (own chunk decoding, listing in a child process, overflow and size
// limits, nothing read outside the named file). Listed only; the caller reads it or not.
std::unique_ptr<dump::Source> open_hdf5(const std::string& source, const std::string& file, const std::string& dataset,
                                        const dump::ReadOptions& opts) {
    std::unique_ptr<dump::Source> src;
    try {
        src = dump::detail::open_hdf5_dataset(file, dataset, opts);
    } catch (const dump::DumpError& e) {
        throw ArrayFileError(fmt::format("{}: {}", io::quoted(source), e.message));
    }
    for (const auto* list : {&src->errors(), &src->notes()})
        if (!list->empty()) throw ArrayFileError(fmt::format("{}: {}", io::quoted(source), list->front().message));
    if (src->tensors().size() != 1) throw ArrayFileError(fmt::format("{}: not a dataset", source));
    return src;
}

ArrayFile load_hdf5(const std::string& source, const std::string& file, const std::string& dataset,
                    const dump::ReadOptions& opts) {
    const auto src = open_hdf5(source, file, dataset, opts);
    const dump::TensorInfo& t = src->tensors().front();
    ArrayFile a = header_of(source, t);
    read_whole(source, *src, t, a);
    return a;
}

// The safetensors file opened raw (FP8 as stored codes) and the tensor named `tensor` in it, or an
// error naming what is wrong: the reader's own message for that tensor, or the names it has.
std::pair<std::unique_ptr<dump::Source>, const dump::TensorInfo*> find_safetensors(const std::string& source,
                                                                                   const std::string& file,
                                                                                   const std::string& tensor,
                                                                                   const dump::ReadOptions& opts) {
    std::unique_ptr<dump::Source> src;
    try {
        src = dump::detail::open_safetensors(file, opts, /*raw=*/true);
    } catch (const dump::DumpError& e) {
        throw ArrayFileError(fmt::format("{}: {}", io::quoted(source), e.message));
    }
    for (const auto& t : src->tensors())
        if (t.name == tensor) return {std::move(src), &t};
    for (const auto* list : {&src->errors(), &src->notes()})
        for (const auto& p : *list)
            if (p.name == tensor) throw ArrayFileError(fmt::format("{}: {}", io::quoted(source), p.message));
    std::string some;
    for (std::size_t i = 0; i < src->tensors().size() && i < 5; ++i)
        some += (i ? ", " : "") + io::quoted(src->tensors()[i].name, 120);
    throw ArrayFileError(fmt::format("{}: no tensor '{}' in {} (it has {} tensors{}{})", io::quoted(source),
                                     io::quoted(tensor), io::quoted(file), src->tensors().size(),
                                     some.empty() ? "" : ", e.g. ", some));
}

// header_of, plus the format a safetensors F8_* dtype names (U8 says nothing about one).
ArrayFile safetensors_header(const std::string& source, const dump::TensorInfo& t) {
    ArrayFile a = header_of(source, t);
    if (a.type == ElementType::u8 && t.storage != "U8") a.codes_format = dump::fp8_format(t.dtype);
    return a;
}

bool ends_with(const std::string& s, const char* suffix) {
    const std::size_t n = std::strlen(suffix);
    return s.size() >= n && s.compare(s.size() - n, n, suffix) == 0;
}

// HDF5: "file.h5:/dataset". A ':' followed by '/' splits, the last one wins (paths may hold ':').
// The split (file, dataset), or nothing for .npy and raw files.
std::optional<std::pair<std::string, std::string>> hdf5_source(const std::string& source) {
    const std::size_t colon = source.rfind(":/");
    if (colon != std::string::npos && colon > 0) {
        std::string file = source.substr(0, colon);
        if (ends_with(file, ".h5") || ends_with(file, ".hdf5") || ends_with(file, ".hdf") || dump::is_hdf5_file(file))
            return std::make_pair(std::move(file), source.substr(colon + 1));
    }
    return std::nullopt;
}

// `bytes` at `offset` of `path` mapped read-only into a; false when it cannot be (then read).
bool map_into(const std::string& path, std::uint64_t offset, std::uint64_t bytes, ArrayFile& a) {
    int fd = -1;
    try {
        fd = io::open_input(path).release();
    } catch (const io::InputError&) {
        return false;
    }
    a.mapped = dump::detail::map_extent(fd, offset, bytes);  // the mapping outlives the descriptor
    ::close(fd);
    return a.mapped != nullptr;
}

}  // namespace

ArrayFile map_array(const std::string& source, const RawLayout& raw, const dump::ReadOptions& opts) {
    if (const auto h = hdf5_source(source)) {
        const auto src = open_hdf5(source, h->first, h->second, opts);
        const dump::TensorInfo& t = src->tensors().front();
        ArrayFile a = header_of(source, t);
        a.mapped = src->map(t);  // contiguous and stored as delivered: in place
        if (!a.mapped) read_whole(source, *src, t, a);
        return a;
    }
    if (ends_with(source, ".npy")) {
        NpyHeader hd;
        try {
            hd = read_npy_header(source);  // checks the file's size against the shape
        } catch (const NpyError& e) {
            throw ArrayFileError(e.what());
        }
        ArrayFile a{source, npy_type(hd, source), hd.shape, {}};
        if (map_into(source, hd.data_offset, std::uint64_t(hd.element_count()) * hd.item_size, a)) return a;
        return load_npy(source);
    }
    File f(nullptr, &std::fclose);
    std::size_t bytes = 0;
    ArrayFile a = raw_layout(source, raw, f, bytes);
    if (map_into(source, 0, bytes, a)) return a;
    return load_raw(source, raw);
}

ArrayFile map_safetensors(const std::string& source, const std::string& file, const std::string& tensor,
                          const dump::ReadOptions& opts) {
    const auto [src, t] = find_safetensors(source, file, tensor, opts);
    ArrayFile a = safetensors_header(source, *t);
    a.mapped = src->map(*t);
    if (!a.mapped) read_whole(source, *src, *t, a);
    return a;
}

ArrayFile load_array(const std::string& source, const RawLayout& raw, const dump::ReadOptions& opts) {
    if (const auto h = hdf5_source(source)) return load_hdf5(source, h->first, h->second, opts);
    if (ends_with(source, ".npy")) return load_npy(source);
    return load_raw(source, raw);
}

ArrayFile load_safetensors(const std::string& source, const std::string& file, const std::string& tensor,
                           const dump::ReadOptions& opts) {
    const auto [src, t] = find_safetensors(source, file, tensor, opts);
    ArrayFile a = safetensors_header(source, *t);
    read_whole(source, *src, *t, a);
    return a;
}

ArrayFile describe_safetensors(const std::string& source, const std::string& file, const std::string& tensor,
                               const dump::ReadOptions& opts) {
    const auto [src, t] = find_safetensors(source, file, tensor, opts);
    return safetensors_header(source, *t);
}

std::uint64_t ArrayInfo::numel() const {
    std::uint64_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

ArrayInfo describe_array(const std::string& source, const RawLayout& raw, const dump::ReadOptions& opts) {
    if (const auto h = hdf5_source(source)) {
        const auto src = open_hdf5(source, h->first, h->second, opts);
        const ArrayFile a = header_of(source, src->tensors().front());
        return {source, a.type, a.shape};
    }
    if (ends_with(source, ".npy")) {
        try {
            const NpyHeader hd = read_npy_header(source);
            return {source, npy_type(hd, source), hd.shape};
        } catch (const NpyError& e) {
            throw ArrayFileError(e.what());
        }
    }
    File f(nullptr, &std::fclose);
    std::size_t bytes = 0;
    const ArrayFile a = raw_layout(source, raw, f, bytes);
    return {source, a.type, a.shape};
}

}  // namespace fp8kit
