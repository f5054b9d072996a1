// Step guesses, --steps parsing, and the name/step selection (roles: tests/numerics/test_roles.cpp).
#include <catch2/catch.hpp>

#include <limits>

#include "fp8kit/io/dump.hpp"

using namespace fp8kit::dump;

TEST_CASE("steps are parsed from path components", "[dump]") {
    CHECK(guess_step("step_12/x") == 12);
    CHECK(guess_step("step12/x") == 12);
    CHECK(guess_step("step-12/x") == 12);
    CHECK(guess_step("run/iter_000012/x") == 12);
    CHECK(guess_step("iteration=12/x") == 12);
    CHECK(guess_step("layer1_activation_iter_000034") == 34);
    CHECK(guess_step("STEP_000100/lm_head/input") == 100);
    CHECK(guess_step("it_7/w") == 7);
    // The innermost component wins.
    CHECK(guess_step("step_1/step_2/x") == 2);
    CHECK_FALSE(guess_step("steps/x").has_value());
    CHECK_FALSE(guess_step("model.layers.0.weight").has_value());
    CHECK_FALSE(guess_step("split_3/x").has_value());
    CHECK_FALSE(guess_step("item_3/x").has_value());
    CHECK_FALSE(guess_step("step_12abc/x").has_value());
    CHECK_FALSE(guess_step("step_1234567890123456789012/x").has_value());  // not an int64
}

TEST_CASE("step ranges as --steps takes them", "[dump]") {
    const auto r = parse_steps("0-100,200, 300-");
    REQUIRE(r.size() == 3);
    CHECK(r[0].lo == 0);
    CHECK(r[0].hi == 100);
    CHECK(r[1].lo == 200);
    CHECK(r[1].hi == 200);
    CHECK(r[2].lo == 300);
    CHECK(r[2].hi == std::numeric_limits<std::int64_t>::max());
    CHECK_THROWS_WITH(parse_steps("5-3"), Catch::Contains("ends before it starts"));
    CHECK_THROWS_WITH(parse_steps("a-3"), Catch::Contains("'a' is not a step number"));
    CHECK_THROWS_WITH(parse_steps("1,,2"), Catch::Contains("is not a step number"));
    CHECK_THROWS_WITH(parse_steps(""), Catch::Contains("empty"));
    CHECK_THROWS(parse_steps("-5"));
}

TEST_CASE("selection by name patterns and steps", "[dump]") {
    TensorInfo t;
    t.name = "step_000100/model.layers.0.mlp.down_proj/grad_output";
    t.step = 100;
    Selection s;
    CHECK(s.matches(t));
    s.include = {"*mlp*"};
    CHECK(s.matches(t));
    s.include = {"*attn*", "*/grad_output"};
    CHECK(s.matches(t));
    s.include = {"*attn*"};
    CHECK_FALSE(s.matches(t));
    s.include.clear();
    s.exclude = {"*grad*"};
    CHECK_FALSE(s.matches(t));
    s.exclude.clear();
    s.steps = parse_steps("0-99,101-");
    CHECK_FALSE(s.matches(t));
    s.steps = parse_steps("0-99,100");
    CHECK(s.matches(t));
    t.step.reset();
    CHECK_FALSE(s.matches(t));  // a step filter selects only tensors with a step
}
