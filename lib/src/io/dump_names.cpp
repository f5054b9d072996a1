// Names of stored types, and the guess of a step from tensor names (roles: numerics/roles.hpp).
#include <algorithm>
#include <cctype>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/printable.hpp"

#include "fp8kit/io/dump.hpp"
#include "fp8kit/numerics/roles.hpp"

namespace fp8kit::dump {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return out;
}

bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }

}  // namespace

std::optional<std::int64_t> guess_step(std::string_view path) {
    const std::string low = lower(path);
    std::optional<std::int64_t> found;
    // Keywords, longest first so "iteration" is not read as "iter" + "ation".
    static const char* const kWords[] = {"iteration", "step", "iter", "it"};
    std::size_t i = 0;
    while (i < low.size()) {
        // A keyword must start a token (after a separator or a digit-free boundary).
        const bool at_start = i == 0 || !std::isalpha(static_cast<unsigned char>(low[i - 1]));
        bool matched = false;
        if (at_start) {
            for (const char* w : kWords) {
                const std::size_t n = std::char_traits<char>::length(w);
                if (low.compare(i, n, w) != 0) continue;
                std::size_t j = i + n;
                if (j < low.size() && (low[j] == '_' || low[j] == '=' || low[j] == '-')) ++j;
                std::size_t k = j;
                while (k < low.size() && is_digit(low[k])) ++k;
                if (k == j || k - j > 18) continue;  // no digits, or more than int64 holds
                if (k < low.size() && std::isalpha(static_cast<unsigned char>(low[k]))) continue;
                found = std::stoll(low.substr(j, k - j));
                i = k;
                matched = true;
                break;
            }
        }
        if (!matched) ++i;
    }
    return found;  // the last one: the innermost component wins
}

std::string_view name(DType d) {
    switch (d) {
        case DType::f64: return "f64";
        case DType::f32: return "f32";
        case DType::f16: return "f16";
        case DType::bf16: return "bf16";
        case DType::e4m3: return "e4m3";
        case DType::e5m2: return "e5m2";
        case DType::e4m3fnuz: return "e4m3fnuz";
        case DType::e5m2fnuz: return "e5m2fnuz";
        case DType::e8m0: return "e8m0";
        case DType::e2m1: return "e2m1";
        case DType::e2m3: return "e2m3";
        case DType::e3m2: return "e3m2";
        case DType::e3m4: return "e3m4";
        case DType::e4m3b11fnuz: return "e4m3b11fnuz";
        case DType::e4m3ieee: return "e4m3ieee";
    }
    return "?";
}

std::optional<Format> fp8_format(DType d) {
    switch (d) {
        case DType::e4m3: return Format::e4m3;
        case DType::e5m2: return Format::e5m2;
        case DType::e4m3fnuz: return Format::e4m3fnuz;
        case DType::e5m2fnuz: return Format::e5m2fnuz;
        case DType::e8m0: return Format::e8m0;
        case DType::e2m1: return Format::e2m1;
        case DType::e2m3: return Format::e2m3;
        case DType::e3m2: return Format::e3m2;
        case DType::e3m4: return Format::e3m4;
        case DType::e4m3b11fnuz: return Format::e4m3b11fnuz;
        case DType::e4m3ieee: return Format::e4m3ieee;
        default: return std::nullopt;
    }
}

Wide delivered_as(DType d) {
    switch (d) {
        case DType::f64: return Wide::f64;
        case DType::f16: return Wide::f16;
        case DType::bf16: return Wide::bf16;
        default: return Wide::f32;
    }
}

std::string Problem::describe() const {
    return name.empty() ? fmt::format("{}: {}", io::quoted(file, 400), message)
                        : fmt::format("{}: {}: {}", io::quoted(file, 400), io::quoted(name), message);
}

void to_json(nlohmann::json& j, const Problem& p) { j = {{"file", p.file}, {"name", p.name}, {"message", p.message}}; }

std::vector<Problem> skipped(const std::vector<Problem>& notes) { return notes; }

DumpError::DumpError(std::string f, std::string n, const std::string& msg)
    : std::runtime_error(Problem{f, n, msg}.describe()), file(std::move(f)), name(std::move(n)), message(msg) {}

}  // namespace fp8kit::dump
