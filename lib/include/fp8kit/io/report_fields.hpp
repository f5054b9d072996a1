// A result type's field table: the key of each field and how to read its value from one row, written
// once beside the type, from which its JSON, its CSV and the Python module's dict are all built, so
// that the three carry the same keys (docs/schemas/README.md, "Key names"). A table is a static
// array of plain function pointers: the writers visit it without building anything per row (sweep
// writes millions of rows).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <fmt/compile.h>
#include <fmt/format.h>

#include "fp8kit/io/json_number.hpp"
#include "fp8kit/io/json_out.hpp"
#include "fp8kit/io/printable.hpp"

namespace fp8kit::io {

// One field's value in one row: null (no value: not applicable), a flag, an integer, a count, a
// number (possibly non-finite) or a name (pointing into the row or to static storage).
using FieldValue = std::variant<std::monostate, bool, std::int64_t, std::uint64_t, double, std::string_view>;

template <class Row>
struct Field {
    std::string_view key;
    FieldValue (*get)(const Row&);
};

// A field table: its fields in report order, and each key as JSON writes it (`,"key":`) in a
// fixed-size slot, so that a row copies a constant number of bytes per key (no library call).
template <class Row>
class FieldTable {
public:
    static constexpr std::size_t kSlot = 48;  // a key of at most kSlot - 5 bytes
    FieldTable(std::initializer_list<Field<Row>> fields) : fields_(fields) {
        for (const auto& f : fields_) {
            if (f.key.size() + 5 > kSlot) throw std::logic_error("a report field's key is too long");
            JsonKey k{};
            k.size = static_cast<std::uint8_t>(f.key.size() + 4);
            k.bytes[0] = ',';
            k.bytes[1] = '"';
            std::memcpy(k.bytes + 2, f.key.data(), f.key.size());
            k.bytes[f.key.size() + 2] = '"';
            k.bytes[f.key.size() + 3] = ':';
            keys_.push_back(k);
        }
    }
    auto begin() const { return fields_.begin(); }
    auto end() const { return fields_.end(); }
    std::size_t size() const { return fields_.size(); }
    const Field<Row>& operator[](std::size_t i) const { return fields_[i]; }
    struct JsonKey {
        char bytes[kSlot];
        std::uint8_t size;  // of `,"key":`
    };
    const JsonKey& json_key(std::size_t i) const { return keys_[i]; }

private:
    std::vector<Field<Row>> fields_;
    std::vector<JsonKey> keys_;
};

// The value as a number (long-form reports whose every value is a double): null and a name are NaN.
inline double field_number(const FieldValue& v) {
    return std::visit(
        [](const auto& x) -> double {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate> || std::is_same_v<T, std::string_view>)
                return std::nan("");
            else
                return static_cast<double>(x);
        },
        v);
}

// The value as one CSV cell: null is empty, a number has 9 significant digits (non-finite: "inf",
// "-inf", "nan"), a name is quoted when it needs to be (io::csv_field).
inline void csv_value(fmt::memory_buffer& b, const FieldValue& v) {
    std::visit(
        [&](const auto& x) {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate>)
                return;
            else if constexpr (std::is_same_v<T, bool>)
                b.append(std::string_view(x ? "true" : "false"));
            else if constexpr (std::is_same_v<T, double>)
                fmt::format_to(fmt::appender(b), FMT_COMPILE("{:.9g}"), x);
            else if constexpr (std::is_same_v<T, std::string_view>)
                b.append(csv_field(x));
            else
                json_out::integer(b, x);
        },
        v);
}

// The value as a nlohmann::json value (for reports built as one object): the same spelling.
template <class Json = nlohmann::json>
Json json_of(const FieldValue& v) {
    return std::visit(
        [](const auto& x) -> Json {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate>)
                return Json(nullptr);
            else if constexpr (std::is_same_v<T, double>)
                return json_number<Json>(x);
            else if constexpr (std::is_same_v<T, std::string_view>)
                return Json(std::string(x));
            else
                return Json(x);
        },
        v);
}

// Every field of `table` into the object `j`.
template <class Json, class Table, class Row>
void put_fields(Json& j, const Table& table, const Row& row) {
    for (const auto& f : table) j[std::string(f.key)] = json_of<Json>(f.get(row));
}

// `"key":value` for every field of `table` (a comma before each, and before the first unless
// `first`), written in place in space reserved for the whole row (json_out::Row): sweep writes
// millions of rows. A name value is escaped by json_out::string, outside the reserved span.
template <class Row>
void json_fields(fmt::memory_buffer& b, const FieldTable<Row>& table, const Row& row, bool first = false) {
    using Table = FieldTable<Row>;
    // Per field: its key's slot and at most 32 bytes of a number, "null" or a flag.
    const std::size_t most = table.size() * (Table::kSlot + 32);
    std::optional<json_out::Row> r;
    r.emplace(b, most);
    for (std::size_t i = 0; i < table.size(); ++i) {
        const FieldValue v = table[i].get(row);
        const auto& k = table.json_key(i);
        // kSlot - 1 bytes from the slot's first or second byte: both within the slot.
        r->slot<Table::kSlot - 1>(k.bytes + (first ? 1 : 0), k.size - (first ? 1 : 0));
        first = false;
        std::visit(
            [&](const auto& x) {
                using T = std::decay_t<decltype(x)>;
                if constexpr (std::is_same_v<T, std::monostate>)
                    r->lit("null");
                else if constexpr (std::is_same_v<T, bool>)
                    x ? r->lit("true") : r->lit("false");
                else if constexpr (std::is_same_v<T, double>)
                    r->stat(x);
                else if constexpr (std::is_same_v<T, std::string_view>) {
                    r->done();
                    json_out::string(b, x);
                    r.emplace(b, most);
                } else
                    r->integer(x);
            },
            v);
    }
    r->done();
}

// The table's keys as CSV header cells, a comma before each.
template <class Table>
void csv_keys(fmt::memory_buffer& b, const Table& table) {
    for (const auto& f : table) {
        b.push_back(',');
        b.append(f.key);
    }
}

// The row's cells, a comma before each.
template <class Table, class Row>
void csv_fields(fmt::memory_buffer& b, const Table& table, const Row& row) {
    for (const auto& f : table) {
        b.push_back(',');
        csv_value(b, f.get(row));
    }
}

}  // namespace fp8kit::io
