// The output sink (io/sink.hpp) for the Python package's files: the monitor's out_dir, plots.
#include <memory>

#include "bindings.hpp"
#include "fp8kit/io/sink.hpp"

namespace fp8kit::py {

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
}

}  // namespace fp8kit::py
