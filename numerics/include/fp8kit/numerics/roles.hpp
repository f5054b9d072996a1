// Tensor roles, written once: the one enum, its names, its parser, the guess from a tensor's
// name, and which slot of a recipe (input, weight, grad) casts a tensor of each role. Host only
// (strings); no std containers.
//
// Unknown roles, one behaviour everywhere: a tensor whose role is neither stored nor guessed
// stays `unknown` in what is reported about it (inspect shows "?"), and is CAST as an activation:
// recipe_slot(unknown) is the recipe's input slot (E4M3 in HYBRID recipes), as are activations
// and optimizer states. Classes for summaries (sweep, replay) use recipe_slot as well, so an
// unknown tensor counts with the activations.
//
// Weight gradients and optimizer states (docs/recipes.md, "Roles"): the training frameworks'
// recipes quantise GEMM operands only (activations, weights, output gradients); a weight gradient
// is the wgrad GEMM's high-precision output and an optimizer state the optimizer's, so casting
// them with the grad / input slot is fp8kit's what-if, not a cast the recipe performs. MS-AMP's
// weight-gradient and optimizer-state casts are simulate/'s (docs/msamp.md). A weight gradient
// and an output gradient are both `gradient` here and in existing dumps.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace fp8kit::numerics {

// What a tensor is in training; decides the FP8 format of HYBRID recipes (E5M2 for gradients).
enum class Role : std::uint8_t { activation, weight, gradient, optimizer_state, unknown };

inline constexpr Role kAllRoles[] = {Role::activation, Role::weight, Role::gradient, Role::optimizer_state,
                                     Role::unknown};

// "activation", "weight", "gradient", "optimizer_state", "unknown".
constexpr std::string_view name(Role r) {
    switch (r) {
        case Role::activation: return "activation";
        case Role::weight: return "weight";
        case Role::gradient: return "gradient";
        case Role::optimizer_state: return "optimizer_state";
        case Role::unknown: break;
    }
    return "unknown";
}

// The recipe slot that casts a tensor of role r: weight, gradient, or activation for the rest
// (activation, optimizer_state, unknown; see the top of this file).
constexpr Role recipe_slot(Role r) {
    return r == Role::weight ? Role::weight : r == Role::gradient ? Role::gradient : Role::activation;
}

// The name of a recipe slot in recipe files and APIs: "input", "weight", "grad".
constexpr std::string_view slot_name(Role r) {
    const Role s = recipe_slot(r);
    return s == Role::weight ? "weight" : s == Role::gradient ? "grad" : "input";
}

namespace detail {

constexpr char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }
constexpr bool alnum(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'); }

// Equal ignoring case, with '-' and ' ' in `s` read as '_'.
constexpr bool same_key(std::string_view s, std::string_view key) {
    if (s.size() != key.size()) return false;
    for (std::size_t i = 0; i < s.size(); ++i) {
        char c = lower(s[i]);
        if (c == '-' || c == ' ') c = '_';
        if (c != key[i]) return false;
    }
    return true;
}

template <std::size_t N>
constexpr bool any_key(std::string_view s, const std::string_view (&keys)[N]) {
    for (const auto& k : keys)
        if (same_key(s, k)) return true;
    return false;
}

// Is one of `words` a token of `name`? Tokens are the runs of letters and digits, case-insensitive
// ("model.layers.0/grad_output" -> model layers 0 grad output).
template <std::size_t N>
constexpr bool has_token(std::string_view name, const std::string_view (&words)[N]) {
    std::size_t i = 0;
    while (i < name.size()) {
        while (i < name.size() && !alnum(name[i])) ++i;
        std::size_t j = i;
        while (j < name.size() && alnum(name[j])) ++j;
        if (j > i && any_key(name.substr(i, j - i), words)) return true;
        i = j;
    }
    return false;
}

// Case-insensitive substring search (`word` in lower case).
constexpr bool contains(std::string_view name, std::string_view word) {
    for (std::size_t i = 0; i + word.size() <= name.size(); ++i) {
        std::size_t k = 0;
        while (k < word.size() && lower(name[i + k]) == word[k]) ++k;
        if (k == word.size()) return true;
    }
    return false;
}

}  // namespace detail

// Accepts the names above and common spellings, case-insensitive, '-' or ' ' for '_':
// activation(s), act, input, output; weight(s), param, parameter; gradient(s), grad(s), wgrad,
// dgrad, grad_output; optimizer_state, optimizer, optim_state, exp_avg, exp_avg_sq, momentum;
// unknown. Anything else: nullopt (the caller names the bad value).
constexpr std::optional<Role> parse_role(std::string_view s) {
    constexpr std::string_view act[] = {"activation", "activations", "act", "input", "output"};
    constexpr std::string_view weight[] = {"weight", "weights", "param", "parameter"};
    constexpr std::string_view grad[] = {"gradient", "gradients", "grad", "grads", "wgrad", "dgrad", "grad_output"};
    constexpr std::string_view opt[] = {"optimizer_state", "optimizer",  "optim_state",
                                        "exp_avg",         "exp_avg_sq", "momentum"};
    if (detail::any_key(s, act)) return Role::activation;
    if (detail::any_key(s, weight)) return Role::weight;
    if (detail::any_key(s, grad)) return Role::gradient;
    if (detail::any_key(s, opt)) return Role::optimizer_state;
    if (detail::same_key(s, "unknown")) return Role::unknown;
    return std::nullopt;
}

// The guess from a tensor's name (path components and their tokens): optimizer words win over
// gradient words, gradient words over parameter words ("weight.grad" is a gradient, "weight/exp_avg"
// an optimizer state; weight, bias, gamma and beta are parameters: weights); activation
// words last; `unknown` when no word matches.
constexpr Role guess_role(std::string_view name) {
    constexpr std::string_view opt[] = {"momentum", "momentum_buffer", "optimizer", "optim"};
    constexpr std::string_view grad[] = {"grad", "grads", "gradient", "gradients", "wgrad", "dgrad"};
    // Parameters are weights: biases and normalisation parameters (LayerNorm/RMSNorm gamma and
    // beta, "LayerNorm.bias") are cast as weights, never counted with the activations (a
    // "attention.output.LayerNorm.bias" would otherwise be an activation by its "output").
    constexpr std::string_view weight[] = {"weight", "weights", "bias", "biases", "gamma", "beta"};
    constexpr std::string_view act[] = {"input",      "inputs",      "output", "outputs",
                                        "activation", "activations", "act",    "acts"};
    // exp_avg and exp_avg_sq split into "exp avg [sq]": look for them in the text itself.
    if (detail::contains(name, "exp_avg") || detail::has_token(name, opt)) return Role::optimizer_state;
    if (detail::has_token(name, grad)) return Role::gradient;
    if (detail::has_token(name, weight)) return Role::weight;
    if (detail::has_token(name, act)) return Role::activation;
    return Role::unknown;
}

}  // namespace fp8kit::numerics
