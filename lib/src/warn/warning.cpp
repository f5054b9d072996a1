// Ranking and writing warnings (text, JSON, CSV).
#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/json_number.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {

void rank(std::vector<Warning>& w) {
    std::sort(w.begin(), w.end(), [](const Warning& a, const Warning& b) {
        const bool ta = a.level == "warning", tb = b.level == "warning";
        if (ta != tb) return ta;
        if (a.severity != b.severity) return a.severity > b.severity;
        return std::tie(a.file, a.tensor, a.signal, a.step) < std::tie(b.file, b.tensor, b.signal, b.step);
    });
}

nlohmann::json to_json(const Warning& w) {
    nlohmann::json j = {{"signal", w.signal},     {"severity", w.severity}, {"file", w.file},
                        {"tensor", w.tensor},     {"step", w.step},         {"step_end", w.step_end},
                        {"evidence", w.evidence}, {"numbers", w.numbers},   {"resembles", w.resembles},
                        {"advice", w.advice},     {"level", w.level},       {"note", w.note}};
    io::nonfinite_to_words(j);  // Inf severity and numbers are "inf", as in every report
    return j;
}

std::string csv_header() { return "signal,severity,file,tensor,step,step_end,evidence,resembles,advice,level,note"; }

std::string to_csv_row(const Warning& w) {
    using io::csv_field;
    return fmt::format("{},{:.6g},{},{},{},{},{},{},{},{},{}", w.signal, w.severity, csv_field(w.file),
                       csv_field(w.tensor), w.step, w.step_end, csv_field(w.evidence), csv_field(w.resembles),
                       csv_field(w.advice), w.level, csv_field(w.note));
}

std::string to_text(const Warning& w) {
    // A warning of several tensors (overflow-group) has no tensor of its own: its evidence names them.
    std::string s = w.tensor.empty()
                        ? fmt::format("[{}] (severity {:.3g})", w.signal, w.severity)
                        : fmt::format("[{}] {} (severity {:.3g})", w.signal, io::printable(w.tensor), w.severity);
    if (w.step >= 0) s += fmt::format(", step {}", w.step);
    if (!w.file.empty()) s += fmt::format(", in {}", io::printable(w.file));
    const std::size_t list = w.signal == "overflow-group" ? w.evidence.find(kGroupListMarker) : std::string::npos;
    if (list == std::string::npos || !w.numbers.contains("members")) {
        s += fmt::format("\n  evidence:  {}\n", io::printable(w.evidence));
    } else {
        // One line per member tensor.
        s += fmt::format("\n  evidence:  {}; every overflowing step per tensor (format, steps after warm-up of all):\n",
                         io::printable(w.evidence.substr(0, list)));
        for (const auto& m : w.numbers["members"]) s += fmt::format("    {}\n", group_member_line(m));
    }
    s += fmt::format("  resembles: {}\n  change:    {}\n", w.resembles, w.advice);
    if (!w.note.empty()) s += fmt::format("  note:      {}\n", w.note);
    return s;
}

std::string info_text(const std::vector<Warning>& w) {
    // Groups in order of first appearance (the ranked order), each: count and up to 3 tensors.
    std::vector<std::pair<std::string, std::vector<const Warning*>>> groups;
    for (const auto& x : w) {
        if (x.level == "warning") continue;
        const std::string key = x.signal + ": " + x.note;
        auto it = std::find_if(groups.begin(), groups.end(), [&](const auto& g) { return g.first == key; });
        if (it == groups.end())
            groups.push_back({key, {&x}});
        else
            it->second.push_back(&x);
    }
    std::string s;
    for (const auto& [key, v] : groups) {
        std::string names;
        for (std::size_t i = 0; i < v.size() && i < 3; ++i)
            names += fmt::format("{}{}", i ? ", " : "", io::printable(v[i]->tensor));
        s += fmt::format("  {} x {} ({}{})\n", v.size(), io::printable(key), names, v.size() > 3 ? ", ..." : "");
    }
    return s;
}

std::string step_runs(const std::vector<std::pair<std::int64_t, std::int64_t>>& runs) {
    std::string s;
    for (const auto& [a, b] : runs)
        s += fmt::format("{}{}", s.empty() ? "" : ", ", a == b ? fmt::format("{}", a) : fmt::format("{}-{}", a, b));
    return s;
}

}  // namespace fp8kit::warn
