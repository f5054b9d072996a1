// Shared pieces of the Python bindings: argument parsing with the CLI's messages (argument names
// are the Python keyword names), and the registration function of each bound area.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/io/report_fields.hpp"
#include "fp8kit/stats/fields.hpp"
#include "fp8kit/stats/statistics.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit {
struct RecipeSpec;
namespace dump {
struct Problem;
}
}  // namespace fp8kit

namespace fp8kit::py {

namespace pyb = pybind11;
using OptStr = std::optional<std::string>;

// Bad arguments raise std::invalid_argument, which pybind11 turns into ValueError.
Format require_format(const std::string& s, const char* arg);
Wide require_wide(const std::string& s, const char* arg);

// profile=, or all of rounding=, overflow=, nan= (the CLI's --profile | --round --overflow --nan).
Policy resolve_policy(Format format, Wide from, const OptStr& profile, const OptStr& rounding, const OptStr& overflow,
                      const OptStr& nan);

// The array's data when it is C-contiguous with elements of `itemsize` bytes.
const void* contiguous_data(const pyb::array& a, std::size_t itemsize, const char* arg);
std::vector<pyb::ssize_t> shape_of(const pyb::array& a);

// A recipe from a preset name or file path, or from JSON text (is_json), with the library's messages.
RecipeSpec recipe_of(const std::string& text, bool is_json);

// All numbers of a QuantStats (and mse, sqnr_db, dynamic range, exponent histogram) as a dict.
// A statistics type's field table (fp8kit/stats/fields.hpp) into `d`: the CLI's keys.
void put_fields(pyb::dict& d, const std::vector<StatField>& fields);
pyb::dict stats_dict(const QuantStats& s);

// One field's value as a Python object: None, bool, int, float (non-finite as float) or str.
inline pyb::object py_value(const io::FieldValue& v) {
    return std::visit(
        [](const auto& x) -> pyb::object {
            using T = std::decay_t<decltype(x)>;
            if constexpr (std::is_same_v<T, std::monostate>)
                return pyb::none();
            else if constexpr (std::is_same_v<T, std::string_view>)
                return pyb::str(x.data(), x.size());
            else
                return pyb::cast(x);
        },
        v);
}
// Every field of a result type's field table (io/report_fields.hpp) into `d`: the CLI's keys.
template <class Table, class Row>
void put_fields(pyb::dict& d, const Table& table, const Row& row) {
    for (const auto& f : table) d[pyb::str(f.key.data(), f.key.size())] = py_value(f.get(row));
}
// A BlockStats as fp8kit.stats(recipe=<block recipe>) returns it, without 'scale_inv' (the caller
// adds it: a numpy array, or a device array for a GPU input).
pyb::dict block_stats_dict(const BlockStats& b, Format format);

// A new 1-D numpy array holding a copy of v, its shape given as a container so that no
// constructor overload can read the count as anything else.
template <class T>
pyb::array_t<T> to_array(const std::vector<T>& v) {
    pyb::array_t<T> a(std::vector<pyb::ssize_t>{static_cast<pyb::ssize_t>(v.size())});
    if (!v.empty()) std::memcpy(a.mutable_data(), v.data(), v.size() * sizeof(T));
    return a;
}

// lib's parse_X(name) (each enum's names table), its std::invalid_argument prefixed with the
// argument's name: "layout: unknown block layout 'x' (choose from ...)".
template <class Parse>
auto parse_named(Parse parse, const std::string& s, const char* arg) {
    try {
        return parse(s);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(std::string(arg) + ": " + e.what());
    }
}

// validate()'s scaling arguments (python/src/validate.cpp): the layout and mode names.
BlockLayout parse_block_layout(const std::string& s);
ScaleMode parse_scale_mode(const std::string& s);

// A report's "skipped" list as the CLI's JSON writes it: dicts with file, name and message.
pyb::list skipped_list(const std::vector<dump::Problem>& v);

void bind_convert(pyb::module_& m);
void bind_stats(pyb::module_& m);
void bind_recipes(pyb::module_& m);
void bind_validate(pyb::module_& m);
void bind_dump(pyb::module_& m);
void bind_replay(pyb::module_& m);
void bind_simulate(pyb::module_& m);
void bind_checkpoint(pyb::module_& m);
void bind_calibrate(pyb::module_& m);
void bind_kv(pyb::module_& m);
void bind_gemm(pyb::module_& m);
void bind_cuda(pyb::module_& m);
void bind_warn(pyb::module_& m);
void bind_comm(pyb::module_& m);
void bind_io(pyb::module_& m);

}  // namespace fp8kit::py
