#include <fmt/format.h>

#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/emu/emu.hpp"

namespace fp8kit::py {

Format require_format(const std::string& s, const char* arg) {
    const auto f = parse_format(s);
    if (!f) throw std::invalid_argument(fmt::format("{}: unknown format '{}' (choose from {})", arg, s, format_choices()));
    return *f;
}

Wide require_wide(const std::string& s, const char* arg) {
    const auto w = parse_wide(s);
    if (!w) throw std::invalid_argument(fmt::format("{}: unknown type '{}' (choose from {})", arg, s, wide_choices()));
    return *w;
}

Policy resolve_policy(Format format, Wide from, const OptStr& profile, const OptStr& round,
                      const OptStr& overflow, const OptStr& nan) {
    using std::invalid_argument;
    if (profile) {
        const auto p = parse_profile(*profile);
        if (!p) throw invalid_argument(fmt::format("profile: unknown profile '{}' (choose from {})", *profile, profile_choices()));
        if (overflow || nan)
            throw invalid_argument("profile fixes the overflow and NaN policy: drop overflow/nan, or drop profile");
        Rounding r = Rounding::toward_zero;
        if (format == Format::e8m0) {
            if (!round)
                throw invalid_argument(fmt::format("profile {} with e8m0 needs rounding='toward-zero' or 'toward-positive'", *profile));
            const auto pr = parse_rounding(*round);
            if (!pr) throw invalid_argument(fmt::format("rounding: unknown rounding '{}' (choose from {})", *round, rounding_choices()));
            r = *pr;
        } else if (round) {
            throw invalid_argument(fmt::format("profile {} rounds {} to nearest-even: drop rounding, or drop profile", *profile, name(format)));
        }
        const auto res = emu::profile_policy(*p, format, from, r);
        if (!res.ok) {
            if (format == Format::e8m0 && (*p == Profile::cuda_satfinite || *p == Profile::cuda_nosat))
                throw invalid_argument(fmt::format("profile {}: cuda_fp8.h converts to e8m0 only toward-zero or toward-positive, not {}", *profile, *round));
            throw invalid_argument(fmt::format("profile {} has no conversion to {}", *profile, name(format)));
        }
        return res.policy;
    }
    if (!round || !overflow || !nan)
        throw invalid_argument("name the conversion: profile=P (" + profile_choices() +
                               "), or all of rounding=, overflow= and nan=");
    const auto r = parse_rounding(*round);
    if (!r) throw invalid_argument(fmt::format("rounding: unknown rounding '{}' (choose from {})", *round, rounding_choices()));
    const auto o = parse_overflow(*overflow);
    if (!o) throw invalid_argument(fmt::format("overflow: unknown policy '{}' (choose from {})", *overflow, overflow_choices()));
    const auto n = parse_nan(*nan);
    if (!n) throw invalid_argument(fmt::format("nan: unknown encoding '{}' (choose from {})", *nan, nan_choices()));
    return Policy{*r, *o, *n};
}

const void* contiguous_data(const pyb::array& a, std::size_t itemsize, const char* arg) {
    if (!(a.flags() & pyb::array::c_style))
        throw std::invalid_argument(fmt::format("{}: array must be C-contiguous", arg));
    if (static_cast<std::size_t>(a.itemsize()) != itemsize)
        throw std::invalid_argument(fmt::format("{}: elements of {} bytes expected, got {}", arg, itemsize, a.itemsize()));
    return a.data();
}

std::vector<pyb::ssize_t> shape_of(const pyb::array& a) {
    return std::vector<pyb::ssize_t>(a.shape(), a.shape() + a.ndim());
}

}  // namespace fp8kit::py
