// validate() on files (fp8kit/validate/files.hpp): headers first, every check that needs no
// data, then the data mapped in place.
#include "fp8kit/validate/files.hpp"

#include <sys/stat.h>

#include <fmt/format.h>

namespace fp8kit {
namespace {

using Error = ValidateInputError;

std::uint64_t numel(const std::vector<std::size_t>& shape) {
    std::uint64_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

// "file:name" where `file` is an existing regular file: the split that names one (file names
// may hold ':'). nullopt when the source is a plain file.
std::optional<std::pair<std::string, std::string>> split_source(const std::string& source) {
    struct stat whole {};
    if (::stat(source.c_str(), &whole) == 0) return std::nullopt;  // a file whose name holds ':'
    for (std::size_t c = source.find(':'); c != std::string::npos; c = source.find(':', c + 1)) {
        struct stat st {};
        const std::string file = source.substr(0, c);
        if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return std::make_pair(file, source.substr(c + 1));
    }
    return std::nullopt;
}

// The spec's scale options against each other.
void check_spec(const ValidateFileSpec& s) {
    if (s.scales.empty() && (s.order != ScaleOrder::row_major || s.global))
        throw Error("--scales-layout and --global-scale need --scales FILE");
    if (s.global && s.scales_type != ScaleType::e4m3)
        throw Error("--global-scale needs --scales-dtype e4m3 (NVFP4's E4M3 block scales)");
}

// One syntax for a tensor in a file, everywhere: file.h5:/x and file.h5:x (HDF5 paths are
// absolute either way), model.safetensors:name. `data` false: type and shape only, nothing read.
// `mapped`: where the elements lie in the file as stored, map them instead of reading them.
ArrayFile open_array(const std::string& source, const RawLayout& raw, const dump::ReadOptions& ro, bool data,
                     bool mapped = false) {
    auto header_only = [&](const ArrayInfo& i) { return ArrayFile{i.source, i.type, i.shape, {}}; };
    try {
        if (const auto split = split_source(source)) {
            const auto& [file, name] = *split;
            if (dump::is_hdf5_file(file)) {
                const std::string path = name.empty() || name.front() != '/' ? file + ":/" + name : source;
                if (!data) return header_only(describe_array(path, raw, ro));
                return mapped ? map_array(path, raw, ro) : load_array(path, raw, ro);
            }
            if (dump::is_dump_file(file)) {
                if (!data) return describe_safetensors(source, file, name, ro);
                return mapped ? map_safetensors(source, file, name, ro) : load_safetensors(source, file, name, ro);
            }
            throw Error(
                fmt::format("{}: {} is neither HDF5 nor safetensors, so ':{}' names nothing in it (a "
                            "tensor in a file: file.h5:/path, file.h5:path or model.safetensors:name)",
                            source, file, name));
        }
        if (!data) return header_only(describe_array(source, raw, ro));
        return mapped ? map_array(source, raw, ro) : load_array(source, raw, ro);
    } catch (const ArrayFileError& e) {
        throw Error(e.what());
    } catch (const dump::DumpError& e) {
        throw Error(e.what());
    }
}

// The input's and output's headers against each other (and the policy, once the input's type
// is known). Returns the output's layout for reading its data.
RawLayout check_codes(const ValidateFileSpec& s, const dump::ReadOptions& ro, const std::function<Policy(Wide)>& policy,
                      ArrayFile& in_head, ArrayFile& out_head, ValidateRequest& rq) {
    in_head = open_array(s.input, s.raw, ro, false);
    const auto from = as_wide(in_head.type);
    if (!from)
        throw Error(
            fmt::format("{}: wrong dtype: the input must be f64, f32, f16 or bf16, got one-byte codes", s.input));
    rq.from = *from;
    rq.to = s.to;
    rq.policy = policy(*from);
    if (rq.policy.rounding == Rounding::stochastic)
        throw Error("--round stochastic: validate needs a deterministic reference; choose another rounding");
    if (s.packed && s.to != Format::e2m1)
        throw Error(fmt::format("--packed: only E2M1 codes are packed two per byte, --to is {}", name(s.to)));
    // Packed E2M1: the output's last dimension is half the input's.
    std::vector<std::size_t> out_shape = s.raw.shape.empty() ? in_head.shape : s.raw.shape;
    const std::size_t in_cols = in_head.shape.empty() ? 1 : in_head.shape.back();
    if (s.packed) {
        if (in_cols % 2 != 0)
            throw Error(fmt::format("--packed: {} has rows of {} elements, which cannot be packed two per byte",
                                    s.input, in_cols));
        if (out_shape.empty()) out_shape = {1};
        out_shape.back() /= 2;
    }
    RawLayout raw_out{ElementType::u8, out_shape};
    out_head = open_array(s.output, raw_out, ro, false);
    if (out_head.type != ElementType::u8)
        throw Error(fmt::format("{}: wrong dtype: FP8 codes must be one byte per element (|u1 or V1), got {}", s.output,
                                name(out_head.type)));
    // A safetensors F8_* dtype says which format its codes are in: a different --to would
    // report every code as a mismatch instead of naming the mistake.
    if (out_head.codes_format && *out_head.codes_format != s.to)
        throw Error(
            fmt::format("{}: holds {} codes, but --to is {}", s.output, name(*out_head.codes_format), name(s.to)));
    if (s.packed ? out_head.shape != out_shape : out_head.shape != in_head.shape)
        throw Error(fmt::format("shape mismatch: {} is {}, {} is {}{}", s.input, shape_text(in_head.shape), s.output,
                                shape_text(out_head.shape),
                                s.packed ? fmt::format(" (packed: {} expected)", shape_text(out_shape)) : ""));
    // Nothing compared is not "bit-exact": an empty input (or a zero in --shape) is refused.
    if (numel(in_head.shape) == 0)
        throw Error(fmt::format("{}: no elements to compare (shape {})", s.input, shape_text(in_head.shape)));
    return raw_out;
}

// The scale file's header against the spec and the input's rows x cols: the type its one-byte
// scales are read as.
ScaleType check_scales(const ValidateFileSpec& s, const dump::ReadOptions& ro, const RawLayout& raw_scales,
                       std::size_t rows, std::size_t cols) {
    const ArrayFile sh = open_array(s.scales, raw_scales, ro, false);
    if (sh.type != ElementType::u8 && sh.type != ElementType::f32)
        throw Error(fmt::format("{}: wrong dtype: scales must be float32, E8M0 or E4M3 bytes, got {}", s.scales,
                                name(sh.type)));
    // One-byte scales: E8M0 unless --scales-dtype e4m3 (or a safetensors F8_E4M3 tensor).
    const bool e4m3 = s.scales_type == ScaleType::e4m3 || (sh.codes_format && *sh.codes_format == Format::e4m3);
    if (sh.type == ElementType::f32 && s.scales_type != ScaleType::f32)
        throw Error(fmt::format("{}: holds float32 scales, but --scales-dtype is {}", s.scales, name(s.scales_type)));
    ScaleType type = ScaleType::f32;
    if (sh.type == ElementType::u8) type = e4m3 ? ScaleType::e4m3 : ScaleType::e8m0;
    if (sh.codes_format && *sh.codes_format != Format::e8m0 && *sh.codes_format != Format::e4m3)
        throw Error(fmt::format("{}: holds {} codes; one-byte scales are E8M0 or E4M3 codes", s.scales,
                                name(*sh.codes_format)));
    if (sh.codes_format && *sh.codes_format == Format::e8m0 && s.scales_type == ScaleType::e4m3)
        throw Error(fmt::format("{}: holds E8M0 codes, but --scales-dtype is e4m3", s.scales));
    if (s.global && type != ScaleType::e4m3)
        throw Error(fmt::format("--global-scale: {} holds {} scales, not E4M3", s.scales, name(type)));
    std::size_t want = 0;
    try {
        want = stored_scale_count(s.layout, rows, cols, s.order);
    } catch (const std::invalid_argument& e) {
        throw Error(fmt::format("--scales-layout {}: {}", name(s.order), e.what()));
    }
    if (numel(sh.shape) != want)
        throw Error(fmt::format("{}: wrong size: {} blocks of a {} x {} input need {} scales{}, the file has {}",
                                s.scales, name(s.layout), rows, cols, want,
                                s.order == ScaleOrder::row_major ? "" : fmt::format(" ({})", name(s.order)),
                                numel(sh.shape)));
    return type;
}

// The block scales' data, as validate() reads them.
void load_scales(const ValidateFileSpec& s, const dump::ReadOptions& ro, const RawLayout& raw_scales, ScaleType type,
                 ValidateFiles& f) {
    const ArrayFile sf = open_array(s.scales, raw_scales, ro, true);
    StoredScales st;
    st.data = sf.data.data();
    st.count = sf.size();
    st.type = sf.type == ElementType::u8 ? type : ScaleType::f32;
    st.order = s.order;
    st.global = s.global.value_or(1.0f);
    Scaling& sc = f.request.scaling;
    try {  // E8M0 decodes exactly; E4M3 combines with the global scale (validate.hpp)
        f.block_scales = block_scale_values(st, s.layout, sc.rows, sc.cols, s.mode);
    } catch (const std::invalid_argument& e) {
        throw Error(fmt::format("{}: {} (changed while it was read?)", s.scales, e.what()));
    }
    sc.layout = s.layout;
    sc.blocks = f.block_scales.data();
    sc.block_count = f.block_scales.size();
}

}  // namespace

RawLayout parse_raw_layout(const std::string& dtype, const std::string& shape) {
    RawLayout raw;
    if (!dtype.empty()) {
        const auto t = parse_element_type(dtype);
        if (!t || t == ElementType::u8)
            throw Error(fmt::format("--dtype: unknown type '{}' (choose from f64, f32, f16, bf16)", dtype));
        raw.type = t;
    }
    if (shape.empty()) return raw;
    const auto s = parse_shape(shape);
    if (!s) throw Error(fmt::format("--shape: '{}' is not a shape like 4096x1024", shape));
    // The product must not wrap: 2^32 x 2^32 would read as 0 elements of an empty file.
    std::uint64_t n = 1;
    for (std::size_t d : *s)
        if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n) || n > (std::uint64_t{1} << 60))
            throw Error(fmt::format("--shape {}: more elements than any file holds", shape));
    raw.shape = *s;
    return raw;
}

std::unique_ptr<ValidateFiles> open_validate_files(const ValidateFileSpec& s, const dump::ReadOptions& ro,
                                                   const std::function<Policy(Wide)>& policy) {
    check_spec(s);
    auto f = std::make_unique<ValidateFiles>();
    ValidateRequest& rq = f->request;
    ArrayFile in_head, out_head;
    const RawLayout raw_out = check_codes(s, ro, policy, in_head, out_head, rq);
    const std::size_t cols = in_head.shape.empty() ? 1 : in_head.shape.back();
    const std::size_t rows = cols ? static_cast<std::size_t>(numel(in_head.shape)) / cols : 0;
    const RawLayout raw_scales{s.scales_type == ScaleType::f32 ? ElementType::f32 : ElementType::u8, {}};
    const ScaleType scale_type = s.scales.empty() ? ScaleType::f32 : check_scales(s, ro, raw_scales, rows, cols);

    // The data, mapped where it lies: validate reads each element once, and under mpirun each
    // rank only its own blocks' (plus the policy probes and the examples).
    f->in = open_array(s.input, s.raw, ro, true, true);
    f->out = open_array(s.output, raw_out, ro, true, true);
    if (f->in.type != in_head.type || f->in.shape != in_head.shape || f->out.type != out_head.type ||
        f->out.shape != out_head.shape)
        throw Error(fmt::format("{} or {} changed while it was read", s.input, s.output));
    if (s.packed) {
        try {
            f->unpacked = unpack_fp4_codes(f->out.bytes(), f->out.size(), rows, cols);
        } catch (const std::invalid_argument& e) {
            throw Error(fmt::format("{}: {}", s.output, e.what()));
        }
    }
    rq.input = f->in.bytes();
    rq.codes = s.packed ? f->unpacked.data() : f->out.bytes();
    rq.n = f->in.size();
    rq.scaling.mode = s.mode;
    if (s.mode != ScaleMode::none && s.scales.empty()) rq.scaling.value = s.value;
    f->shape.assign(f->in.shape.begin(), f->in.shape.end());
    if (s.scales.empty()) return f;
    rq.scaling.rows = rows;
    rq.scaling.cols = cols;
    load_scales(s, ro, raw_scales, scale_type, *f);
    return f;
}

}  // namespace fp8kit
