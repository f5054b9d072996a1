#include "fp8kit/convert/names.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace fp8kit {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    std::replace(out.begin(), out.end(), '_', '-');
    return out;
}

template <class E, std::size_t N>
std::optional<E> lookup(std::string_view s, const std::pair<const char*, E> (&table)[N]) {
    const std::string key = lower(s);
    for (const auto& [n, v] : table)
        if (key == lower(n)) return v;
    return std::nullopt;
}

const std::pair<const char*, Format> kFormats[] = {
    {"e4m3", Format::e4m3},
    {"e4m3fn", Format::e4m3},
    {"float8_e4m3fn", Format::e4m3},
    {"f8_e4m3", Format::e4m3},
    {"e5m2", Format::e5m2},
    {"float8_e5m2", Format::e5m2},
    {"f8_e5m2", Format::e5m2},
    {"e4m3fnuz", Format::e4m3fnuz},
    {"float8_e4m3fnuz", Format::e4m3fnuz},
    {"f8_e4m3fnuz", Format::e4m3fnuz},
    {"e5m2fnuz", Format::e5m2fnuz},
    {"float8_e5m2fnuz", Format::e5m2fnuz},
    {"f8_e5m2fnuz", Format::e5m2fnuz},
    {"e8m0", Format::e8m0},
    {"e8m0fnu", Format::e8m0},
    {"float8_e8m0fnu", Format::e8m0},
    {"ue8m0", Format::e8m0},
    {"f8_e8m0", Format::e8m0},
    {"e2m1", Format::e2m1},
    {"float4_e2m1fn", Format::e2m1},
    {"e2m1fn", Format::e2m1},
    {"e2m3", Format::e2m3},
    {"float6_e2m3fn", Format::e2m3},
    {"e2m3fn", Format::e2m3},
    {"e3m2", Format::e3m2},
    {"float6_e3m2fn", Format::e3m2},
    {"e3m2fn", Format::e3m2},
    {"e3m4", Format::e3m4},
    {"float8_e3m4", Format::e3m4},
    {"e4m3b11fnuz", Format::e4m3b11fnuz},
    {"float8_e4m3b11fnuz", Format::e4m3b11fnuz},
    {"e4m3ieee", Format::e4m3ieee},
    {"float8_e4m3", Format::e4m3ieee},
};
const std::pair<const char*, Wide> kWide[] = {
    {"f64", Wide::f64},   {"float64", Wide::f64},   {"double", Wide::f64}, {"binary64", Wide::f64},
    {"f32", Wide::f32},   {"float32", Wide::f32},   {"float", Wide::f32},  {"binary32", Wide::f32},
    {"f16", Wide::f16},   {"float16", Wide::f16},   {"half", Wide::f16},   {"binary16", Wide::f16},
    {"bf16", Wide::bf16}, {"bfloat16", Wide::bf16},
};
const std::pair<const char*, Rounding> kRounding[] = {
    {"nearest-even", Rounding::nearest_even},       {"rne", Rounding::nearest_even},
    {"nearest-away", Rounding::nearest_away},       {"rna", Rounding::nearest_away},
    {"toward-zero", Rounding::toward_zero},         {"rz", Rounding::toward_zero},
    {"toward-positive", Rounding::toward_positive}, {"rp", Rounding::toward_positive},
    {"toward-negative", Rounding::toward_negative}, {"rm", Rounding::toward_negative},
    {"stochastic", Rounding::stochastic},           {"sr", Rounding::stochastic},
};
const std::pair<const char*, Overflow> kOverflow[] = {
    {"saturate-all", Overflow::saturate_all},
    {"satfinite", Overflow::saturate_all},
    {"saturate-finite", Overflow::saturate_finite},
    {"no-saturate", Overflow::no_saturate},
    {"nosat", Overflow::no_saturate},
};
const std::pair<const char*, NanEncoding> kNan[] = {
    {"canonical", NanEncoding::canonical},       {"signed-all-ones", NanEncoding::signed_all_ones},
    {"signed-quiet", NanEncoding::signed_quiet}, {"signed-quiet-payload", NanEncoding::signed_quiet_payload},
    {"positive-max", NanEncoding::positive_max}, {"negated-zero", NanEncoding::negated_zero},
};
const std::pair<const char*, Profile> kProfiles[] = {
    {"cuda-satfinite", Profile::cuda_satfinite},
    {"cuda-nosat", Profile::cuda_nosat},
    {"ml_dtypes", Profile::ml_dtypes},
    {"torch", Profile::torch},
};

}  // namespace

std::optional<Format> parse_format(std::string_view s) { return lookup(s, kFormats); }
std::optional<Wide> parse_wide(std::string_view s) { return lookup(s, kWide); }
std::optional<Rounding> parse_rounding(std::string_view s) { return lookup(s, kRounding); }
std::optional<Overflow> parse_overflow(std::string_view s) { return lookup(s, kOverflow); }
std::optional<NanEncoding> parse_nan(std::string_view s) { return lookup(s, kNan); }
std::optional<Profile> parse_profile(std::string_view s) { return lookup(s, kProfiles); }

std::string_view name(Format f) {
    switch (f) {
        case Format::e4m3: return "e4m3";
        case Format::e5m2: return "e5m2";
        case Format::e4m3fnuz: return "e4m3fnuz";
        case Format::e5m2fnuz: return "e5m2fnuz";
        case Format::e8m0: return "e8m0";
        case Format::e2m1: return "e2m1";
        case Format::e2m3: return "e2m3";
        case Format::e3m2: return "e3m2";
        case Format::e3m4: return "e3m4";
        case Format::e4m3b11fnuz: return "e4m3b11fnuz";
        case Format::e4m3ieee: return "e4m3ieee";
    }
    return "?";
}
std::string_view ml_dtypes_name(Format f) {
    switch (f) {
        case Format::e4m3: return "float8_e4m3fn";
        case Format::e5m2: return "float8_e5m2";
        case Format::e4m3fnuz: return "float8_e4m3fnuz";
        case Format::e5m2fnuz: return "float8_e5m2fnuz";
        case Format::e8m0: return "float8_e8m0fnu";
        case Format::e2m1: return "float4_e2m1fn";
        case Format::e2m3: return "float6_e2m3fn";
        case Format::e3m2: return "float6_e3m2fn";
        case Format::e3m4: return "float8_e3m4";
        case Format::e4m3b11fnuz: return "float8_e4m3b11fnuz";
        case Format::e4m3ieee: return "float8_e4m3";
    }
    return "?";
}
std::string_view name(Wide w) {
    switch (w) {
        case Wide::f64: return "f64";
        case Wide::f32: return "f32";
        case Wide::f16: return "f16";
        case Wide::bf16: return "bf16";
    }
    return "?";
}
std::string_view name(Rounding r) {
    switch (r) {
        case Rounding::nearest_even: return "nearest-even";
        case Rounding::nearest_away: return "nearest-away";
        case Rounding::toward_zero: return "toward-zero";
        case Rounding::toward_positive: return "toward-positive";
        case Rounding::toward_negative: return "toward-negative";
        case Rounding::stochastic: return "stochastic";
    }
    return "?";
}
std::string_view name(Overflow o) {
    switch (o) {
        case Overflow::saturate_all: return "saturate-all";
        case Overflow::saturate_finite: return "saturate-finite";
        case Overflow::no_saturate: return "no-saturate";
    }
    return "?";
}
std::string_view name(NanEncoding n) {
    switch (n) {
        case NanEncoding::canonical: return "canonical";
        case NanEncoding::signed_all_ones: return "signed-all-ones";
        case NanEncoding::signed_quiet: return "signed-quiet";
        case NanEncoding::signed_quiet_payload: return "signed-quiet-payload";
        case NanEncoding::positive_max: return "positive-max";
        case NanEncoding::negated_zero: return "negated-zero";
    }
    return "?";
}
std::string_view name(Profile p) {
    switch (p) {
        case Profile::cuda_satfinite: return "cuda-satfinite";
        case Profile::cuda_nosat: return "cuda-nosat";
        case Profile::ml_dtypes: return "ml_dtypes";
        case Profile::torch: return "torch";
    }
    return "?";
}

std::string format_choices() {
    std::string s;
    for (Format f : emu::kAllFormats) s += (s.empty() ? "" : ", ") + std::string(name(f));
    return s;
}
std::string wide_choices() { return "f64, f32, f16, bf16"; }
std::string rounding_choices() {
    return "nearest-even, nearest-away, toward-zero, toward-positive, toward-negative, stochastic";
}
std::string overflow_choices() { return "saturate-all, saturate-finite, no-saturate"; }
std::string nan_choices() {
    return "canonical, signed-all-ones, signed-quiet, signed-quiet-payload, positive-max, negated-zero";
}
std::string profile_choices() { return "cuda-satfinite, cuda-nosat, ml_dtypes, torch"; }

std::string describe(const Policy& p) {
    return std::string(name(p.rounding)) + ", " + std::string(name(p.overflow)) + ", NaN " + std::string(name(p.nan));
}

}  // namespace fp8kit
