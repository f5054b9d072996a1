// How every report writes a number that may be non-finite. JSON has no Inf or NaN, so each report
// (CLI --json of every command, the JSON files fp8kit writes) writes them as the strings "inf",
// "-inf" and "nan"; a finite value is a JSON number. null means "no value" (not applicable), never a
// non-finite number. docs/schemas/README.md gives the convention; CSV and text use the same words.
#pragma once

#include <cmath>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

namespace fp8kit::io {

// The word for a non-finite value ("inf", "-inf", "nan"); empty for a finite one.
inline const char* nonfinite_word(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return "";
}

// `v` as a JSON value: a number, or its non-finite word. Json: nlohmann::json or ordered_json.
template <class Json = nlohmann::json>
Json json_number(double v) {
    if (!std::isfinite(v)) return Json(nonfinite_word(v));
    return Json(v);
}

// Every non-finite number inside `j` (objects and arrays, at any depth) replaced by its word, for
// JSON built from raw doubles: nlohmann writes a non-finite double as null.
template <class Json>
void nonfinite_to_words(Json& j) {
    if (j.is_number_float()) {
        const double v = j.template get<double>();
        if (!std::isfinite(v)) j = Json(nonfinite_word(v));
    } else if (j.is_structured()) {
        for (auto& item : j) nonfinite_to_words(item);
    }
}

// `v` as text (CSV cells, terminal): the shortest decimal that reads back to the same double, or its
// non-finite word.
inline std::string text_number(double v) {
    if (!std::isfinite(v)) return nonfinite_word(v);
    return fmt::format("{}", v);
}

// `v` with `decimals` digits after the point (tables that align their columns), or its
// non-finite word.
inline std::string fixed_number(double v, int decimals) {
    if (!std::isfinite(v)) return nonfinite_word(v);
    return fmt::format("{:.{}f}", v, decimals);
}

}  // namespace fp8kit::io
