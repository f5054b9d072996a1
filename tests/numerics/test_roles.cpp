// Roles (numerics/roles.hpp): the parser, the guess from tensor names, the recipe slot, and the
// one behaviour for unknown roles (reported as unknown, cast as an activation).
#include <catch2/catch.hpp>

#include <stdexcept>

#include "fp8kit/numerics/roles.hpp"
#include "fp8kit/recipes.hpp"

using namespace fp8kit::numerics;

TEST_CASE("role names and parser", "[numerics][roles]") {
    for (Role r : kAllRoles) CHECK(parse_role(name(r)) == r);  // every name reads back
    CHECK(parse_role("input") == Role::activation);
    CHECK(parse_role("Activations") == Role::activation);
    CHECK(parse_role("act") == Role::activation);
    CHECK(parse_role("params") == std::nullopt);
    CHECK(parse_role("param") == Role::weight);
    CHECK(parse_role("grad") == Role::gradient);
    CHECK(parse_role("grad-output") == Role::gradient);  // '-' read as '_'
    CHECK(parse_role("WGRAD") == Role::gradient);
    CHECK(parse_role("optimizer state") == Role::optimizer_state);
    CHECK(parse_role("exp_avg_sq") == Role::optimizer_state);
    CHECK(parse_role("unknown") == Role::unknown);
    CHECK(parse_role("bias") == std::nullopt);
    CHECK(parse_role("") == std::nullopt);
}

TEST_CASE("role guessed from tensor names", "[numerics][roles]") {
    CHECK(guess_role("model.layers.0.self_attn.q_proj.grad_output") == Role::gradient);
    CHECK(guess_role("x.weight.grad") == Role::gradient);  // gradient words win over weight words
    CHECK(guess_role("down_proj_gradient") == Role::gradient);
    CHECK(guess_role("fc1_wgrad") == Role::gradient);
    CHECK(guess_role("fc1_dgrad") == Role::gradient);
    CHECK(guess_role("q_proj.weight") == Role::weight);
    CHECK(guess_role("Q_PROJ.Weights") == Role::weight);
    CHECK(guess_role("q_proj.output") == Role::activation);
    CHECK(guess_role("upgrade.input") == Role::activation);  // "grad" inside "upgrade" is not a token
    CHECK(guess_role("layer/weight/exp_avg") == Role::optimizer_state);  // optimizer words win
    CHECK(guess_role("fc1.exp_avg_sq") == Role::optimizer_state);
    CHECK(guess_role("optim/momentum") == Role::optimizer_state);
    CHECK(guess_role("model.fc1") == Role::unknown);
    CHECK(guess_role("") == Role::unknown);
    CHECK(guess_role("gradient_checkpoint.weights") == Role::gradient);
}

TEST_CASE("unknown roles: one behaviour, cast as activations", "[numerics][roles]") {
    CHECK(recipe_slot(Role::unknown) == Role::activation);
    CHECK(recipe_slot(Role::optimizer_state) == Role::activation);
    CHECK(recipe_slot(Role::weight) == Role::weight);
    CHECK(recipe_slot(Role::gradient) == Role::gradient);
    CHECK(slot_name(Role::unknown) == "input");
    CHECK(slot_name(Role::gradient) == "grad");
    // lib's recipes take the slot: te-delayed (HYBRID) casts unknown tensors in E4M3, gradients in E5M2.
    const fp8kit::RecipeSpec r = fp8kit::parse_recipe("te-delayed");
    CHECK(r.role(Role::unknown).format == fp8kit::Format::e4m3);
    CHECK(r.role(Role::gradient).format == fp8kit::Format::e5m2);
    CHECK(fp8kit::parse_recipe_slot("grad") == Role::gradient);
    CHECK(fp8kit::parse_recipe_slot("unknown") == Role::activation);
    try {
        fp8kit::parse_recipe_slot("bias");
        FAIL("no error for role 'bias'");
    } catch (const std::invalid_argument& e) {
        CHECK(std::string(e.what()) == "role: unknown role 'bias' (choose from input, weight, grad)");
    }
}
