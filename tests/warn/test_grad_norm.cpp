// The gradient-norm verdict (warn/grad_norm.hpp) on series whose answer is known by construction,
// and on two runs of the divergence benchmark (data/divergence/bench: one that diverged, its BF16
// control that did not).
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "fp8kit/warn/grad_norm.hpp"
#include "fp8kit/warn/trend.hpp"
#include "fp8kit/warn/watch.hpp"
#include "scratch_dir.hpp"

using namespace fp8kit::warn;

namespace {

std::int64_t flagged(const std::vector<double>& gn, GradNormConfig c = {}) {
    GradNormVerdict v(c);
    for (std::size_t s = 0; s < gn.size(); ++s) v.observe(static_cast<std::int64_t>(s), gn[s]);
    return v.flag() ? v.flag()->step : -1;
}

std::vector<double> loss_csv_grad_norms(const std::string& path) {
    std::ifstream f(path);
    REQUIRE(f.good());
    std::string line;
    std::getline(f, line);
    if (!line.empty() && line.back() == '\r') line.pop_back();  // csv.writer's line ends
    REQUIRE(line == "step,loss,grad_norm,lr");
    std::vector<double> gn;
    while (std::getline(f, line)) {
        std::stringstream ss(line);
        std::string cell;
        for (int i = 0; i < 3; ++i) std::getline(ss, cell, ',');
        gn.push_back(std::stod(cell));
    }
    return gn;
}

}  // namespace

TEST_CASE("grad-norm verdict: a falling norm is never flagged, a tripling within 80 steps is", "[warn]") {
    std::vector<double> gn(300);
    for (std::size_t s = 0; s < gn.size(); ++s) gn[s] = 5 * std::exp(-0.02 * static_cast<double>(s)) + 0.2;
    CHECK(flagged(gn) == -1);
    // From step 150 the norm grows 1.02x per step: the median of 16 reaches 3x its lowest (at the
    // onset, within the 80-step span) when 1.02^(s - 150 - 7.5) >= 3, s = 213.
    const double base = gn[149];
    for (std::size_t s = 150; s < gn.size(); ++s) gn[s] = base * std::pow(1.02, static_cast<double>(s - 149));
    const std::int64_t at = flagged(gn);
    CHECK(at >= 205);
    CHECK(at <= 215);
    // Slower growth (1.005x per step: 1.49x in 80 steps, 2.7x in 200) trips neither rule.
    for (std::size_t s = 150; s < gn.size(); ++s) gn[s] = base * std::pow(1.005, static_cast<double>(s - 149));
    CHECK(flagged(gn) == -1);
}

TEST_CASE("grad-norm verdict: nothing before `start`, a non-finite norm at once, steps must increase", "[warn]") {
    std::vector<double> gn(40, 1.0);
    for (std::size_t s = 0; s < 10; ++s) gn[s] = 0.01;  // a 100x rise inside the first steps
    CHECK(flagged(gn) >= 20);
    std::vector<double> flat(60, 1.0);
    flat[30] = std::numeric_limits<double>::infinity();
    CHECK(flagged(flat) == 30);
    GradNormVerdict v;
    v.observe(5, 1.0);
    CHECK_THROWS_AS(v.observe(5, 1.0), std::invalid_argument);
    CHECK_THROWS_AS(GradNormVerdict(GradNormConfig{16, 20, {{80, 1.0}}}), std::invalid_argument);
}

TEST_CASE("grad-norm verdict on the benchmark: the MXFP8 floor run is flagged before it diverged, BF16 is not",
          "[warn]") {
    const std::string bench = std::string(FP8KIT_DATA_DIR) + "/divergence/bench/";
    // runs.csv: mx-ocp (MXFP8, floor rule) at lr 0.04, seed 3, diverged at step 141.
    const auto diverging = loss_csv_grad_norms(bench + "quant_hi/mx-ocp/s3/quant/loss.csv");
    const std::int64_t at = flagged(diverging);
    CHECK(at >= 20);
    CHECK(at <= 141 - 20);
    const auto control = loss_csv_grad_norms(bench + "bf16_hi/bf16/s3/bf16/loss.csv");
    CHECK(control.size() == 400);
    CHECK(flagged(control) == -1);
    // The watcher raises it as a top-level warning.
    Watcher w(TrendConfig{}, "run");
    for (std::size_t s = 0; s < diverging.size(); ++s) w.observe_grad_norm(static_cast<std::int64_t>(s), diverging[s]);
    const auto ws = w.warnings();
    REQUIRE(!ws.empty());
    CHECK(ws.front().signal == "grad-norm-growth");
    CHECK(ws.front().step == at);
    CHECK(ws.front().level == "warning");
}

TEST_CASE("watch_files with a gradient-norm file: the verdict's warning; bad files named", "[warn]") {
    const std::string run = std::string(FP8KIT_DATA_DIR) + "/divergence/bench/quant_hi/mx-ocp/s3/quant/";
    WatchInputs in;
    in.files = {std::string(FP8KIT_DATA_DIR) + "/example/amax_trace.csv"};
    in.grad_norm = run + "loss.csv";
    const WatchReport r = watch_files(in);
    std::int64_t at = -1;
    for (const auto& w : r.warnings)
        if (w.signal == "grad-norm-growth") at = w.step;
    CHECK(at == flagged(loss_csv_grad_norms(run + "loss.csv")));
    CHECK(at > 0);
    fp8kit::test::ScratchDir dir("grad_norm");
    const auto bad = dir.file("bad.csv");
    std::ofstream(bad) << "step,loss\n0,1.0\n";
    GradNormVerdict v;
    CHECK_THROWS_WITH(read_grad_norms(bad, v), Catch::Contains("bad.csv") && Catch::Contains("grad_norm"));
    std::ofstream(bad) << "step,grad_norm\n0,1.0\n0,2.0\n";
    GradNormVerdict v2;
    CHECK_THROWS_WITH(read_grad_norms(bad, v2), Catch::Contains("line 3") && Catch::Contains("steps must increase"));
    std::ofstream(bad) << "step,grad_norm\n0,x\n";
    GradNormVerdict v3;
    CHECK_THROWS_WITH(read_grad_norms(bad, v3), Catch::Contains("line 2"));
}
