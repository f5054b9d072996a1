// Ranking and writing warnings (text, JSON, CSV).
#include <algorithm>
#include <cmath>
#include <tuple>

#include <fmt/format.h>

#include "fp8kit/io/printable.hpp"
#include "fp8kit/warn/warning.hpp"

namespace fp8kit::warn {

void rank(std::vector<Warning>& w) {
    std::sort(w.begin(), w.end(), [](const Warning& a, const Warning& b) {
        if (a.severity != b.severity) return a.severity > b.severity;
        return std::tie(a.file, a.tensor, a.signal, a.step) < std::tie(b.file, b.tensor, b.signal, b.step);
    });
}

nlohmann::json to_json(const Warning& w) {
    return {{"signal", w.signal}, {"severity", std::isfinite(w.severity) ? nlohmann::json(w.severity) : nlohmann::json(nullptr)},
            {"file", w.file}, {"tensor", w.tensor}, {"step", w.step}, {"step_end", w.step_end},
            {"evidence", w.evidence}, {"numbers", w.numbers}, {"resembles", w.resembles}, {"advice", w.advice}};
}

std::string csv_header() { return "signal,severity,file,tensor,step,step_end,evidence,resembles,advice"; }

std::string to_csv_row(const Warning& w) {
    using io::csv_field;
    return fmt::format("{},{:.6g},{},{},{},{},{},{},{}", w.signal, w.severity, csv_field(w.file), csv_field(w.tensor), w.step,
                       w.step_end, csv_field(w.evidence), csv_field(w.resembles), csv_field(w.advice));
}

std::string to_text(const Warning& w) {
    std::string s = fmt::format("[{}] {} (severity {:.3g})", w.signal, io::printable(w.tensor), w.severity);
    if (w.step >= 0) s += fmt::format(", step {}", w.step);
    if (!w.file.empty()) s += fmt::format(", in {}", io::printable(w.file));
    s += fmt::format("\n  evidence:  {}\n  resembles: {}\n  change:    {}\n", io::printable(w.evidence), w.resembles, w.advice);
    return s;
}

}  // namespace fp8kit::warn
