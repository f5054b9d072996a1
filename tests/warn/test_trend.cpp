// Trend signals (lib/src/warn, docs/early-warning.md) on series whose answers are known by
// construction: exact exponential growth, a lone spike, a flat series, and the incremental use a
// monitor makes of them (poll once per warning, same warnings as a whole-trace pass).
#include <catch2/catch.hpp>

#include <cmath>
#include <random>

#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/warn/trend.hpp"

using namespace fp8kit;
using namespace fp8kit::warn;

namespace {

const Warning* find(const std::vector<Warning>& w, const std::string& signal) {
    for (const auto& x : w)
        if (x.signal == signal) return &x;
    return nullptr;
}

// Log-normal noise around 1 (sigma in binades), seeded.
std::vector<float> noisy(std::size_t n, double sigma, unsigned seed) {
    std::mt19937 g(seed);
    std::normal_distribution<double> d(0, sigma);
    std::vector<float> a(n);
    for (auto& x : a) x = static_cast<float>(std::exp2(d(g)));
    return a;
}

}  // namespace

TEST_CASE("growth: slope of an exact exponential, first seen once the window is past the knee", "[warn]") {
    TrendConfig c;
    Watcher w(c);
    // Flat at 1 until step 100, then x2 every 20 steps (50 log2 per 1000 steps).
    for (int s = 0; s < 300; ++s) w.observe("act", s, static_cast<float>(std::exp2(std::max(0, s - 100) / 20.0)));
    const auto ws = w.warnings();
    const Warning* g = find(ws, "growth");
    REQUIRE(g != nullptr);
    CHECK(g->numbers["slope_log2_per_1000"].get<double>() == Approx(50).epsilon(1e-6));  // float32 amaxes
    // Flagged once the shortest window's least-squares slope passes the threshold: after the knee,
    // within that window; one episode (the longer windows' ramps are not new growth).
    CHECK(g->step > 100);
    CHECK(g->step <= 100 + 16 + 4);
    CHECK(g->numbers["episodes"] == 1);
    CHECK(g->level == "warning");  // after warm-up, no recipe follows it, faster than growth_top
    CHECK(find(ws, "spike") == nullptr);
}

TEST_CASE("no growth and no spike on stationary noise", "[warn]") {
    TrendConfig c;
    Watcher w(c);
    const auto a = noisy(2000, 0.5, 7);
    for (int s = 0; s < 2000; ++s) w.observe("grad", s, a[static_cast<std::size_t>(s)]);
    const auto ws = w.warnings();
    CHECK(find(ws, "growth") == nullptr);
    CHECK(find(ws, "spike") == nullptr);
    CHECK(std::fabs(w.trends()[0].run_slope_per_k()) < 1);
}

TEST_CASE("spike: the step, amax and median of a planted spike", "[warn]") {
    TrendConfig c;
    Watcher w(c);
    auto a = noisy(200, 0.2, 3);
    a[150] *= 1000;
    for (int s = 0; s < 200; ++s) w.observe("x", 10 * s, a[static_cast<std::size_t>(s)]);
    const auto ws = w.warnings();
    const Warning* sp = find(ws, "spike");
    REQUIRE(sp != nullptr);
    CHECK(sp->step == 1500);
    CHECK(sp->numbers["count"] == 1);
    CHECK(sp->numbers["spikes"][0]["amax"].get<float>() == a[150]);
}

TEST_CASE("overflow under delayed scaling: the steps replay finds, and a forecast before them", "[warn]") {
    TrendConfig c;
    c.recipe = parse_recipe("te-delayed");
    c.recipe->history_len = 16;
    Watcher w(c);
    // Growth per step of 2^0.05 with noise: each new maximum overflows under margin 0.
    trace::Series s;
    s.tensor = "model.layers.0.mlp.fc1.input";
    auto a = noisy(400, 0.02, 11);
    for (int i = 0; i < 400; ++i) {
        s.steps.push_back(i);
        s.amax.push_back(static_cast<float>(a[static_cast<std::size_t>(i)] * std::exp2(0.05 * i)));
    }
    trace::Trace t;
    t.series.push_back(s);
    watch_trace(w, t);
    const auto ref = replay::replay_series(*c.recipe, s, std::nullopt);
    const auto ws = w.warnings();
    const Warning* o = find(ws, "overflow");
    REQUIRE(o != nullptr);
    CHECK(o->numbers["count"].get<std::size_t>() == ref.overflow_steps);
    const Warning* f = find(ws, "overflow-forecast");
    REQUIRE(f != nullptr);
    CHECK(f->numbers["probability"].get<double>() >= 0.5);
}

TEST_CASE("a monitor's poll returns each warning once; incremental equals a whole-trace pass", "[warn]") {
    TrendConfig c;
    c.recipe = parse_recipe("te-delayed");
    Watcher live(c), batch(c);
    trace::Trace t;
    for (int k = 0; k < 3; ++k) {
        trace::Series s;
        s.tensor = "t" + std::to_string(k);
        auto a = noisy(500, 0.3, 20 + k);
        if (k == 1) a[300] *= 5000;
        for (int i = 0; i < 500; ++i) {
            s.steps.push_back(i);
            s.amax.push_back(a[static_cast<std::size_t>(i)] *
                             (k == 2 ? static_cast<float>(std::exp2(i / 25.0)) : 1.0f));
        }
        t.series.push_back(s);
    }
    std::size_t polled = 0;
    for (int i = 0; i < 500; ++i) {
        std::vector<std::string> names;
        std::vector<float> amax;
        for (const auto& s : t.series) {
            names.push_back(s.tensor);
            amax.push_back(s.amax[static_cast<std::size_t>(i)]);
        }
        live.observe_step(i, names, amax);
        if (i % 50 == 49) polled += live.poll().size();
    }
    watch_trace(batch, t);
    const auto a = live.warnings(), b = batch.warnings();
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(to_json(a[i]) == to_json(b[i]));
    // Each warning at least once; a top-level overflow or spike again when a later step adds to it.
    CHECK(polled >= a.size());
    CHECK(live.poll().empty());
    CHECK(find(a, "spike") != nullptr);
    CHECK(find(a, "growth") != nullptr);
}

TEST_CASE("memory per tensor stays bounded over a long run", "[warn]") {
    TrendConfig c;
    Watcher w(c);
    for (int s = 0; s < 100000; ++s) w.observe("x", s, static_cast<float>(1 + (s % 7)));
    const auto& tr = w.trends()[0];
    CHECK(tr.points() == 100000);
    CHECK(tr.spikes().size() <= c.spikes_kept);
    CHECK(std::fabs(tr.run_slope_per_k()) < 0.1);
}

TEST_CASE("fixed inference scale: the step each level is reached", "[warn]") {
    TrendConfig c;
    c.fixed_calibration = 10;
    c.fixed_recipe = parse_recipe("te-current");
    Watcher w(c);
    // amax 1 for 10 calibration steps, then x2 every 100 steps: the scale maps 1 to 448 (E4M3),
    // so the level 2^0 of max (amax * scale >= max) is reached at step 10, whose amax is still 1.
    for (int s = 0; s < 400; ++s)
        w.observe("layer.input", s, static_cast<float>(s < 10 ? 1.0 : std::exp2((s - 10) / 100.0)));
    const auto ws = w.warnings();
    const Warning* f = find(ws, "fixed-scale");
    REQUIRE(f != nullptr);
    const auto& lv = f->numbers["levels"];
    CHECK(lv[2]["log2_headroom"] == 0);
    CHECK(lv[2]["reached_step"] == 10);
    CHECK(lv[0]["reached_step"] == 10);
}

TEST_CASE("bad settings name the field; steps must increase", "[warn]") {
    TrendConfig c;
    c.window = 7;
    CHECK_THROWS_WITH(Watcher(c), Catch::Contains("window"));
    c = TrendConfig{};
    c.recipe = parse_recipe("te-current");
    CHECK_THROWS_WITH(Watcher(c), Catch::Contains("te-current"));
    Watcher w(TrendConfig{});
    w.observe("a", 5, 1.0f);
    CHECK_THROWS_WITH(w.observe("a", 5, 1.0f), Catch::Contains("step 5 after step 5"));
}

TEST_CASE("watch_trace checks steps before its parallel loop", "[warn]") {
    Watcher w(TrendConfig{});
    trace::Trace t;
    trace::Series s;
    s.tensor = "a";
    s.steps = {1, 2, 2};
    s.amax = {1, 1, 1};
    t.series.push_back(s);
    CHECK_THROWS_WITH(watch_trace(w, t), Catch::Contains("step 2 does not follow"));
    t.series[0].steps = {1, 2, 3};
    watch_trace(w, t);
    CHECK_THROWS_WITH(watch_trace(w, t), Catch::Contains("step 1 does not follow"));  // fed again: steps go back
    t.series.push_back(t.series[0]);
    t.series[0].steps = t.series[1].steps = {10, 11, 12};
    CHECK_THROWS_WITH(watch_trace(w, t), Catch::Contains("appears twice"));
}
