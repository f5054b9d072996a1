// Step-by-step replay of a tensorwise recipe over an amax series.
#include <array>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/convert/format_info.hpp"
#include "fp8kit/analysis/replay.hpp"

namespace fp8kit::replay {

namespace {

// The definition: fl32(amax * scale) encoded without saturation lands on Inf or NaN.
bool product_overflows(float s, Format f) {
    std::uint32_t bits;
    std::memcpy(&bits, &s, sizeof bits);
    const auto c = classify(f, emu::encode(f, Wide::f32, bits, emu::kRneNoSaturate));
    return c == CodeClass::infinity || c == CodeClass::nan;
}

// Round-to-nearest-even is monotone in the magnitude, so a finite product overflows exactly when
// its magnitude's bits exceed a limit: the largest finite magnitude that does not, found once per
// format and sign by bisection over float32 bit patterns with product_overflows itself (sweep
// asks tensors x steps x 63 candidates times; the encode was a quarter of its time). The same
// bisection as MagnitudeHistogram's overflow limit.
struct OverflowLimit {
    std::uint32_t pos = 0, neg = 0;  // largest magnitude bits (sign cleared) that do not overflow
};

std::uint32_t limit_of(Format f, std::uint32_t sign) {
    std::uint32_t lo = 0, hi = 0x7F800000u;  // lo: +-0 never overflows; hi: the first non-finite bits
    while (hi - lo > 1) {
        const std::uint32_t mid = lo + (hi - lo) / 2;
        float v;
        const std::uint32_t b = sign | mid;
        std::memcpy(&v, &b, sizeof v);
        (product_overflows(v, f) ? hi : lo) = mid;
    }
    return lo;
}

const OverflowLimit& overflow_limit(Format f) {
    static const auto table = [] {
        std::array<OverflowLimit, emu::kNumFormats> t{};
        for (int i = 0; i < emu::kNumFormats; ++i)
            t[static_cast<std::size_t>(i)] = {limit_of(emu::kAllFormats[i], 0),
                                              limit_of(emu::kAllFormats[i], 0x80000000u)};
        return t;
    }();
    for (int i = 0; i < emu::kNumFormats; ++i)
        if (emu::kAllFormats[i] == f) return table[static_cast<std::size_t>(i)];
    throw std::invalid_argument("replay::overflows: unknown format");
}

}  // namespace

bool overflows(float amax, float scale, Format f) {
    if (std::isnan(amax) || std::isnan(scale)) return false;
    if (std::isinf(amax)) return true;
    const float s = amax * scale;     // float32 product, as the cast kernels compute it
    if (std::isnan(s)) return false;  // 0 * Inf: a zero amax under an Inf scale
    if (std::isinf(s)) return true;
    std::uint32_t bits;
    std::memcpy(&bits, &s, sizeof bits);
    const OverflowLimit& lim = overflow_limit(f);
    return (bits & 0x7FFFFFFFu) > ((bits >> 31) ? lim.neg : lim.pos);
}

bool overflows(float amax, float scale, Format f, Rounding rounding) {
    if (rounding != Rounding::stochastic) return overflows(amax, scale, f);
    if (std::isnan(amax) || std::isnan(scale)) return false;
    if (std::isinf(amax)) return true;
    const float s = amax * scale;
    if (std::isnan(s)) return false;
    return std::fabs(s) > fp8_max(f);  // Inf included
}

float overflow_threshold(Format f) {
    const std::uint32_t bits = overflow_limit(f).pos;
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
}

bool overflows_by_encode(float amax, float scale, Format f) {
    if (std::isnan(amax) || std::isnan(scale)) return false;
    if (std::isinf(amax)) return true;
    const float s = amax * scale;
    if (std::isnan(s)) return false;
    if (std::isinf(s)) return true;
    return product_overflows(s, f);
}

Format role_format(const RecipeSpec& r, Role role, std::optional<Format> forced) {
    return forced ? *forced : r.role(role).format;
}

void require_per_tensor(const RecipeSpec& r, Role role) {
    if (r.role(role).granularity != Granularity::tensor)
        throw std::invalid_argument(fmt::format(
            "recipe '{}' scales {} tensors per {} ({}x{}): that needs the tensor data (give dumps to sweep), "
            "an amax trace has one amax per tensor and step",
            r.name, name(role), name(r.role(role).granularity), r.role(role).block_rows, r.role(role).block_cols));
}

void check_recipe(const RecipeSpec& r) {
    for (const Role role : {Role::activation, Role::weight, Role::gradient})
        if (r.role(role).granularity == Granularity::tensor) return;
    require_per_tensor(r, Role::activation);  // throws: no role is per tensor
}

std::vector<float> scales(const RecipeSpec& r, Role role, Format f, const std::vector<float>& amax) {
    std::vector<float> out;
    scales(r, role, f, amax, out);
    return out;
}

void scales(const RecipeSpec& r, Role role, Format f, const std::vector<float>& amax, std::vector<float>& out) {
    require_per_tensor(r, role);
    out.clear();
    out.reserve(amax.size());
    const float fmax = fp8_max(f);
    switch (r.kind) {
        case RecipeKind::delayed: {
            DelayedScaling d(fmax, r.history_len, r.algo, r.margin);
            for (float a : amax) {
                out.push_back(d.scale_for_step());
                d.record(a);
            }
            break;
        }
        case RecipeKind::windowed: {
            MsampScaling m(fmax, r.role(role).window, r.margin);
            for (float a : amax) {
                out.push_back(m.scale_for_step(a));
                m.record(a);
            }
            break;
        }
        case RecipeKind::current: {
            RecipeSpec rr = r;
            RoleSpec& rs = role == Role::activation ? rr.input : role == Role::weight ? rr.weight : rr.grad;
            rs.format = f;
            for (float a : amax) out.push_back(recipe_scale(rr, role, a).scale);
            break;
        }
    }
}

SeriesResult replay_series(const RecipeSpec& r, const trace::Series& s, std::optional<Format> forced) {
    SeriesResult o;
    replay_series(r, s, forced, o);
    return o;
}

void replay_series(const RecipeSpec& r, const trace::Series& s, std::optional<Format> forced, SeriesResult& o) {
    o.tensor = s.tensor;  // assignments reuse o's buffers (sweep replays 63 recipes per series)
    o.role = s.role;
    o.format = role_format(r, s.role, forced);
    o.steps = s.steps;
    o.amax = s.amax;
    scales(r, s.role, o.format, s.amax, o.scale);
    o.overflow_steps = 0;
    o.worst_headroom = 0;
    o.worst_step = -1;
    const double fmax = fp8_max(o.format);
    const Rounding rounding = r.policy_for(s.role).rounding;
    o.headroom.resize(s.amax.size());
    o.overflow.resize(s.amax.size());
    for (std::size_t i = 0; i < s.amax.size(); ++i) {
        const double h = static_cast<double>(s.amax[i]) * static_cast<double>(o.scale[i]) / fmax;
        o.headroom[i] = h;
        o.overflow[i] = overflows(s.amax[i], o.scale[i], o.format, rounding) ? 1 : 0;
        o.overflow_steps += o.overflow[i];
        if (!std::isnan(h) && (o.worst_step < 0 || h > o.worst_headroom)) {
            o.worst_headroom = h;
            o.worst_step = s.steps[i];
        }
    }
}

}  // namespace fp8kit::replay
