// resolve_policy: the one resolution of --profile | --round --overflow --nan (CLI) and
// profile= | rounding= overflow= nan= (Python); messages name each caller's own arguments.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "fp8kit/convert/policy_args.hpp"

using namespace fp8kit;

namespace {

std::string error_of(const PolicyArgs& a, ArgStyle s, Format f = Format::e4m3) {
    try {
        resolve_policy(f, Wide::f32, a, s);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "(no error)";
}

}  // namespace

TEST_CASE("resolve_policy: explicit policies and profiles", "[lib][policy]") {
    const Policy p = resolve_policy(Format::e5m2, Wide::f32, {std::nullopt, "toward-zero", "no-saturate", "canonical"},
                                    ArgStyle::cli);
    CHECK((p.rounding == Rounding::toward_zero && p.overflow == Overflow::no_saturate &&
           p.nan == NanEncoding::canonical));
    // cuda-satfinite is cvt.rn.satfinite: nearest-even, saturating.
    const Policy c = resolve_policy(Format::e4m3, Wide::f32, {"cuda-satfinite", {}, {}, {}}, ArgStyle::python);
    CHECK((c.rounding == Rounding::nearest_even && c.overflow == Overflow::saturate_all));
    // e8m0 under a profile takes its rounding from the caller.
    const Policy e =
        resolve_policy(Format::e8m0, Wide::f32, {"cuda-satfinite", "toward-positive", {}, {}}, ArgStyle::cli);
    CHECK(e.rounding == Rounding::toward_positive);
}

TEST_CASE("resolve_policy: messages name the caller's arguments", "[lib][policy]") {
    const PolicyArgs none{};
    CHECK(error_of(none, ArgStyle::cli).rfind("name the conversion: --profile P (", 0) == 0);
    CHECK(error_of(none, ArgStyle::python).rfind("name the conversion: profile=P (", 0) == 0);
    CHECK(error_of({"tf", {}, {}, {}}, ArgStyle::cli).rfind("--profile: unknown profile 'tf'", 0) == 0);
    CHECK(error_of({"tf", {}, {}, {}}, ArgStyle::python).rfind("profile: unknown profile 'tf'", 0) == 0);
    CHECK(error_of({"torch", {}, "no-saturate", {}}, ArgStyle::cli) ==
          "--profile fixes the overflow and NaN policy: drop --overflow/--nan, or drop --profile");
    CHECK(error_of({"torch", {}, "no-saturate", {}}, ArgStyle::python) ==
          "profile fixes the overflow and NaN policy: drop overflow/nan, or drop profile");
    CHECK(error_of({"cuda-satfinite", {}, {}, {}}, ArgStyle::cli, Format::e8m0) ==
          "--profile cuda-satfinite with e8m0 needs --round toward-zero or toward-positive");
    CHECK(error_of({"cuda-satfinite", {}, {}, {}}, ArgStyle::python, Format::e8m0) ==
          "profile cuda-satfinite with e8m0 needs rounding='toward-zero' or 'toward-positive'");
    CHECK(error_of({"torch", "toward-zero", {}, {}}, ArgStyle::cli) ==
          "--profile torch rounds e4m3 to nearest-even: drop --round, or drop --profile");
    CHECK(error_of({{}, "up", "no-saturate", "canonical"}, ArgStyle::python)
              .rfind("rounding: unknown rounding 'up'", 0) == 0);
    CHECK(error_of({{}, "toward-zero", "wrap", "canonical"}, ArgStyle::cli)
              .rfind("--overflow: unknown policy 'wrap'", 0) == 0);
    CHECK(error_of({{}, "toward-zero", "no-saturate", "zero"}, ArgStyle::cli)
              .rfind("--nan: unknown encoding 'zero'", 0) == 0);
}
