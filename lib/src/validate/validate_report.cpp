// The text / JSON forms of a ValidateReport.
#include <cmath>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/validate.hpp"
#include "fp8kit/io/json_number.hpp"

namespace fp8kit {

namespace {

std::string hex_bits(Wide w, std::uint64_t b) {
    return fmt::format("0x{:0{}x}", b, static_cast<int>(2 * wide_size(w)));
}

const char* scale_mode_name(ScaleMode m) {
    switch (m) {
        case ScaleMode::none: return "none";
        case ScaleMode::scale: return "scale";
        case ScaleMode::scale_inv: return "scale_inv";
    }
    return "?";
}

std::string nan_set(const std::vector<NanEncoding>& s) {
    if (s.size() == 4) return "any";
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) out += (i ? "/" : "") + std::string(name(s[i]));
    return out;
}

}  // namespace

std::string describe_consistency(const ValidateReport& r) {
    if (!r.policies_detected) return "policy search not run";
    if (r.consistent_policies.empty())
        return "no single policy (of 5 roundings x 3 overflow x 4 NaN encodings) reproduces the output";
    std::string out = "equals ";
    if (!r.consistent_profiles.empty()) {
        out += "profile ";
        for (std::size_t i = 0; i < r.consistent_profiles.size(); ++i)
            out += (i ? ", " : "") + r.consistent_profiles[i];
        out += "; policies: ";
    }
    bool first = true;
    for (Rounding rd : {Rounding::nearest_even, Rounding::nearest_away, Rounding::toward_zero,
                        Rounding::toward_positive, Rounding::toward_negative}) {
        std::vector<std::pair<Overflow, std::vector<NanEncoding>>> per;
        for (Overflow o : {Overflow::saturate_all, Overflow::saturate_finite, Overflow::no_saturate}) {
            std::vector<NanEncoding> ns;
            for (const Policy& p : r.consistent_policies)
                if (p.rounding == rd && p.overflow == o) ns.push_back(p.nan);
            if (!ns.empty()) per.emplace_back(o, ns);
        }
        if (per.empty()) continue;
        const bool any_overflow = per.size() == 3 && per[0].second == per[1].second && per[1].second == per[2].second;
        if (any_overflow) {
            out += fmt::format("{}{}, overflow any, NaN {}", first ? "" : "; ", name(rd), nan_set(per[0].second));
            first = false;
            continue;
        }
        for (auto& [o, ns] : per) {
            out += fmt::format("{}{}, {}, NaN {}", first ? "" : "; ", name(rd), name(o), nan_set(ns));
            first = false;
        }
    }
    return out;
}

std::vector<std::uint64_t> ValidateReport::indices(std::uint64_t index) const {
    if (shape.size() < 2) return {index};
    std::vector<std::uint64_t> at(shape.size());
    for (std::size_t d = shape.size(); d-- > 0;) {
        const std::uint64_t n = shape[d] ? shape[d] : 1;
        at[d] = index % n;
        index /= n;
    }
    return at;
}

std::string ValidateReport::position(std::uint64_t index) const {
    return fmt::format("[{}]", fmt::join(indices(index), ", "));
}

std::string ValidateReport::summary() const {
    std::string s = fmt::format("{} elements, {} -> {}, policy {}", total, name(from), name(to), describe(policy));
    if (scale_mode != ScaleMode::none) s += fmt::format(", {} ({})", scale_mode_name(scale_mode), name(layout));
    s += fmt::format("\n{} bit-exact, {} mismatches{}\n", matches, mismatches, mismatches ? "" : ": BIT-EXACT");
    for (MismatchClass c : kAllMismatchClasses) {
        const ClassReport& cr = (*this)[c];
        if (cr.count == 0) continue;
        s += fmt::format("  {}: {}\n", name(c), cr.count);
        for (const MismatchExample& e : cr.examples) {
            s += fmt::format("    {}{} input {} = {}", position(e.index),
                             shape.size() >= 2 ? fmt::format(" (element {})", e.index) : std::string(),
                             hex_bits(from, e.input_bits), io::text_number(e.input));
            if (scale_mode != ScaleMode::none)
                s += fmt::format(" (S {}, scaled {})", io::text_number(e.scale), io::text_number(e.scaled));
            s += fmt::format(": expected 0x{:02x} = {}, got 0x{:02x} = {}\n", e.expected,
                             io::text_number(e.expected_value), e.actual, io::text_number(e.actual_value));
        }
    }
    s += "consistency: " + describe_consistency(*this) + "\n";
    return s;
}

std::string ValidateReport::json() const {
    nlohmann::json j;
    j["total"] = total;
    j["matches"] = matches;
    j["mismatches"] = mismatches;
    j["exact"] = exact();
    j["from"] = std::string(name(from));
    j["to"] = std::string(name(to));
    j["policy"] = {{"rounding", std::string(name(policy.rounding))},
                   {"overflow", std::string(name(policy.overflow))},
                   {"nan", std::string(name(policy.nan))}};
    j["scale"] = {{"mode", scale_mode_name(scale_mode)}, {"layout", std::string(name(layout))}};
    nlohmann::json classes = nlohmann::json::object();
    for (MismatchClass c : kAllMismatchClasses) {
        const ClassReport& cr = (*this)[c];
        nlohmann::json ex = nlohmann::json::array();
        for (const MismatchExample& e : cr.examples)
            ex.push_back({{"index", e.index},
                          {"position", indices(e.index)},
                          {"input_bits", hex_bits(from, e.input_bits)},
                          {"input", io::text_number(e.input)},
                          {"scale", io::text_number(e.scale)},
                          {"scaled", io::text_number(e.scaled)},
                          {"expected", fmt::format("0x{:02x}", e.expected)},
                          {"expected_value", io::text_number(e.expected_value)},
                          {"actual", fmt::format("0x{:02x}", e.actual)},
                          {"actual_value", io::text_number(e.actual_value)}});
        classes[std::string(name(c))] = {{"count", cr.count}, {"examples", ex}};
    }
    j["classes"] = classes;
    j["policies_detected"] = policies_detected;
    nlohmann::json pol = nlohmann::json::array();
    for (const Policy& p : consistent_policies)
        pol.push_back({{"rounding", std::string(name(p.rounding))},
                       {"overflow", std::string(name(p.overflow))},
                       {"nan", std::string(name(p.nan))}});
    j["consistent_policies"] = pol;
    j["consistent_profiles"] = consistent_profiles;
    j["consistency"] = describe_consistency(*this);
    return j.dump(1);
}

}  // namespace fp8kit
