// quantize / dequantize of arrays, encode / decode of scalars, format facts.
#include <fmt/format.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <algorithm>
#include <type_traits>
#include <vector>

#include "fp8kit/convert/hadamard.hpp"
#include "bindings.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::py {
namespace {

template <class T>
T bits_of(double v) {
    T b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}
template <class T>
T from_bits(std::uint64_t b) {
    T v;
    std::memcpy(&v, &b, sizeof v);
    return v;
}

// s = x * scale before the cast: binary64 inputs multiply in binary64; float32, float16 and
// bfloat16 inputs widen exactly to float32 and multiply by fl32(scale) in float32, as the
// frameworks' cast kernels do. Blocks of kBlock elements are scaled into a stack buffer and
// encoded from there (f64 or f32 bits); block b passes first_index + b * kBlock, so stochastic
// rounding draws the same bits as an unblocked call.
constexpr std::size_t kBlock = 4096;

template <class W>
float widen(typename W::storage_t b) {
    float v;
    if constexpr (std::is_same_v<W, emu::Binary32>) {
        std::memcpy(&v, &b, sizeof v);
    } else if constexpr (std::is_same_v<W, emu::BFloat16>) {
        const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;  // bf16 is the top half of f32
        std::memcpy(&v, &u, sizeof v);
    } else {
        const auto u = static_cast<std::uint32_t>(emu::convert<W, emu::Binary32>(b, emu::kDecodePolicy));
        std::memcpy(&v, &u, sizeof v);
    }
    return v;
}

template <class W>
void encode_scaled(const void* in, std::uint8_t* out, std::size_t n, Format to, const Policy& policy, double scale,
                   std::uint64_t seed, std::uint64_t first_index) {
    using S = typename W::storage_t;
    constexpr bool f64 = std::is_same_v<W, emu::Binary64>;
    using T = std::conditional_t<f64, double, float>;
    const auto* src = static_cast<const S*>(in);
    const T sc = static_cast<T>(scale);
    const auto blocks = static_cast<std::ptrdiff_t>((n + kBlock - 1) / kBlock);
#pragma omp parallel for schedule(static)
    for (std::ptrdiff_t b = 0; b < blocks; ++b) {
        T buf[kBlock];
        const std::size_t lo = static_cast<std::size_t>(b) * kBlock, m = std::min(kBlock, n - lo);
        for (std::size_t i = 0; i < m; ++i) {
            if constexpr (f64) {
                double x;
                std::memcpy(&x, &src[lo + i], sizeof x);
                buf[i] = x * sc;
            } else {
                buf[i] = widen<W>(src[lo + i]) * sc;
            }
        }
        // Inside this parallel region encode_array's own OpenMP loop runs on one thread.
        encode_array(to, f64 ? Wide::f64 : Wide::f32, buf, out + lo, m, policy, seed, first_index + lo);
    }
}

void check_scale(double scale, const char* arg) {
    if (!std::isfinite(scale) || !(scale > 0))
        throw std::invalid_argument(fmt::format("{}: must be finite and > 0, got {}", arg, scale));
}

pyb::array_t<std::uint8_t> quantize(const pyb::array& x, const std::string& wide, const std::string& format,
                                    const OptStr& profile, const OptStr& rounding, const OptStr& overflow,
                                    const OptStr& nan, double scale, std::uint64_t seed, std::uint64_t index_offset) {
    const Wide from = require_wide(wide, "dtype");
    const Format to = require_format(format, "format");
    const Policy policy = resolve_policy(to, from, profile, rounding, overflow, nan);
    check_scale(scale, "scale");
    const float scale32 = static_cast<float>(scale);
    if (from != Wide::f64 && !(std::isfinite(scale32) && scale32 > 0))
        throw std::invalid_argument(fmt::format("scale: {} is not a positive finite float32", scale));
    const void* in = contiguous_data(x, wide_size(from), "x");
    const auto n = static_cast<std::size_t>(x.size());
    pyb::array_t<std::uint8_t> out(shape_of(x));
    std::uint8_t* o = out.mutable_data();
    {
        pyb::gil_scoped_release nogil;
        if (scale == 1.0) {
            encode_array(to, from, in, o, n, policy, seed, index_offset);
        } else {
            emu::with_wide(from, [&](auto w) {
                encode_scaled<decltype(w)>(in, o, n, to, policy, from == Wide::f64 ? scale : scale32, seed,
                                           index_offset);
            });
        }
    }
    return out;
}

// x^ = decode(q) * scale_inv: exact decode, then one multiply in binary64 (f64 output) or
// float32 (other outputs), then for float16/bfloat16 one nearest-even rounding to the output.
pyb::array dequantize(const pyb::array& codes, const std::string& format, const std::string& wide, double scale_inv) {
    const Format from = require_format(format, "format");
    const Wide to = require_wide(wide, "dtype");
    check_scale(scale_inv, "scale_inv");
    const float inv32 = static_cast<float>(scale_inv);
    if (to != Wide::f64 && !(std::isfinite(inv32) && inv32 > 0))
        throw std::invalid_argument(fmt::format("scale_inv: {} is not a positive finite float32", scale_inv));
    const auto* in = static_cast<const std::uint8_t*>(contiguous_data(codes, 1, "codes"));
    const auto n = static_cast<std::size_t>(codes.size());
    const auto shape = shape_of(codes);
    pyb::array out;
    switch (to) {
        case Wide::f64: out = pyb::array_t<std::uint64_t>(shape); break;
        case Wide::f32: out = pyb::array_t<std::uint32_t>(shape); break;
        default: out = pyb::array_t<std::uint16_t>(shape); break;
    }
    void* o = out.mutable_data();
    const auto count = static_cast<std::ptrdiff_t>(n);
    {
        pyb::gil_scoped_release nogil;
        if (scale_inv == 1.0) {
            decode_array(from, to, in, o, n);
        } else if (to == Wide::f64) {
            decode_array(from, Wide::f64, in, o, n);
            auto* d = static_cast<double*>(o);
#pragma omp parallel for schedule(static)
            for (std::ptrdiff_t i = 0; i < count; ++i) d[i] = d[i] * scale_inv;
        } else if (to == Wide::f32) {
            decode_array(from, Wide::f32, in, o, n);
            auto* d = static_cast<float*>(o);
#pragma omp parallel for schedule(static)
            for (std::ptrdiff_t i = 0; i < count; ++i) d[i] = d[i] * inv32;
        } else {
            std::vector<float> tmp(n);
            decode_array(from, Wide::f32, in, tmp.data(), n);
            auto* d = static_cast<std::uint16_t*>(o);
            emu::with_wide(to, [&](auto w) {
                using W = decltype(w);
#pragma omp parallel for schedule(static)
                for (std::ptrdiff_t i = 0; i < count; ++i) {
                    std::uint32_t b;
                    const float v = tmp[i] * inv32;
                    std::memcpy(&b, &v, sizeof b);
                    d[i] = static_cast<std::uint16_t>(emu::convert<emu::Binary32, W>(b, emu::kDecodePolicy));
                }
            });
        }
    }
    return out;
}

// One value: read as binary64, rounded to `wide` like a C cast, then encoded (fp8kit encode).
int encode_scalar(double value, const std::string& format, const std::string& wide, const OptStr& profile,
                  const OptStr& rounding, const OptStr& overflow, const OptStr& nan, std::uint32_t random) {
    const Format to = require_format(format, "format");
    const Wide from = require_wide(wide, "dtype");
    const Policy p = resolve_policy(to, from, profile, rounding, overflow, nan);
    std::uint64_t b = bits_of<std::uint64_t>(value);
    if (from != Wide::f64)
        b = emu::with_wide(from, [&](auto w) -> std::uint64_t {
            return emu::convert<emu::Binary64, decltype(w)>(b, emu::kDecodePolicy);
        });
    return emu::encode(to, from, b, p, random);
}

std::uint8_t require_code(int code, Format f) {
    const int n = emu::code_count(f);  // 16 (FP4), 64 (FP6) or 256
    if (code < 0 || code >= n)
        throw std::invalid_argument(fmt::format("code: {} is not in 0..{} ({})", code, n - 1, name(f)));
    return static_cast<std::uint8_t>(code);
}

pyb::dict code_info(int code, const std::string& format) {
    const Format f = require_format(format, "format");
    const std::uint8_t c = require_code(code, f);
    pyb::dict d;
    d["code"] = static_cast<int>(c);
    d["format"] = std::string(name(f));
    d["fields"] = fields(f, c);
    d["class"] = name(classify(f, c));
    d["value"] = decode_value(f, c);
    return d;
}

pyb::list formats() {
    pyb::list out;
    for (Format f : emu::kAllFormats) {
        const FormatInfo i = format_info(f);
        pyb::dict d;
        d["name"] = std::string(name(f));
        d["ml_dtypes"] = std::string(ml_dtypes_name(f));
        d["exp_bits"] = i.exp_bits;
        d["man_bits"] = i.man_bits;
        d["bias"] = i.bias;
        d["has_sign"] = i.has_sign;
        d["has_inf"] = i.has_inf;
        d["has_negative_zero"] = i.has_negative_zero;
        d["has_zero"] = i.has_zero;
        d["max_finite"] = i.max_finite;
        d["min_normal"] = i.min_normal;
        d["min_subnormal"] = i.min_subnormal;
        d["max_finite_code"] = i.max_finite_code;
        d["min_normal_code"] = i.min_normal_code;
        d["min_subnormal_code"] = i.min_subnormal_code;
        d["emin"] = i.emin;
        d["emax"] = i.emax;
        d["total_bits"] = i.total_bits;
        d["code_count"] = i.code_count;
        d["has_nan"] = i.has_nan;
        d["nan_codes"] = i.nan_codes;
        d["inf_codes"] = i.inf_codes;
        out.append(d);
    }
    return out;
}

pyb::dict policy_dict(const std::string& format, const std::string& wide, const OptStr& profile, const OptStr& rounding,
                      const OptStr& overflow, const OptStr& nan) {
    const Format to = require_format(format, "format");
    const Policy p = resolve_policy(to, require_wide(wide, "dtype"), profile, rounding, overflow, nan);
    pyb::dict d;
    d["rounding"] = std::string(name(p.rounding));
    d["overflow"] = std::string(name(p.overflow));
    d["nan"] = std::string(name(p.nan));
    d["description"] = describe(p);
    return d;
}

// TransformerEngine's NVFP4 random Hadamard transform of the column-wise operand (lib
// convert/hadamard.hpp): bits of a 2-D (rows, cols) array in, bits of (cols, rows) out.
pyb::array te_rht16_py(const pyb::array& x, const std::string& wide, bool random_signs) {
    const Wide w = require_wide(wide, "dtype");
    if (x.ndim() != 2)
        throw std::invalid_argument(fmt::format("x: a 2-D array is needed, got {} dimensions", x.ndim()));
    const auto rows = static_cast<std::size_t>(x.shape(0)), cols = static_cast<std::size_t>(x.shape(1));
    const void* in = contiguous_data(x, wide_size(w), "x");
    std::vector<unsigned char> out;
    {
        pyb::gil_scoped_release nogil;
        out = te_rht16_columnwise(in, w, rows, cols, random_signs);
    }
    const std::vector<pyb::ssize_t> shape{static_cast<pyb::ssize_t>(cols), static_cast<pyb::ssize_t>(rows)};
    if (w == Wide::f32) {
        pyb::array_t<std::uint32_t> a(shape);
        std::memcpy(a.mutable_data(), out.data(), out.size());
        return a;
    }
    pyb::array_t<std::uint16_t> a(shape);
    std::memcpy(a.mutable_data(), out.data(), out.size());
    return a;
}

}  // namespace

void bind_convert(pyb::module_& m) {
    m.def("te_rht16_bits", &te_rht16_py, pyb::arg("x"), pyb::arg("wide"), pyb::arg("random_signs"));
    using namespace pyb::literals;
    m.def("quantize_bits", &quantize, "x"_a, "wide"_a, "format"_a, "profile"_a, "rounding"_a, "overflow"_a, "nan"_a,
          "scale"_a, "seed"_a, "index_offset"_a);
    m.def("dequantize_bits", &dequantize, "codes"_a, "format"_a, "wide"_a, "scale_inv"_a);
    m.def("encode", &encode_scalar, "value"_a, "format"_a, "wide"_a, "profile"_a, "rounding"_a, "overflow"_a, "nan"_a,
          "random"_a);
    m.def(
        "decode",
        [](int code, const std::string& format) {
            const Format f = require_format(format, "format");
            return decode_value(f, require_code(code, f));
        },
        "code"_a, "format"_a);
    m.def("code_info", &code_info, "code"_a, "format"_a);
    m.def("formats", &formats);
    m.def("policy", &policy_dict, "format"_a, "wide"_a, "profile"_a, "rounding"_a, "overflow"_a, "nan"_a);
    m.def(
        "stochastic_bits", [](std::uint64_t seed, std::uint64_t index) { return emu::stochastic_bits(seed, index); },
        "seed"_a, "index"_a);
}

}  // namespace fp8kit::py
