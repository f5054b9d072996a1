// .npy operands and outputs of the reference GEMM, read with the project's strict .npy reader.
#include "fp8kit/gemm/files.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "fp8kit/io/npy.hpp"

namespace fp8kit::gemm {
namespace {

NpyArray read(const std::string& path, const char* what) {
    try {
        return read_npy(path);
    } catch (const NpyError& e) {
        throw GemmInputError(fmt::format("{}: {}", what, e.what()));
    }
}

std::string shape_text(const std::vector<std::size_t>& s) {
    std::string t;
    for (std::size_t d : s) t += (t.empty() ? "" : " x ") + std::to_string(d);
    return t.empty() ? "scalar" : t;
}

std::vector<std::uint8_t> codes(const std::string& path, const char* what, std::vector<std::size_t>& shape) {
    NpyArray a = read(path, what);
    if (a.header.kind != 'u' || a.header.item_size != 1)
        throw GemmInputError(fmt::format("{} {}: dtype {} is not uint8 codes (|u1)", what, path, a.header.descr));
    if (a.header.shape.size() != 2)
        throw GemmInputError(fmt::format("{} {}: shape {} is not 2-D", what, path, shape_text(a.header.shape)));
    shape = a.header.shape;
    return std::vector<std::uint8_t>(a.data.begin(), a.data.end());
}

// A number, or a float32 .npy whose shape says tensorwise / rowwise / block.
ScaleKind scales(const std::string& text, const char* what, bool is_b, std::size_t rows, std::size_t k,
                 std::vector<float>& out) {
    char* end = nullptr;
    errno = 0;
    const float v = std::strtof(text.c_str(), &end);
    if (!text.empty() && *end == '\0') {
        if (errno == ERANGE || !std::isfinite(v))
            throw GemmInputError(fmt::format("{} '{}' is not a finite float32", what, text));
        out = {v};
        return ScaleKind::tensor;
    }
    NpyArray a = read(text, what);
    if (a.header.descr != "<f4")
        throw GemmInputError(fmt::format("{} {}: dtype {} is not float32 (<f4)", what, text, a.header.descr));
    out.resize(a.header.element_count());
    // (No memcpy of nothing: a 0-element array's data() may be null, which memcpy may not be given.)
    if (!out.empty()) std::memcpy(out.data(), a.data.data(), out.size() * sizeof(float));
    return scale_kind_for_shape(a.header.shape, is_b, rows, k, fmt::format("{} {}", what, text));
}

}  // namespace

ScaleKind scale_kind_for_shape(const std::vector<std::size_t>& s, bool is_b, std::size_t rows, std::size_t k,
                               const std::string& what) {
    std::size_t n = 1;
    for (std::size_t d : s) n *= d;
    const std::size_t kb = (k + 127) / 128, brows = is_b ? (rows + 127) / 128 : rows;
    if (n == 1 && s.size() <= 1) return ScaleKind::tensor;
    if (s.size() == 1 && s[0] == rows) return ScaleKind::row;
    if (s.size() == 2 && s[0] == brows && s[1] == kb) return ScaleKind::block;
    throw GemmInputError(fmt::format("{}: shape {} fits none of: one value, {} (rowwise), {} x {} (block {})", what,
                                     shape_text(s), rows, brows, kb, is_b ? "128x128" : "1x128"));
}

void load_inputs(GemmInputs& in, const std::string& a_path, const std::string& b_path, Format a_format, Format b_format,
                 const std::string& scale_a, const std::string& scale_b, OutType out) {
    std::vector<std::size_t> sa, sb;
    in.a = codes(a_path, "A", sa);
    in.b = codes(b_path, "B", sb);
    if (sa[1] != sb[1])
        throw GemmInputError(fmt::format("B {}: K = {} differs from A's K = {} ({} is {}, B must be N x K)", b_path,
                                         sb[1], sa[1], a_path, shape_text(sa)));
    GemmRequest& rq = in.request;
    rq.k = sa[1];
    rq.out = out;
    rq.a.rows = sa[0];
    rq.b.rows = sb[0];
    rq.a.format = a_format;
    rq.b.format = b_format;
    rq.a.scale_kind = scales(scale_a, "--scale-a", false, rq.a.rows, rq.k, in.scale_a);
    rq.b.scale_kind = scales(scale_b, "--scale-b", true, rq.b.rows, rq.k, in.scale_b);
    rq.a.codes = in.a.data();
    rq.b.codes = in.b.data();
    rq.a.scales = in.scale_a.data();
    rq.a.scale_count = in.scale_a.size();
    rq.b.scales = in.scale_b.data();
    rq.b.scale_count = in.scale_b.size();
}

std::vector<std::uint32_t> load_output(const std::string& path, std::size_t m, std::size_t n, OutType out) {
    NpyArray a = read(path, "output");
    const std::string want = out == OutType::f32 ? "<f4" : "<u2";
    if (a.header.descr != want)
        throw GemmInputError(fmt::format("output {}: dtype {} is not {} ({} output)", path, a.header.descr, want,
                                         out == OutType::f32 ? "f32" : "bf16 bits"));
    if (a.header.shape != std::vector<std::size_t>{m, n})
        throw GemmInputError(fmt::format("output {}: shape {} is not {} x {}", path, shape_text(a.header.shape), m, n));
    std::vector<std::uint32_t> d(m * n);
    for (std::size_t e = 0; e < d.size(); ++e) {
        if (out == OutType::f32)
            std::memcpy(&d[e], a.data.data() + 4 * e, 4);
        else
            d[e] = a.data[2 * e] | (static_cast<std::uint32_t>(a.data[2 * e + 1]) << 8);
    }
    return d;
}

void save_output(const std::string& path, const std::vector<std::uint32_t>& d, std::size_t m, std::size_t n,
                 OutType out) {
    if (out == OutType::f32) {
        write_npy(path, "<f4", {m, n}, d.data(), d.size() * 4, "-o");
    } else {
        std::vector<std::uint16_t> h(d.begin(), d.end());
        write_npy(path, "<u2", {m, n}, h.data(), h.size() * 2, "-o");
    }
}

}  // namespace fp8kit::gemm
