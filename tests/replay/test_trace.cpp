// Trace readers: the committed examples, and bad files with one message naming file:line.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "fp8kit/io/trace.hpp"
#include "scratch_dir.hpp"

using namespace fp8kit;

namespace {

std::string write_tmp(const std::string& name, const std::string& text) {
    struct Tag {};
    const std::string p = fp8kit::test::process_scratch<Tag>("fp8kit_test_trace").file(name);
    std::ofstream(p, std::ios::binary) << text;
    return p;
}

std::string error_of(const std::string& path) {
    try {
        trace::read_trace(path);
    } catch (const trace::TraceError& e) {
        return e.what();
    }
    return "no error";
}

}  // namespace

TEST_CASE("trace: the example CSV from the real run", "[replay][trace]") {
    const auto t = trace::read_trace(std::string(FP8KIT_DATA_DIR) + "/example/amax_trace.csv");
    REQUIRE(t.series.size() == 60);  // 15 Linear modules x input, output, grad_output, weight
    const auto& s0 = t.series[0];
    REQUIRE(s0.tensor == "model.layers.0.self_attn.q_proj.input");
    REQUIRE(s0.steps.size() == 300);
    REQUIRE(s0.steps.front() == 0);
    REQUIRE(s0.steps.back() == 299);
    REQUIRE(s0.amax[0] == 3.53637338f);  // first data row, read back as the same float32
    std::size_t grads = 0, weights = 0;
    for (const auto& s : t.series) {
        grads += s.role == Role::gradient;
        weights += s.role == Role::weight;
    }
    REQUIRE(grads == 15);
    REQUIRE(weights == 15);
}

TEST_CASE("trace: the example dlfw-inspect log", "[replay][trace]") {
    const auto t = trace::read_trace(std::string(FP8KIT_DATA_DIR) + "/example/dlfw_inspect.log");
    REQUIRE(t.series.size() == 15);
    REQUIRE(t.series[0].tensor == "model.layers.0.self_attn.q_proj_gradient");
    REQUIRE(t.series[0].role == Role::gradient);
    REQUIRE(t.series[0].steps.size() == 300);
    REQUIRE(t.series[0].amax[0] == 7.92742e-06f);
    REQUIRE(t.series[0].steps[1] == 1);
}

TEST_CASE("trace: column order by header, inf/nan values, other stats ignored", "[replay][trace]") {
    auto t = trace::read_trace(write_tmp("order.csv", "amax, note ,step\r\n2.5,x,3\ninf,y,1\nnan,z,2\n"));
    REQUIRE(t.series.size() == 1);
    REQUIRE(t.series[0].tensor.empty());
    REQUIRE(t.series[0].steps == std::vector<std::int64_t>{1, 2, 3});  // sorted by step
    REQUIRE(std::isinf(t.series[0].amax[0]));
    REQUIRE(std::isnan(t.series[0].amax[1]));
    REQUIRE(t.series[0].amax[2] == 2.5f);
    t = trace::read_trace(write_tmp(
        "stats.log",
        "2026-11-22 00:00:01,000 - INFO - a.fc1_activation_cur_amax \t\t\t\t iteration=000002 \t\t\t\t value=1.5\n"
        "2026-11-22 00:00:01,000 - INFO - a.fc1_activation_std \t\t\t\t iteration=000002 \t\t\t\t value=9\n"
        "2026-11-22 00:00:01,000 - INFO - a.fc1_wgrad_cur_amax \t\t\t\t iteration=000002 \t\t\t\t value=inf\n"));
    REQUIRE(t.series.size() == 2);
    REQUIRE(t.series[0].tensor == "a.fc1_activation");
    REQUIRE(t.series[0].role == Role::activation);
    REQUIRE(t.series[1].role == Role::gradient);
}

TEST_CASE("trace: classes from names", "[replay][trace]") {
    CHECK(recipe_slot(guess_role("model.layers.0.self_attn.q_proj.grad_output")) == Role::gradient);
    CHECK(recipe_slot(guess_role("x.weight.grad")) == Role::gradient);
    CHECK(recipe_slot(guess_role("down_proj_gradient")) == Role::gradient);
    CHECK(recipe_slot(guess_role("fc1_wgrad")) == Role::gradient);
    CHECK(recipe_slot(guess_role("fc1_dgrad")) == Role::gradient);
    CHECK(recipe_slot(guess_role("q_proj.weight")) == Role::weight);
    CHECK(recipe_slot(guess_role("q_proj.output")) == Role::activation);
    CHECK(recipe_slot(guess_role("upgrade.input")) == Role::activation);  // a token, not a substring
}

TEST_CASE("trace: bad files name the file and line", "[replay][trace]") {
    std::string p = write_tmp("bad1.csv", "step,tensor,amax\n0,a,1.5\n1,a,abc\n");
    CHECK(error_of(p) == p + ":3: amax 'abc' is not a number");
    p = write_tmp("bad2.csv", "step,tensor,value\n0,a,1\n");
    CHECK(error_of(p).rfind(p + ":1: the header has no 'amax' column", 0) == 0);
    p = write_tmp("bad3.csv", "step,tensor,amax\n0,a\n");
    CHECK(error_of(p) == p + ":2: 2 fields, the header needs at least 3");
    p = write_tmp("bad4.csv", "step,tensor,amax\n0,a,-1\n");
    CHECK(error_of(p).rfind(p + ":2: amax '-1' is negative", 0) == 0);
    p = write_tmp("bad5.csv", "step,tensor,amax\n0,a,1\n\n0,a,2\n");
    CHECK(error_of(p) == p + ":4: tensor 'a' step 0 appears twice (lines 2 and 4)");
    p = write_tmp("bad6.csv", "step,amax\n1.5,2\n");
    CHECK(error_of(p) == p + ":2: step '1.5' is not an integer");
    p = write_tmp("bad7.log", "2026 - INFO - x_cur_amax \t iteration=12 \t value=\n");
    CHECK(error_of(p) == p + ":1: empty amax value");
    p = write_tmp("bad8.log", "hello\nworld\n");
    CHECK(error_of(p).find("neither a CSV trace") != std::string::npos);
    p = write_tmp("empty.csv", "");
    CHECK(error_of(p).find(p + ": ") == 0);
    CHECK(error_of("/nonexistent/trace.csv") == "/nonexistent/trace.csv: cannot open: No such file or directory");
}

// Biases and normalisation parameters are parameters: weights, not activations (issue 20 item
// 14); the guess is numerics/roles.hpp's, mapped to the recipe slot.
TEST_CASE("trace: classes of parameters", "[replay]") {
    using fp8kit::Role;
    CHECK(fp8kit::recipe_slot(fp8kit::guess_role("encoder.layer.0.attention.output.LayerNorm.bias")) == Role::weight);
    CHECK(fp8kit::recipe_slot(fp8kit::guess_role("encoder.layer.0.attention.self.query.bias")) == Role::weight);
    CHECK(fp8kit::recipe_slot(fp8kit::guess_role("ln_f.gamma")) == Role::weight);
    CHECK(fp8kit::recipe_slot(fp8kit::guess_role("layers.0.mlp.fc1.weight.grad")) == Role::gradient);
    CHECK(fp8kit::recipe_slot(fp8kit::guess_role("layers.0.mlp.fc1.output")) == Role::activation);
    CHECK(fp8kit::recipe_slot(fp8kit::guess_role("layers.0.exp_avg")) == Role::activation);
}
