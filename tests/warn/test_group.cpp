// Overflows that share one cause are one top-level warning (docs/early-warning.md, "Grouped
// overflows"): planted overflows in several tensors under one recipe and margin give one
// overflow-group warning listing every tensor and every overflowing step, with the margin that
// removes them, checked by watching again under that margin; the bundled real run shows at most 5
// top-level warnings and loses no per-tensor item.
#include <catch2/catch.hpp>

#include <algorithm>
#include <set>

#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/warn/trend.hpp"

using namespace fp8kit;
using namespace fp8kit::warn;

namespace {

std::vector<Warning> watched(const trace::Trace& t, const TrendConfig& c) {
    Watcher w(c, "trace");
    watch_trace(w, t);
    return w.warnings();
}

std::vector<const Warning*> by_level(const std::vector<Warning>& ws, const std::string& signal,
                                     const std::string& level) {
    std::vector<const Warning*> out;
    for (const auto& w : ws)
        if (w.signal == signal && w.level == level) out.push_back(&w);
    return out;
}

std::size_t top_level(const std::vector<Warning>& ws) {
    return static_cast<std::size_t>(
        std::count_if(ws.begin(), ws.end(), [](const Warning& w) { return w.level == "warning"; }));
}

// Overflowing steps after `from` of every tensor under `c`, from the per-tensor warnings.
std::uint64_t overflows_from(const std::vector<Warning>& ws, bool after_warmup) {
    std::uint64_t n = 0;
    for (const auto& w : ws)
        if (w.signal == "overflow") n += w.numbers[after_warmup ? "after_warmup" : "count"].get<std::uint64_t>();
    return n;
}

// Steps listed in runs [[a, b], ...] (the series has every step).
std::vector<std::int64_t> listed(const nlohmann::json& runs) {
    std::vector<std::int64_t> out;
    for (const auto& r : runs)
        for (auto s = r[0].get<std::int64_t>(); s <= r[1].get<std::int64_t>(); ++s) out.push_back(s);
    return out;
}

// 300 steps of amax 1 (no overflow under te-delayed after the first scale), with jumps: each
// (step, amax) raises the series to that amax from the step on.
trace::Series planted(const std::string& name, const std::vector<std::pair<std::int64_t, float>>& jumps) {
    trace::Series s;
    s.tensor = name;
    float level = 1;
    for (std::int64_t t = 0; t < 300; ++t) {
        for (const auto& [at, a] : jumps)
            if (at == t) level = a;
        s.steps.push_back(t);
        s.amax.push_back(level);
    }
    return s;
}

// Three tensors overflow after warm-up under te-delayed, margin 0 (E4M3: a cast overflows past
// 464 = 448 x 1.036): a x1.5 jumps twice (672, then x1.5 again: margin +1 removes each), b x3
// (1344: +2), c x2.5 after warm-up (+2) and x5 in warm-up (2240: +3). Two tensors stay flat.
trace::Trace planted_trace() {
    trace::Trace t;
    t.series.push_back(planted("model.layers.0.mlp.fc1.input", {{150, 1.5f}, {220, 2.25f}}));
    t.series.push_back(planted("model.layers.0.mlp.fc2.input", {{180, 3.0f}}));
    t.series.push_back(planted("model.layers.1.mlp.fc1.input", {{50, 5.0f}, {200, 12.5f}}));
    t.series.push_back(planted("model.layers.1.mlp.fc2.input", {}));
    t.series.push_back(planted("model.layers.2.mlp.fc1.input", {}));
    return t;
}

TrendConfig delayed(int margin) {
    TrendConfig c;
    c.recipe = parse_recipe("te-delayed");
    c.recipe->margin = margin;
    return c;
}

}  // namespace

TEST_CASE("overflows of several tensors under one recipe: one top-level warning listing them all", "[warn][group]") {
    const trace::Trace t = planted_trace();
    const TrendConfig c = delayed(0);
    const auto ws = watched(t, c);
    REQUIRE(top_level(ws) == 1);
    const auto groups = by_level(ws, "overflow-group", "warning");
    REQUIRE(groups.size() == 1);
    const Warning& g = *groups[0];
    const auto& n = g.numbers;
    CHECK(n["recipe"] == "te-delayed");
    CHECK(n["margin"] == 0);
    CHECK(n["tensors"] == 3);
    // Every planted tensor is a member, with every step replay finds overflowing.
    std::set<std::string> members;
    for (const auto& m : n["members"]) {
        const std::string name = m["tensor"].get<std::string>();
        members.insert(name);
        const auto& s =
            *std::find_if(t.series.begin(), t.series.end(), [&](const auto& x) { return x.tensor == name; });
        const auto ref = replay::replay_series(*c.recipe, s, std::nullopt);
        std::vector<std::int64_t> want;
        for (std::size_t j = 0; j < ref.steps.size(); ++j)
            if (ref.overflow[j]) want.push_back(ref.steps[j]);
        CHECK(listed(m["steps"]) == want);
        CHECK(g.evidence.find(name + " (e4m3") != std::string::npos);
        for (auto step : want) CHECK(g.evidence.find(std::to_string(step)) != std::string::npos);
    }
    CHECK(members == std::set<std::string>{"model.layers.0.mlp.fc1.input", "model.layers.0.mlp.fc2.input",
                                           "model.layers.1.mlp.fc1.input"});
    // The jumps' own steps are listed (the first cast of a tensor, at scale 1, does not overflow).
    CHECK(listed(n["members"][0]["steps"]).size() + listed(n["members"][1]["steps"]).size() +
              listed(n["members"][2]["steps"]).size() ==
          n["count"].get<std::size_t>());
    CHECK(n["count"] == 5);
    CHECK(n["after_warmup"] == 4);
    // The per-tensor items stay, as info naming the group.
    const auto own = by_level(ws, "overflow", "info");
    REQUIRE(own.size() == 3);
    for (const Warning* w : own) CHECK(w->note.find("overflow-group") != std::string::npos);
    // The remedy, computed: +2 removes every overflow after warm-up, +3 every one.
    CHECK(n["extra_margin_after_warmup"] == 2);
    CHECK(n["extra_margin_all"] == 3);
    CHECK(n["margin_after_warmup"] == 2);
    CHECK(g.advice.find("margin 2 (+2) removes every overflow after warm-up") != std::string::npos);
    // Text: one line per member tensor.
    const std::string text = to_text(g);
    for (const auto& name : members) CHECK(text.find("\n    " + name + " (e4m3") != std::string::npos);
}

TEST_CASE("the group's margin is the smallest that removes its overflows: watched again under it", "[warn][group]") {
    const trace::Trace t = planted_trace();
    CHECK(overflows_from(watched(t, delayed(1)), true) > 0);
    CHECK(overflows_from(watched(t, delayed(2)), true) == 0);
    CHECK(overflows_from(watched(t, delayed(2)), false) > 0);
    CHECK(overflows_from(watched(t, delayed(3)), false) == 0);
    // Under margin 1, b and c still overflow after warm-up: their group counts from margin 1.
    const auto ws = watched(t, delayed(1));
    const auto groups = by_level(ws, "overflow-group", "warning");
    REQUIRE(groups.size() == 1);
    const auto& n = groups[0]->numbers;
    CHECK(n["tensors"] == 2);
    CHECK(n["margin"] == 1);
    CHECK(n["extra_margin_after_warmup"] == 1);
    CHECK(n["margin_after_warmup"] == 2);
    CHECK(n["extra_margin_all"] == 2);
}

TEST_CASE("one overflowing tensor is not grouped, and a monitor's poll raises the group again as it grows",
          "[warn][group]") {
    trace::Trace one;
    one.series.push_back(planted("model.layers.0.mlp.fc1.input", {{150, 1.5f}}));
    one.series.push_back(planted("model.layers.0.mlp.fc2.input", {}));
    const auto ws = watched(one, delayed(0));
    CHECK(by_level(ws, "overflow-group", "warning").empty());
    CHECK(by_level(ws, "overflow", "warning").size() == 1);

    const trace::Trace t = planted_trace();
    Watcher live(delayed(0), "trace");
    std::size_t raised = 0;
    for (std::size_t k = 0; k < 300; ++k) {
        for (const auto& s : t.series) live.observe(s.tensor, s.steps[k], s.amax[k]);
        for (const auto& w : live.poll()) raised += w.signal == "overflow-group";
    }
    // The group forms at step 180 (two tensors past warm-up) and grows at 200 and 220.
    CHECK(raised == 3);
}

TEST_CASE("the bundled real run: at most 5 top-level warnings, every per-tensor overflow kept", "[warn][group]") {
    const trace::Trace t = trace::read_csv(std::string(FP8KIT_DATA_DIR) + "/example/amax_trace.csv");
    const TrendConfig c = delayed(0);
    Watcher w(c, "trace");
    watch_trace(w, t);
    const auto ws = w.warnings();
    CHECK(top_level(ws) <= 5);
    const auto groups = by_level(ws, "overflow-group", "warning");
    REQUIRE(groups.size() == 1);
    const auto& n = groups[0]->numbers;
    // Every tensor with an overflow after warm-up is a member, its steps those of its own trend.
    std::size_t late = 0;
    for (const auto& tr : w.trends()) {
        const auto own = tr.warnings("trace");
        const auto it = std::find_if(own.begin(), own.end(), [](const Warning& x) { return x.signal == "overflow"; });
        if (it == own.end() || it->level != "warning") continue;
        ++late;
        const auto m = std::find_if(n["members"].begin(), n["members"].end(),
                                    [&](const auto& x) { return x["tensor"] == tr.tensor(); });
        REQUIRE(m != n["members"].end());
        CHECK((*m)["steps"] == it->numbers["steps"]);
    }
    CHECK(late == n["members"].size());
    CHECK(late >= 2);
    // Its margin removes every overflow after warm-up; one less does not.
    const int extra = n["extra_margin_after_warmup"].get<int>();
    CHECK(overflows_from(watched(t, delayed(extra)), true) == 0);
    CHECK(overflows_from(watched(t, delayed(extra - 1)), true) > 0);
}
