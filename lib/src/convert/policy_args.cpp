// Policy resolution shared by the CLI and Python (convert/policy_args.hpp).
#include "fp8kit/convert/policy_args.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace fp8kit {
namespace {

struct Names {
    const char *profile, *round, *overflow, *nan;
    bool python;
    // "--round toward-zero" or "rounding='toward-zero'".
    std::string assign(const char* arg, const char* value) const {
        return python ? fmt::format("{}='{}'", arg, value) : fmt::format("{} {}", arg, value);
    }
    std::string quoted(const char* value) const { return python ? fmt::format("'{}'", value) : value; }
};

Names names_of(ArgStyle s) {
    if (s == ArgStyle::python) return {"profile", "rounding", "overflow", "nan", true};
    return {"--profile", "--round", "--overflow", "--nan", false};
}

Policy from_profile(Format format, Wide from, const PolicyArgs& a, const Names& n) {
    using std::invalid_argument;
    const std::string& prof = *a.profile;
    const auto p = parse_profile(prof);
    if (!p)
        throw invalid_argument(
            fmt::format("{}: unknown profile '{}' (choose from {})", n.profile, prof, profile_choices()));
    if (a.overflow || a.nan)
        throw invalid_argument(fmt::format("{} fixes the overflow and NaN policy: drop {}/{}, or drop {}", n.profile,
                                           n.overflow, n.nan, n.profile));
    Rounding r = Rounding::toward_zero;
    if (format == Format::e8m0) {
        if (!a.round)
            throw invalid_argument(fmt::format("{} {} with e8m0 needs {} or {}", n.profile, prof,
                                               n.assign(n.round, "toward-zero"), n.quoted("toward-positive")));
        const auto pr = parse_rounding(*a.round);
        if (!pr)
            throw invalid_argument(
                fmt::format("{}: unknown rounding '{}' (choose from {})", n.round, *a.round, rounding_choices()));
        r = *pr;
    } else if (a.round) {
        throw invalid_argument(fmt::format("{} {} rounds {} to nearest-even: drop {}, or drop {}", n.profile, prof,
                                           name(format), n.round, n.profile));
    }
    const auto res = emu::profile_policy(*p, format, from, r);
    if (!res.ok) {
        if (format == Format::e8m0 && (*p == Profile::cuda_satfinite || *p == Profile::cuda_nosat))
            throw invalid_argument(
                fmt::format("{} {}: cuda_fp8.h converts to e8m0 only toward-zero or toward-positive, not {}", n.profile,
                            prof, *a.round));
        throw invalid_argument(fmt::format("{} {} has no conversion to {}", n.profile, prof, name(format)));
    }
    return res.policy;
}

}  // namespace

Policy resolve_policy(Format format, Wide from, const PolicyArgs& a, ArgStyle style) {
    using std::invalid_argument;
    const Names n = names_of(style);
    if (a.profile) return from_profile(format, from, a, n);
    if (!a.round || !a.overflow || !a.nan)
        throw invalid_argument(n.python ? "name the conversion: profile=P (" + profile_choices() +
                                              "), or all of rounding=, overflow= and nan="
                                        : "name the conversion: --profile P (" + profile_choices() +
                                              "), or all of --round, --overflow and --nan");
    const auto r = parse_rounding(*a.round);
    if (!r)
        throw invalid_argument(
            fmt::format("{}: unknown rounding '{}' (choose from {})", n.round, *a.round, rounding_choices()));
    const auto o = parse_overflow(*a.overflow);
    if (!o)
        throw invalid_argument(
            fmt::format("{}: unknown policy '{}' (choose from {})", n.overflow, *a.overflow, overflow_choices()));
    const auto nn = parse_nan(*a.nan);
    if (!nn)
        throw invalid_argument(fmt::format("{}: unknown encoding '{}' (choose from {})", n.nan, *a.nan, nan_choices()));
    return Policy{*r, *o, *nn};
}

}  // namespace fp8kit
