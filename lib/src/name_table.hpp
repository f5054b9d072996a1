// An enum's names as one table, read both ways: name(value) and parse(string). A bad name's
// message lists the accepted names from the same table, so a new value is spelled in one place.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <fmt/format.h>

namespace fp8kit::detail {

template <class E>
struct NameEntry {
    E value;
    std::string_view name;
    bool alias = false;  // accepted when parsing; never printed, nor listed as a choice
};

// "a, b, c": the table's names, aliases left out.
template <class E, std::size_t N>
std::string name_list(const NameEntry<E> (&table)[N]) {
    std::string out;
    for (const auto& e : table)
        if (!e.alias) out += (out.empty() ? "" : ", ") + std::string(e.name);
    return out;
}

// The value's first name in the table ("?" for a value the table lacks).
template <class E, std::size_t N>
std::string_view name_in(const NameEntry<E> (&table)[N], E v) {
    for (const auto& e : table)
        if (e.value == v && !e.alias) return e.name;
    return "?";
}

// The value named `s` (exact spelling), or std::invalid_argument "unknown <what> 's' (choose
// from a, b, c)".
template <class E, std::size_t N>
E parse_in(const NameEntry<E> (&table)[N], std::string_view s, std::string_view what) {
    for (const auto& e : table)
        if (e.name == s) return e.value;
    throw std::invalid_argument(fmt::format("unknown {} '{}' (choose from {})", what, s, name_list(table)));
}

}  // namespace fp8kit::detail
