// The conversion policy a user names: a profile (a library's policy), or all of rounding,
// overflow and NaN encoding. One resolution for the CLI (--profile | --round --overflow --nan)
// and Python (profile= | rounding= overflow= nan=); only the argument names in messages differ.
#pragma once

#include <optional>
#include <string>

#include "fp8kit/convert/names.hpp"

namespace fp8kit {

struct PolicyArgs {
    std::optional<std::string> profile, round, overflow, nan;  // unset: not given
};

// How messages name the arguments: the CLI's options ("--round toward-zero") or Python's
// keywords ("rounding='toward-zero'").
enum class ArgStyle { cli, python };

// The policy for converting `from` to `format`. A profile fixes overflow and NaN (and the
// rounding, except for e8m0, whose rounding must be given: toward-zero or toward-positive).
// Bad or conflicting arguments: std::invalid_argument with one line naming the argument.
Policy resolve_policy(Format format, Wide from, const PolicyArgs& args, ArgStyle style);

}  // namespace fp8kit
