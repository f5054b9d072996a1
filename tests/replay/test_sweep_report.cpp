// sweep's report writers in one process (no ReportOptions::over: the rows are made and written
// in order by the writer itself, the path the CLI's MPI binding never takes).
#include <catch2/catch.hpp>

#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "fp8kit/analysis/sweep_report.hpp"

#include "written.hpp"

using namespace fp8kit;

namespace {

sweep::Loaded example() {
    sweep::Inputs in;
    in.files = {std::string(FP8KIT_DATA_DIR) + "/example/amax_trace.csv"};
    sweep::Loaded L = sweep::load_inputs(in);
    L.sweep->run(L.dumped, L.notes);
    return L;
}

}  // namespace

TEST_CASE("sweep report: JSON and CSV hold every series and candidate, text every class", "[replay][sweep]") {
    const sweep::Loaded L = example();
    const auto& sw = *L.sweep;
    sweep::ReportOptions o;
    o.inputs = {"amax_trace.csv"};
    o.formats = {std::nullopt};

    const auto j = nlohmann::json::parse(written([&](std::FILE* f) { sweep::write_json(L, o, f); }));
    CHECK(j["inputs"] == o.inputs);
    CHECK(j["candidates"].size() == sw.candidates().size());
    REQUIRE(j["tensors"].size() == sw.series().size());
    for (std::size_t s = 0; s < sw.series().size(); ++s) {
        CHECK(j["tensors"][s]["tensor"] == sw.series()[s].tensor);
        CHECK(j["tensors"][s]["outcomes"].size() == sw.candidates().size());
    }

    const std::string csv = written([&](std::FILE* f) { sweep::write_csv(L, o, f, f); });
    std::size_t lines = 0, classes = 0;
    for (char c : csv) lines += c == '\n';
    for (Role cls : {Role::activation, Role::weight, Role::gradient}) classes += sw.has_class(cls);
    CHECK(lines == 1 + (classes + sw.series().size()) * sw.candidates().size() + L.notes.size() + L.skipped.size());

    const std::string text = written([&](std::FILE* f) { sweep::write_text(L, o, f); });
    CHECK(text.rfind("sweep: ", 0) == 0);
    for (const auto& s : sw.series()) CHECK(text.find("  " + s.tensor + " ") != std::string::npos);
}
