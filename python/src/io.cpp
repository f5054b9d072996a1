// The output sink (io/sink.hpp) for the Python package's files: the monitor's out_dir, plots; and
// the monitor's rows as the text of csv.writer and json.dumps (io/python_text.hpp).
#include <memory>
#include <string>
#include <utility>

#include <fmt/format.h>

#include "bindings.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/python_text.hpp"
#include "fp8kit/io/sink.hpp"

namespace fp8kit::py {

namespace {

// One value of a row as csv.writer writes it (None: the empty field; bool: True / False; int and
// float: str()) and as json.dumps does (null, true / false, the int, the float's repr or NaN /
// Infinity). Other types raise TypeError naming the column.
void append_value(std::string& csv, std::string& json, pyb::handle v, const std::string& key) {
    PyObject* o = v.ptr();
    if (o == Py_None) {
        json += "null";
    } else if (PyBool_Check(o)) {
        csv += o == Py_True ? "True" : "False";
        json += o == Py_True ? "true" : "false";
    } else if (PyLong_Check(o)) {
        int overflow = 0;
        const long long i = PyLong_AsLongLongAndOverflow(o, &overflow);
        if (overflow) {
            const std::string text = pyb::str(v);  // any size, as Python writes it
            csv += text;
            json += text;
        } else {
            const fmt::format_int text(i);
            csv.append(text.data(), text.size());
            json.append(text.data(), text.size());
        }
    } else if (PyFloat_Check(o)) {
        const double d = PyFloat_AS_DOUBLE(o);
        io::append_python_float(csv, d);
        io::append_python_float(json, d, true);
    } else if (PyUnicode_Check(o)) {
        Py_ssize_t size = 0;
        const char* utf8 = PyUnicode_AsUTF8AndSize(o, &size);
        if (utf8 == nullptr) throw pyb::error_already_set();
        const std::string_view s(utf8, static_cast<std::size_t>(size));
        csv += io::csv_field(s);
        if (!io::append_python_json_string(json, s))
            throw pyb::type_error("rows_text: column '" + key + "': not UTF-8");
    } else {
        throw pyb::type_error("rows_text: column '" + key + "': a " + std::string(Py_TYPE(o)->tp_name) +
                              " (None, bool, int, float or str expected)");
    }
}

// Rows (sequences of values in the order of `keys`) as (the CSV lines csv.writer writes, "\r\n"
// each; the JSON objects json.dumps writes for the dicts {key: value}, joined by ", " without the
// list's brackets). The monitor writes every monitored step's rows through it: Python's csv and
// json modules spend several milliseconds a step on the float values.
std::pair<pyb::bytes, pyb::bytes> rows_text(const pyb::list& rows, const std::vector<std::string>& keys) {
    std::vector<std::string> json_keys;
    for (const std::string& k : keys) {
        std::string q;
        if (!io::append_python_json_string(q, k)) throw pyb::type_error("rows_text: a key is not UTF-8");
        json_keys.push_back(q + ": ");
    }
    std::string csv, json;
    csv.reserve(rows.size() * 200);
    json.reserve(rows.size() * 600);
    for (std::size_t r = 0; r < rows.size(); ++r) {
        const pyb::object row = pyb::reinterpret_steal<pyb::object>(PySequence_Fast(rows[r].ptr(), "rows_text: a row"));
        if (!row) throw pyb::error_already_set();
        const auto size = static_cast<std::size_t>(PySequence_Fast_GET_SIZE(row.ptr()));
        if (size != keys.size())
            throw pyb::value_error("rows_text: row " + std::to_string(r) + " has " + std::to_string(size) +
                                   " values for " + std::to_string(keys.size()) + " keys");
        PyObject** values = PySequence_Fast_ITEMS(row.ptr());
        json += r ? ", {" : "{";
        for (std::size_t k = 0; k < keys.size(); ++k) {
            if (k) {
                csv += ',';
                json += ", ";
            }
            json += json_keys[k];
            append_value(csv, json, values[k], keys[k]);
        }
        csv += "\r\n";
        json += '}';
    }
    return {pyb::bytes(csv), pyb::bytes(json)};
}

}  // namespace

void bind_io(pyb::module_& m) {
    pyb::register_exception<io::OutputError>(m, "OutputError", PyExc_OSError);
    m.def(
        "write_file",
        [](const std::string& path, const pyb::bytes& data) {
            const std::string_view bytes = data;  // held by `data` for the call
            pyb::gil_scoped_release nogil;
            io::write_file(path, bytes);
        },
        pyb::arg("path"), pyb::arg("data"),
        "Writes `data` as the file `path` through fp8kit's output sink: a unique temporary beside it, every write, "
        "the fsync and the close checked, then renamed into place (a symlink is written through to its file; a "
        "device or FIFO in place; a folder refused). Raises OutputError (an OSError) and leaves nothing behind.");
    // A file written in pieces (the monitor's rows as they are made): the same sink, committed once.
    pyb::class_<io::OutputFile, std::unique_ptr<io::OutputFile>>(m, "OutputFile")
        .def(pyb::init<std::string>(), pyb::arg("path"))
        .def(
            "write",
            [](io::OutputFile& f, const pyb::bytes& data) {
                const std::string_view bytes = data;
                pyb::gil_scoped_release nogil;
                f.write(bytes);
            },
            pyb::arg("data"))
        .def("commit", &io::OutputFile::commit, pyb::call_guard<pyb::gil_scoped_release>(),
             "fsync, close and rename into place; without it the temporary is removed when the object goes");
    m.def("rows_text", &rows_text, pyb::arg("rows"), pyb::arg("keys"),
          "Rows (sequences in the order of `keys`) as (CSV bytes as csv.writer writes them, the JSON objects "
          "json.dumps writes for the rows as dicts, joined by ', ' without brackets).");
}

}  // namespace fp8kit::py
