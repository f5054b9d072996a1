// Roles (numerics/roles.hpp): the parser, the guess from tensor names, the recipe slot, and the
// one behaviour for unknown roles (reported as unknown, cast as an activation).
#include <catch2/catch.hpp>

#include <stdexcept>
#include <utility>

#include "fp8kit/numerics/roles.hpp"
#include "fp8kit/recipes.hpp"

using namespace fp8kit::numerics;

TEST_CASE("role names and parser", "[numerics][roles]") {
    for (Role r : kAllRoles) CHECK(parse_role(name(r)) == r);  // every name reads back
    CHECK(name(Role::optimizer_state) == "optimizer_state");
    CHECK(parse_role("input") == Role::activation);
    CHECK(parse_role("Activations") == Role::activation);
    CHECK(parse_role("act") == Role::activation);
    CHECK(parse_role("param") == Role::weight);
    CHECK(parse_role("grad-output") == Role::gradient);  // '-' read as '_'
    CHECK(parse_role("WGRAD") == Role::gradient);
    CHECK(parse_role("Optimizer-State") == Role::optimizer_state);
    CHECK(parse_role("optimizer state") == Role::optimizer_state);
    CHECK(parse_role("exp_avg_sq") == Role::optimizer_state);
    for (const char* bad : {"bias", "params", ""}) CHECK_FALSE(parse_role(bad).has_value());
}

// Gradient and optimizer words first; words inside other words are not roles.
TEST_CASE("role guessed from tensor names", "[numerics][roles]") {
    const std::pair<const char*, Role> cases[] = {
        {"step_000000/lm_head/grad_output", Role::gradient},
        {"model.layers.0.self_attn.q_proj.grad_output", Role::gradient},
        {"step_000000/lm_head/wgrad", Role::gradient},
        {"layer1_dgrad_iter_000012", Role::gradient},
        {"model.layers.0.mlp.down_proj.weight.grad", Role::gradient},  // gradient words win over weight words
        {"grads/layer1/weight", Role::gradient},
        {"down_proj_gradient", Role::gradient},
        {"gradient_checkpoint.weights", Role::gradient},
        {"model.layers.0.mlp.down_proj.weight", Role::weight},
        {"step_000000/lm_head/weight_fp8", Role::weight},
        {"Q_PROJ.Weights", Role::weight},
        {"step_000000/lm_head/weight/exp_avg", Role::optimizer_state},  // optimizer words win
        {"opt/layer.weight.exp_avg_sq", Role::optimizer_state},
        {"layer3/momentum", Role::optimizer_state},
        {"step_000000/lm_head/input", Role::activation},
        {"step_000000/lm_head/output", Role::activation},
        {"layer1_activation_iter_000012", Role::activation},
        {"mlp/act", Role::activation},
        {"upgrade.input", Role::activation},  // "grad" inside "upgrade" is not a token
        {"model.embed_tokens", Role::unknown},
        {"step_5/scale_inv", Role::unknown},
        {"retrograde/actuator/outputting", Role::unknown},
        {"", Role::unknown},
    };
    for (const auto& [tensor, role] : cases) {
        INFO(tensor);
        CHECK(guess_role(tensor) == role);
    }
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
