// inspect's report in one process: the tensors analysed in order into rows, and its JSON and CSV
// forms agreeing with the rows.
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "fp8kit/analysis/inspect_report.hpp"

#include "written.hpp"

using namespace fp8kit;

namespace {}  // namespace

TEST_CASE("inspect report: rows in tensor order, JSON and CSV from the same rows", "[dump]") {
    dump::Selection sel;
    sel.include = {"*layers.0*"};
    inspect::Report r = inspect::open({std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_dump.h5"}, sel, {});
    REQUIRE(r.errors.empty());
    r.options.recipe = parse_recipe("te-current");
    inspect::analyse_all(*r.dump, r.options, [&](std::size_t i, const inspect::Result* res, std::exception_ptr e) {
        inspect::add(r, i, res, e);
    });
    REQUIRE(r.rows.size() == r.dump->tensors().size());
    REQUIRE(!r.rows.empty());

    const auto j = nlohmann::json::parse(written([&](std::FILE* f) { inspect::write_json(r, f); }));
    CHECK(j["recipe"] == "te-current");
    CHECK(j["summary"]["tensors"] == r.rows.size());
    REQUIRE(j["tensors"].size() == r.rows.size());
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        CHECK(j["tensors"][i]["name"] == r.rows[i].t->name);
        CHECK(j["tensors"][i]["numel"] == r.rows[i].r.stats.numel);
    }

    const std::string csv = written([&](std::FILE* f) { inspect::write_csv(r, f); });
    CHECK(csv.rfind("file,name,step,role,dtype,format,stat,value\n", 0) == 0);
    CHECK(csv.find("," + r.rows.back().t->name + ",") != std::string::npos);
}
