// Overflows of many tensors under one recipe and margin: one top-level warning (docs/early-warning.md,
// "Grouped overflows").
#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

#include <fmt/format.h>

#include "fp8kit/io/printable.hpp"
#include "fp8kit/warn/sources.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {
namespace {

using Runs = std::vector<std::pair<std::int64_t, std::int64_t>>;

// The largest extra margin of the members for `key` (-1 when one of them has none).
int largest_margin(const std::vector<const Warning*>& members, const char* key) {
    int m = 0;
    for (const Warning* w : members) {
        const auto& v = w->numbers.at(key);
        if (v.is_null()) return -1;
        m = std::max(m, v.get<int>());
    }
    return m;
}

// "+1 for 20 tensors, +2 for 3": how many members need each extra margin after warm-up.
std::string margin_counts(const std::vector<const Warning*>& members) {
    std::map<int, int> n;
    for (const Warning* w : members) {
        const auto& v = w->numbers.at("extra_margin_after_warmup");
        ++n[v.is_null() ? -1 : v.get<int>()];
    }
    std::string s;
    for (const auto& [d, k] : n)
        s += fmt::format("{}{} for {} tensor{}", s.empty() ? "" : ", ",
                         d < 0 ? std::string("none") : fmt::format("+{}", d), k, k == 1 ? "" : "s");
    return s;
}

nlohmann::json member_json(const Warning& w) {
    const auto& n = w.numbers;
    nlohmann::json m = {{"tensor", w.tensor}};
    for (const char* k : {"format", "count", "after_warmup", "warmup_end", "first_step", "steps", "steps_truncated",
                          "worst_headroom", "worst_step", "extra_margin_after_warmup", "extra_margin_all"})
        m[k] = n.at(k);
    return m;
}

Warning make_group(const std::vector<const Warning*>& members) {
    const Warning& first = *members.front();
    const std::string recipe = first.numbers.at("recipe").get<std::string>();
    const int margin = first.numbers.at("margin").get<int>();
    Warning g;
    g.signal = "overflow-group";
    g.file = first.file;
    std::uint64_t count = 0, late = 0;
    std::string list;
    nlohmann::json mj = nlohmann::json::array();
    for (const Warning* w : members) {
        const auto& n = w->numbers;
        count += n.at("count").get<std::uint64_t>();
        late += n.at("after_warmup").get<std::uint64_t>();
        g.step = g.step < 0 ? w->step : std::min(g.step, w->step);
        g.step_end = std::max(g.step_end, w->step_end);
        mj.push_back(member_json(*w));
        list += "; " + group_member_line(mj.back());
    }
    const int late_d = largest_margin(members, "extra_margin_after_warmup");
    const int all_d = largest_margin(members, "extra_margin_all");
    g.severity = 8 + std::log2(static_cast<double>(count));
    g.evidence = fmt::format(
        "{} tensors overflow under recipe {} (margin {}) after warm-up: {} overflowing step(s) after warm-up, {} in "
        "all{}{}",
        members.size(), recipe, margin, late, count, kGroupListMarker, list.substr(2));
    g.numbers = {{"recipe", recipe},
                 {"margin", margin},
                 {"tensors", members.size()},
                 {"count", count},
                 {"after_warmup", late},
                 {"first_step", g.step},
                 {"extra_margin_after_warmup", margin_json(late_d)},
                 {"extra_margin_all", margin_json(all_d)},
                 {"margin_after_warmup", late_d < 0 ? nlohmann::json(nullptr) : nlohmann::json(margin + late_d)},
                 {"members", mj}};
    g.resembles = kCaseOutliers;
    g.advice = fmt::format(
        "one cause, the margin: {} (per tensor, after warm-up: {}; computed per overflowing step as the smallest "
        "margin whose scale, 2^-d x this one, keeps the cast within the format's max); or shorten the amax history "
        "so the scale follows; or current scaling for these tensors",
        margin_advice(margin, late_d, all_d), margin_counts(members));
    return g;
}

}  // namespace

std::string group_member_line(const nlohmann::json& m) {
    return fmt::format("{} ({}, {} of {} after warm-up): {}{}", io::printable(m.at("tensor").get<std::string>()),
                       m.at("format").get<std::string>(), m.at("after_warmup").get<std::uint64_t>(),
                       m.at("count").get<std::uint64_t>(), step_runs(m.at("steps").get<Runs>()),
                       m.at("steps_truncated").get<bool>() ? ", ..." : "");
}

nlohmann::json margin_json(int extra) { return extra < 0 ? nlohmann::json(nullptr) : nlohmann::json(extra); }

std::string margin_advice(int margin, int after_warmup, int all) {
    const auto one = [&](int extra, const char* which) {
        if (extra < 0) return fmt::format("no margin removes {} (an Inf amax, or a scale no margin changes)", which);
        return fmt::format("margin {} (+{}) removes {}", margin + extra, extra, which);
    };
    // after_warmup is 0 when no overflow comes after warm-up: only `all` says something.
    if (after_warmup == all || after_warmup == 0) return one(all, "every overflow");
    return one(after_warmup, "every overflow after warm-up") + ", " + one(all, "every overflow");
}

void group_overflows(std::vector<Warning>& w) {
    // Top-level overflows by (file, recipe, margin), members in rank order (severity, tensor).
    using Key = std::tuple<std::string, std::string, int>;
    std::map<Key, std::vector<std::size_t>> groups;
    for (std::size_t i = 0; i < w.size(); ++i)
        if (w[i].signal == "overflow" && w[i].level == "warning")
            groups[{w[i].file, w[i].numbers.at("recipe").get<std::string>(), w[i].numbers.at("margin").get<int>()}]
                .push_back(i);
    std::vector<Warning> made;
    for (auto& [key, idx] : groups) {
        if (idx.size() < 2) continue;
        std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
            if (w[a].severity != w[b].severity) return w[a].severity > w[b].severity;
            return w[a].tensor < w[b].tensor;
        });
        std::vector<const Warning*> members;
        for (std::size_t i : idx) members.push_back(&w[i]);
        made.push_back(make_group(members));
        for (std::size_t i : idx) {
            w[i].level = "info";
            w[i].note = fmt::format(
                "grouped: one of the tensors of the overflow-group warning under {} (margin {}), which gives the "
                "margin that removes them",
                std::get<1>(key), std::get<2>(key));
        }
    }
    for (auto& g : made) w.push_back(std::move(g));
}

}  // namespace fp8kit::warn
