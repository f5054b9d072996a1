// Scaling recipes of the training frameworks, reproduced in float32 exactly as each framework
// computes them (docs/recipes.md has every preset, its source file and its edge cases).
// A recipe produces `scale`; the cast is q = fp8(fl32(x * scale)) and dequantisation is
// x^ = q * scale_inv. Exponents are taken from float bits, never from a floating log2.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <deque>
#include <optional>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/numerics/roles.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit {

// How the scale of one cast is obtained.
enum class RecipeKind : std::uint8_t {
    delayed,   // TransformerEngine DelayedScaling: scale from an amax history (DelayedScaling)
    current,   // one scale per tensor/row/block from the amax of the data being cast
    windowed,  // MS-AMP: window of past amaxes, in-time scaling until the window is full (MsampScaling)
};
// The formula that turns an amax into a scale: numerics/scale_rules.hpp.
using numerics::ScaleRule;
enum class AmaxAlgo : std::uint8_t { max, most_recent };
// What one scale covers. `block`: block_rows x block_cols tiles of a row-major 2-D tensor;
// `row`: one scale per row (block 1 x cols); `tensor`: one scale for everything.
enum class Granularity : std::uint8_t { tensor, row, block };

std::string_view name(RecipeKind k);   // "delayed", "current", "windowed"
std::string_view name(ScaleRule r);    // "te", "torchao", "msamp", "deepseek", "mx-roundup", "mx-ocp-floor"
std::string_view name(AmaxAlgo a);     // "max", "most_recent"
std::string_view name(Granularity g);  // "tensor", "row", "block"

// The tensor roles (numerics/roles.hpp). A recipe has three slots, input, weight and grad
// (recipe_slot: activations, optimizer states and unknown roles cast with the input slot;
// weight gradients are `gradient`). The frameworks' recipes cast GEMM operands only, so a weight
// gradient or optimizer state cast with a slot is a what-if (docs/recipes.md, "Roles").
// HYBRID recipes give grads E5M2 and the rest E4M3.
using numerics::guess_role;  // from a tensor's name; `unknown` when no word matches
using numerics::parse_role;
using numerics::recipe_slot;
using numerics::Role;
using numerics::slot_name;  // "input", "weight", "grad"
// A recipe slot by the names users type (parse_role's spellings: "input", "grad", "act", ...);
// std::invalid_argument "<what>: unknown role '<s>' (choose from input, weight, grad)" otherwise.
Role parse_recipe_slot(std::string_view s, std::string_view what = "role");

struct RoleSpec {
    Format format;
    Granularity granularity;
    int block_rows = 1, block_cols = 1;  // used when granularity == block
    int window = 1;                      // MS-AMP window length for this role (1 elsewhere)
    // TransformerEngine NVFP4BlockScaling's random Hadamard transform: the role's block statistics
    // and quantize_blocks describe its column-wise copy (the wgrad GEMM operand), i.e. x^T of the
    // 2-D view with every 16 elements along a row of x^T (16 rows of one column of x) multiplied by
    // diag(s) H16 / 4 (te_rht16_columnwise), the global amax taken after the transform, then the
    // role's 1 x 16 blocks. TE applies it to the column-wise usage of linear inputs and output
    // gradients, never to weights (transformer_engine/common/recipe/__init__.py
    // NVFP4BlockScaling.__post_init__; custom_recipes/quantization_nvfp4.py
    // NVFP4QuantizerRef._quantize). false: the row-wise copy, as it is.
    bool columnwise_rht = false;
    // The role's own rounding, where the recipe rounds roles differently (TransformerEngine
    // NVFP4BlockScaling: stochastic rounding for gradients, nearest-even for weights and
    // activations). Unset: the recipe-wide policy.rounding. Overflow and NaN encoding stay
    // recipe-wide. Recipe files: the role's optional "rounding" field (docs/recipes.md).
    std::optional<Rounding> rounding = std::nullopt;
};

// Every parameter explicit: a user recipe file must name all of them (to_json writes them all).
struct RecipeSpec {
    std::string name;    // preset name or the user's
    std::string source;  // framework file the behaviour comes from
    RecipeKind kind;
    ScaleRule rule;
    RoleSpec input, weight, grad;
    int history_len;      // delayed: amax history length L (>= 1); 1 elsewhere
    AmaxAlgo algo;        // delayed: max or most_recent
    int margin;           // scale divided by 2^margin (TE delayed, MS-AMP)
    double epsilon;       // amax floor: TE eps (float32, amax < eps -> eps), torchao clamp (binary64),
                          // DeepGEMM clamp (float32, 1e-4)
    bool pow2;            // scales rounded down to a power of two (TE, torchao); deepseek: UE8M0 round-up
    float value_for_inf;  // TE: scale used when FMAX/amax is Inf (FLT_MAX)
    Policy policy;        // the cast's rounding/overflow/NaN policy

    const RoleSpec& role(Role r) const;  // the slot recipe_slot(r)
    // The policy a tensor of role r is cast with: `policy` with the slot's own rounding when it
    // has one. Every caster (statistics, block quantiser, inspect, sweep, replay, watch, Python,
    // the GPU block quantiser's callers) takes its policy from here.
    Policy policy_for(Role r) const;
};

// Names of the presets, in documentation order.
const std::vector<std::string>& recipe_presets();
// A preset name, or the path of a JSON file with every RecipeSpec field (see docs/recipes.md).
// Throws std::invalid_argument naming the preset/file/field on bad input.
RecipeSpec parse_recipe(const std::string& name_or_path);
RecipeSpec recipe_from_json(const nlohmann::json& j, const std::string& where);
nlohmann::json to_json(const RecipeSpec& r);

// Largest finite value of a format as float32 (448, 57344, 240, 57344, 2^127).
inline float fp8_max(Format f) { return numerics::format_max(f); }

// ---- The scale math: every rule is written once, in numerics/scale_rules.hpp ---------------

using numerics::deepseek_scale;  // DeepGEMM per-token / per-block scale (UE8M0 option)
using numerics::e8m0_scale_pair;
using numerics::msamp_scale;  // MS-AMP ScalingMeta.compute_scaling_factor
using numerics::ScalePair;
using numerics::te_scale;       // TransformerEngine compute_scale_from_amax
using numerics::torchao_scale;  // torchao amax_to_scale

// MX block scales as E8M0 codes of an element format (numerics::mx_code_floor / mx_code_roundup).
inline std::uint8_t mx_e8m0_scale_floor_ocp(float block_amax, Format elem) {
    return numerics::mx_code_floor(block_amax, numerics::format_emax(elem));
}
inline std::uint8_t mx_e8m0_scale_roundup(float block_amax, Format elem) {
    return numerics::mx_code_roundup(block_amax, numerics::format_max(elem));
}

// One scale for one amax under `rule` with its parameters spelled out; the MX rules give the
// scale the block is cast with (numerics::rule_scale, mx_cast_pair).
ScalePair rule_scale(ScaleRule rule, Format f, float amax, double epsilon, bool pow2, float value_for_inf, int margin);

// One scale for one amax under any non-stateful rule of `r` for `role`.
ScalePair recipe_scale(const RecipeSpec& r, Role role, float amax);

// ---- Stateful recipes -----------------------------------------------------------------------

// TransformerEngine DelayedScaling with the bulk update (delayed_scaling.cu kernel_bulk):
// history of L zeros and scale 1 at the start; record(amax) stores the step's amax and runs the
// update that gives the next step's scale. A zero amax does not roll the history; NaN entries are
// ignored by the max (fmaxf); Inf amax keeps the previous scale; an Inf scale becomes FLT_MAX.
class DelayedScaling {
public:
    DelayedScaling(float fmax, int history_len, AmaxAlgo algo, int margin);
    float scale_for_step() const { return scale_; }  // the scale this step casts with
    void record(float amax);                         // this step's amax; moves to the next step
    // TE's amax_history as a vector of L: slot 0 (this step's amax, 0 after a roll), then the
    // last L - 1 rolled amaxes, oldest first. Built on demand (O(L)).
    std::vector<float> history() const;
    std::uint64_t steps() const { return steps_; }

private:
    // O(1) amortised per step (a sweep records tensors x steps x candidates times, L = 1024 for
    // TE's default): TE rolls its whole history each step (torch.roll in kernel_bulk); here the
    // L - 1 stored entries are a ring, and the max over them and the new amax comes from a
    // monotonic queue of the non-NaN entries of the last L rolls (fmaxf ignores NaN).
    float scaled_max_;
    AmaxAlgo algo_;
    std::size_t len_;          // L
    float slot0_ = 0.0f;       // history[0]
    std::vector<float> ring_;  // history[1..L-1]; ring_[head_] is the oldest
    std::size_t head_ = 0;
    std::uint64_t rolls_ = 0;                           // rolls so far; roll k stored its amax with index k
    std::deque<std::pair<std::uint64_t, float>> maxq_;  // (roll, amax), amax decreasing
    float scale_ = 1.0f;
    std::uint64_t steps_ = 0;
};

// MS-AMP windowed scaling (msamp/common/tensor/meta.py, cast.py; msamp/optim/optimizer.py
// _update_scaling_factors): a window of W amaxes (zeros at start), scale 1, counter 0.
// A step is in-time when W == 1 or counter < W: it casts with msamp_scale(own amax, margin 0).
// After each step: sf = msamp_scale(max of window (NaN propagates, as torch.max), scale, margin);
// the window rolls by one (the oldest slot becomes slot 0, overwritten by the next amax);
// counter += 1, or 0 when this step's amax was Inf/NaN; the scale becomes sf only when this
// step's amax was finite.
class MsampScaling {
public:
    MsampScaling(float fmax, int window, int margin);
    bool in_time() const;  // W == 1 or counter < W
    // The scale the step casts with: with in-time scaling it depends on the step's own amax.
    float scale_for_step(float current_amax) const;
    void record(float amax);
    const std::vector<float>& window() const { return window_; }
    float scale() const { return scale_; }  // the stored (delayed) scale
    std::size_t counter() const { return counter_; }

private:
    float fmax_;
    int margin_;
    std::vector<float> window_;
    std::size_t counter_ = 0;
    float scale_ = 1.0f;
};

}  // namespace fp8kit
