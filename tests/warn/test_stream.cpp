// watch_stream: a trace file fed row by row gives the state and warnings of the whole-file pass
// (trace::load_trace + watch_trace), and hands back files it cannot stream (docs/early-warning.md,
// "Streaming").
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <random>

#include "../scratch_dir.hpp"
#include "fp8kit/analysis/trace_input.hpp"
#include "fp8kit/warn/trend.hpp"

using namespace fp8kit;
using namespace fp8kit::warn;
using fp8kit::test::ScratchDir;

namespace {

std::vector<std::string> keys(const Watcher& w) {
    std::vector<std::string> k;
    for (const auto& x : w.warnings())
        k.push_back(x.signal + "|" + x.tensor + "|" + std::to_string(x.step) + "|" + x.evidence);
    return k;
}

// Step-major rows of 40 tensors x 400 steps: noise, a growing tensor, a spiking one.
void write_trace(const std::string& path, bool swap_two_rows) {
    std::mt19937 g(11);
    std::normal_distribution<double> d(0, 0.3);
    std::ofstream f(path);
    f << "step,tensor,amax\n";
    for (int s = 0; s < 400; ++s)
        for (int t = 0; t < 40; ++t) {
            double l2 = d(g);
            if (t == 3) l2 += 0.08 * s;
            if (t == 5 && s == 300) l2 += 9;
            const int step = swap_two_rows && t == 7 && (s == 200 || s == 201) ? 401 - s : s;
            f << step << ",layers." << t << (t % 2 ? ".input" : ".grad_output") << "," << std::exp2(l2) << "\n";
        }
}

}  // namespace

TEST_CASE("watch_stream equals the whole-file pass, for 1 and 2 threads", "[warn]") {
    ScratchDir dir("watch_stream");
    const std::string p = dir.file("trace.csv");
    write_trace(p, false);
    TrendConfig c;
    c.recipe = parse_recipe("te-delayed");
    Watcher whole(c, p);
    watch_trace(whole, trace::load_trace(p, {}));
    Watcher s1(c, p);
    REQUIRE(watch_stream(s1, p, {}));
    CHECK(s1.trends().size() == 40);
    CHECK(keys(s1) == keys(whole));
    CHECK(keys(whole).size() > 2);  // the growth and the spike at least
    for (std::size_t i = 0; i < whole.trends().size(); ++i) {
        CHECK(s1.trends()[i].points() == 400);
        CHECK(s1.trends()[i].run_slope_per_k() == whole.trends()[i].run_slope_per_k());
    }
    // Patterns keep only matching series.
    Watcher only(c, p);
    REQUIRE(watch_stream(only, p, {"layers.3.*"}));
    REQUIRE(only.trends().size() == 1);
    CHECK(only.trends()[0].tensor() == "layers.3.input");
    // No match: handed back (load_trace names the patterns).
    Watcher none(c, p);
    CHECK_FALSE(watch_stream(none, p, {"nothing*"}));
}

TEST_CASE("watch_stream hands back a file whose steps are out of order", "[warn]") {
    ScratchDir dir("watch_stream");
    const std::string p = dir.file("trace.csv");
    write_trace(p, true);
    TrendConfig c;
    Watcher w(c, p);
    CHECK_FALSE(watch_stream(w, p, {}));
    // The whole-file reader sorts it, and its result is that of the sorted rows.
    Watcher whole(c, p);
    watch_trace(whole, trace::load_trace(p, {}));
    CHECK(whole.trends()[7].points() == 400);
}

TEST_CASE("watch_stream: bad rows throw TraceError naming the file and line", "[warn]") {
    ScratchDir dir("watch_stream");
    const std::string p = dir.file("bad.csv");
    std::ofstream(p) << "step,tensor,amax\n0,a,1\n1,a,-2\n";
    TrendConfig c;
    Watcher w(c, p);
    REQUIRE_THROWS_AS(watch_stream(w, p, {}), trace::TraceError);
    try {
        watch_stream(w, p, {});
    } catch (const trace::TraceError& e) {
        CHECK(std::string(e.what()).find("bad.csv:3") != std::string::npos);
    }
}

TEST_CASE("watch_stream: the bundled CSV trace and dlfw-inspect log equal their whole-file pass", "[warn]") {
    for (const char* f : {"/example/amax_trace.csv", "/example/dlfw_inspect.log"}) {
        const std::string p = std::string(FP8KIT_DATA_DIR) + f;
        INFO(p);
        TrendConfig c;
        c.recipe = parse_recipe("te-delayed");
        Watcher whole(c, p), streamed(c, p);
        watch_trace(whole, trace::load_trace(p, {}));
        REQUIRE(watch_stream(streamed, p, {}));
        CHECK(streamed.trends().size() == whole.trends().size());
        CHECK(keys(streamed) == keys(whole));
        CHECK_FALSE(keys(whole).empty());
    }
}
