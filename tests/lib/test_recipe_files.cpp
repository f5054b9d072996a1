// Presets and user recipe files: every parameter explicit, bad files named in the message.
#include <catch2/catch.hpp>

#include <cstdio>
#include <fstream>
#include <stdexcept>
#include <string>
#include <tuple>

#include <nlohmann/json.hpp>

#include "fp8kit/recipes.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "scratch_dir.hpp"

using namespace fp8kit;

namespace {

std::string write_temp(const std::string& name, const std::string& text) {
    struct Tag {};
    const std::string path = fp8kit::test::process_scratch<Tag>("fp8kit_test_recipes").file(name);
    std::ofstream(path) << text;
    return path;
}

std::string error_of(const std::string& arg) {
    try {
        parse_recipe(arg);
    } catch (const std::invalid_argument& e) {
        return e.what();
    }
    return "";
}

}  // namespace

TEST_CASE("every preset exists with the issue's name and round-trips through JSON", "[lib][recipes]") {
    const std::vector<std::string> want = {"te-delayed",
                                           "te-current",
                                           "te-block",
                                           "mxfp8",
                                           "mx-ocp",
                                           "nvfp4",
                                           "nvfp4-rowwise",
                                           "nvfp4-torchao",
                                           "mxfp4",
                                           "mxfp4-ocp",
                                           "mxfp6-e2m3",
                                           "mxfp6-e2m3-ocp",
                                           "mxfp6-e3m2",
                                           "mxfp6-e3m2-ocp",
                                           "nvfp4-torchao-single",
                                           "mxfp8-torchao-floor",
                                           "mxfp8-torchao-ceil",
                                           "mxfp8-torchao-even",
                                           "mxfp8-torchao-rceil",
                                           "mxfp4-torchao-floor",
                                           "mxfp4-torchao-ceil",
                                           "mxfp4-torchao-even",
                                           "mxfp4-torchao-rceil",
                                           "mxfp6-e2m3-torchao-floor",
                                           "mxfp6-e2m3-torchao-ceil",
                                           "mxfp6-e2m3-torchao-even",
                                           "mxfp6-e2m3-torchao-rceil",
                                           "mxfp6-e3m2-torchao-floor",
                                           "mxfp6-e3m2-torchao-ceil",
                                           "mxfp6-e3m2-torchao-even",
                                           "mxfp6-e3m2-torchao-rceil",
                                           "torchao-tensorwise",
                                           "torchao-rowwise",
                                           "msamp",
                                           "deepseek-v3",
                                           "megatron"};
    CHECK(recipe_presets() == want);
    for (const auto& n : want) {
        INFO(n);
        const RecipeSpec r = parse_recipe(n);
        CHECK(r.name == n);
        const auto j = to_json(r);
        const std::string path = write_temp(n + ".json", j.dump(2));
        const RecipeSpec back = parse_recipe(path);
        CHECK(to_json(back) == j);
        CHECK(back.value_for_inf == r.value_for_inf);
        CHECK(back.epsilon == r.epsilon);
        std::remove(path.c_str());
    }
}

TEST_CASE("FP4/FP6 block presets: NVFP4 1x16 (16x16 weights), MX 1x32, E2M1/E2M3/E3M2 saturating", "[lib][recipes]") {
    const auto nv = parse_recipe("nvfp4");
    CHECK(nv.rule == ScaleRule::nvfp4_te);
    CHECK((nv.input.format == Format::e2m1 && nv.input.block_rows == 1 && nv.input.block_cols == 16));
    CHECK((nv.weight.block_rows == 16 && nv.weight.block_cols == 16));
    CHECK((nv.grad.block_rows == 1 && nv.grad.block_cols == 16));
    CHECK(nv.policy.overflow == Overflow::saturate_all);
    // TE NVFP4BlockScaling: RHT on the column-wise copies of inputs and gradients, not weights.
    CHECK((nv.input.columnwise_rht && nv.grad.columnwise_rht && !nv.weight.columnwise_rht));
    const auto rw = parse_recipe("nvfp4-rowwise");
    CHECK((!rw.input.columnwise_rht && !rw.grad.columnwise_rht && !rw.weight.columnwise_rht));
    CHECK((rw.rule == nv.rule && rw.weight.block_rows == 16 && rw.grad.block_cols == 16));
    CHECK(to_json(nv)["roles"]["grad"]["columnwise_rht"] == true);
    CHECK(to_json(nv)["roles"]["weight"]["columnwise_rht"] == false);
    CHECK(parse_recipe("nvfp4-torchao").rule == ScaleRule::nvfp4_torchao);
    CHECK(parse_recipe("nvfp4-torchao").weight.block_rows == 1);  // torchao has no 2-D NVFP4 blocks
    for (const auto& [n, f, rule] : {std::tuple{"mxfp4", Format::e2m1, ScaleRule::mx_roundup},
                                     std::tuple{"mxfp6-e2m3-ocp", Format::e2m3, ScaleRule::mx_ocp_floor},
                                     std::tuple{"mxfp6-e3m2", Format::e3m2, ScaleRule::mx_roundup}}) {
        INFO(n);
        const auto r = parse_recipe(n);
        CHECK(r.rule == rule);
        CHECK((r.input.format == f && r.weight.format == f && r.grad.format == f));
        CHECK((r.input.block_rows == 1 && r.input.block_cols == 32));
    }
}

TEST_CASE("preset parameters match the frameworks' defaults", "[lib][recipes]") {
    const auto te = parse_recipe("te-delayed");
    CHECK(te.history_len == 1024);
    CHECK(te.algo == AmaxAlgo::max);
    CHECK(te.input.format == Format::e4m3);
    CHECK(te.grad.format == Format::e5m2);
    const auto mg = parse_recipe("megatron");
    CHECK(mg.history_len == 1);
    CHECK(mg.algo == AmaxAlgo::most_recent);
    const auto blk = parse_recipe("te-block");
    CHECK(blk.weight.block_rows == 128);
    CHECK(blk.weight.block_cols == 128);
    CHECK(blk.input.block_rows == 1);
    CHECK(blk.input.block_cols == 128);
    CHECK(blk.pow2);
    CHECK(parse_recipe("mxfp8").input.block_cols == 32);
    CHECK(parse_recipe("torchao-rowwise").input.granularity == Granularity::row);
    CHECK(parse_recipe("torchao-tensorwise").epsilon == 1e-12);
    CHECK(parse_recipe("deepseek-v3").epsilon == 1e-4);
    CHECK(parse_recipe("msamp").input.window == 16);
    CHECK(parse_recipe("msamp").weight.window == 1);
}

TEST_CASE("bad recipe names and files give one message naming them", "[lib][recipes]") {
    CHECK_THAT(error_of("no-such-recipe"), Catch::Contains("no-such-recipe") && Catch::Contains("te-delayed"));
    const std::string bad_json = write_temp("bad.json", "{ not json");
    CHECK_THAT(error_of(bad_json), Catch::Contains(bad_json) && Catch::Contains("not valid JSON"));

    auto j = to_json(parse_recipe("te-current"));
    j.erase("margin");
    const std::string missing = write_temp("missing.json", j.dump());
    CHECK_THAT(error_of(missing), Catch::Contains(missing) && Catch::Contains("'margin'"));

    j = to_json(parse_recipe("te-current"));
    j["extra"] = 1;
    const std::string extra = write_temp("extra.json", j.dump());
    CHECK_THAT(error_of(extra), Catch::Contains("unknown field 'extra'"));

    j = to_json(parse_recipe("te-current"));
    j["roles"]["grad"]["format"] = "e9m9";
    const std::string fmt = write_temp("fmt.json", j.dump());
    CHECK_THAT(error_of(fmt), Catch::Contains("roles.grad") && Catch::Contains("e9m9"));

    j = to_json(parse_recipe("te-current"));
    j["history_len"] = 0;
    const std::string hl = write_temp("hl.json", j.dump());
    CHECK_THAT(error_of(hl), Catch::Contains("history_len"));

    j = to_json(parse_recipe("te-current"));
    j["algo"] = "mean";
    const std::string al = write_temp("al.json", j.dump());
    CHECK_THAT(error_of(al), Catch::Contains("'algo'") && Catch::Contains("most_recent"));

    j = to_json(parse_recipe("te-current"));
    j["pow2"] = "yes";
    const std::string pw = write_temp("pw.json", j.dump());
    CHECK_THAT(error_of(pw), Catch::Contains("pow2"));
    j = to_json(parse_recipe("te-current"));
    j["roles"]["input"].erase("columnwise_rht");
    const std::string nr = write_temp("nr.json", j.dump());
    CHECK_THAT(error_of(nr), Catch::Contains("'roles.input.columnwise_rht'"));

    j = to_json(parse_recipe("mxfp4"));  // 1 x 32 blocks: TE's RHT is 16 wide
    j["roles"]["grad"]["columnwise_rht"] = true;
    const std::string rb = write_temp("rb.json", j.dump());
    CHECK_THAT(error_of(rb), Catch::Contains("roles.grad") && Catch::Contains("1 x 16"));

    j = to_json(parse_recipe("nvfp4"));
    j["roles"]["grad"]["columnwise_rht"] = 1;
    const std::string rt = write_temp("rt.json", j.dump());
    CHECK_THAT(error_of(rt), Catch::Contains("'columnwise_rht' must be true or false"));
    for (const auto& p : {bad_json, missing, extra, fmt, hl, al, pw, nr, rb, rt}) std::remove(p.c_str());
}

// Issue 16: rounding per role. TransformerEngine NVFP4BlockScaling (transformer_engine/common/
// recipe/__init__.py): fp4_quant_bwd_grad has stochastic_rounding=True by default,
// fp4_quant_fwd_inp and fp4_quant_fwd_weight have False. Every other preset rounds all roles alike.
TEST_CASE("rounding per role: nvfp4 gradients round stochastically, the rest as the recipe", "[lib][recipes]") {
    for (const char* p : {"nvfp4", "nvfp4-rowwise"}) {
        INFO(p);
        const RecipeSpec r = parse_recipe(p);
        CHECK(r.policy.rounding == Rounding::nearest_even);
        CHECK(r.policy_for(Role::gradient).rounding == Rounding::stochastic);
        CHECK(r.policy_for(Role::activation).rounding == Rounding::nearest_even);
        CHECK(r.policy_for(Role::weight).rounding == Rounding::nearest_even);
        CHECK(r.policy_for(Role::gradient).overflow == r.policy.overflow);  // only the rounding is per role
        CHECK(r.policy_for(Role::gradient).nan == r.policy.nan);
        CHECK(block_recipe(r, Role::gradient, 64).policy.rounding == Rounding::stochastic);
        CHECK(block_recipe(r, Role::activation, 64).policy.rounding == Rounding::nearest_even);
        CHECK(to_json(r)["roles"]["grad"]["rounding"] == "stochastic");
        CHECK_FALSE(to_json(r)["roles"]["input"].contains("rounding"));
    }
    for (const auto& n : recipe_presets()) {
        if (n == "nvfp4" || n == "nvfp4-rowwise") continue;
        INFO(n);
        const RecipeSpec r = parse_recipe(n);
        for (Role role : numerics::kAllRoles) CHECK(r.policy_for(role).rounding == r.policy.rounding);
        for (const char* slot : {"input", "weight", "grad"})
            CHECK_FALSE(to_json(r)["roles"][slot].contains("rounding"));
    }
}

TEST_CASE("rounding per role in recipe files: optional, read back, the recipe-wide value otherwise", "[lib][recipes]") {
    nlohmann::json j = to_json(parse_recipe("te-current"));
    // Without the field (every file written before it existed): the recipe-wide rounding.
    RecipeSpec r = recipe_from_json(j, "f");
    CHECK_FALSE(r.grad.rounding.has_value());
    r.policy.rounding = Rounding::toward_zero;  // reaches every role without its own
    CHECK(r.policy_for(Role::gradient).rounding == Rounding::toward_zero);
    j["roles"]["grad"]["rounding"] = "stochastic";
    r = recipe_from_json(j, "f");
    CHECK(r.policy_for(Role::gradient).rounding == Rounding::stochastic);
    CHECK(r.policy_for(Role::optimizer_state).rounding == Rounding::nearest_even);  // the input slot
    CHECK(to_json(r) == j);
    r.policy.rounding = Rounding::toward_zero;  // the role keeps its own
    CHECK(r.policy_for(Role::gradient).rounding == Rounding::stochastic);
    for (const nlohmann::json bad : {nlohmann::json("sideways"), nlohmann::json(3), nlohmann::json(nullptr)}) {
        j["roles"]["grad"]["rounding"] = bad;
        CHECK_THROWS_WITH(recipe_from_json(j, "file 'x'"),
                          Catch::Contains("file 'x' roles.grad: field 'rounding'") && Catch::Contains("stochastic"));
    }
    // The other role fields stay required and unknown ones refused, with the field present too.
    j["roles"]["grad"]["rounding"] = "nearest-even";
    j["roles"]["grad"]["roundnig"] = "nearest-even";
    CHECK_THROWS_WITH(recipe_from_json(j, "f"), Catch::Contains("unknown field 'roundnig'"));
}
