// Replaying an amax trace through a scaling recipe: the scale each step would have been cast
// with, its headroom and whether it overflowed. The recipe math is recipes.hpp's (DelayedScaling,
// MsampScaling, recipe_scale); this file only drives it step by step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/recipes.hpp"
#include "fp8kit/io/trace.hpp"

namespace fp8kit::replay {

// True when the step's amax, scaled in float32 (fl32(amax * scale)), rounds past the largest
// finite value of `f` under round-to-nearest-even (decided by emu::encode with no saturation),
// or when amax is +Inf (the data held an Inf, which no scale brings into range).
// NaN amax or NaN scale: false (nothing to overflow; the NaN is reported as such).
// Decided by a per-format magnitude limit found once from that encode (O(1) per call).
bool overflows(float amax, float scale, Format f);
// The largest float32 magnitude that does not round past the format's max (E4M3: the float below
// 464, halfway to the next step 480; E5M2: the float below 61440): overflows(a, s, f) is
// fl32(a * s) > this.
float overflow_threshold(Format f);
// The same decided by emu::encode on every call (the definition; tests compare the two).
bool overflows_by_encode(float amax, float scale, Format f);
// Under the role's rounding (RecipeSpec::policy_for): nearest-even (and the other deterministic
// roundings, which replay treats as nearest-even) as above; stochastic: true when fl32(amax *
// scale) is above the largest finite value, which stochastic rounding carries past it with
// nonzero probability (the element's random bits are not in an amax trace), or amax is +Inf.
bool overflows(float amax, float scale, Format f, Rounding rounding);

// The format a recipe casts a tensor of this role with, or `forced` when given.
Format role_format(const RecipeSpec& r, Role role, std::optional<Format> forced);

// The scale used at each step of `amax` (one entry per recorded step, in order) by a tensorwise
// recipe: delayed (TE, scale 1 at the first step), windowed (MS-AMP) or current (from the step's
// own amax). Throws std::invalid_argument naming the recipe when it scales rows or blocks (that
// needs the tensor's data, not its amax).
std::vector<float> scales(const RecipeSpec& r, Role role, Format f, const std::vector<float>& amax);
// The same into `out` (its buffer reused).
void scales(const RecipeSpec& r, Role role, Format f, const std::vector<float>& amax, std::vector<float>& out);

// A delayed-scaling recipe's settings changed for a what-if replay (`fp8kit replay --history 16`).
struct Overrides {
    std::optional<int> history;  // 1 .. 2^24, delayed recipes only
    std::string algo;            // "max", "most_recent" (or "most-recent"); "" keeps the recipe's
    std::optional<int> margin;   // 0 .. 64, not for current scaling
};
// `r` with the overrides applied; std::invalid_argument naming the option (--history, --algo,
// --margin) when the recipe has no such parameter or the value is out of range.
RecipeSpec with_overrides(RecipeSpec r, const Overrides& o);

struct SeriesResult {
    std::string tensor;
    Role role;
    Format format;
    std::vector<std::int64_t> steps;
    std::vector<float> amax, scale;
    std::vector<double> headroom;        // amax * scale / fmax in binary64 (NaN for NaN amax)
    std::vector<std::uint8_t> overflow;  // overflows(amax, scale, format)
    std::size_t overflow_steps = 0;
    double worst_headroom = 0;     // largest finite headroom (0 when none), Inf if amax was Inf
    std::int64_t worst_step = -1;  // its step
};

SeriesResult replay_series(const RecipeSpec& r, const trace::Series& s, std::optional<Format> forced);
// The same into `into`, whose vectors and strings are reused (no allocation once they are large enough).
void replay_series(const RecipeSpec& r, const trace::Series& s, std::optional<Format> forced, SeriesResult& into);

// What the recipe needs, checked before any trace or dump is read: std::invalid_argument (the
// message replay_series gives) when no role is scaled per tensor, so no series could be replayed.
// A recipe with some per-tensor roles is checked per series by replay_series.
void check_recipe(const RecipeSpec& r);
// std::invalid_argument naming the recipe when it does not scale `role` per tensor.
void require_per_tensor(const RecipeSpec& r, Role role);

}  // namespace fp8kit::replay
