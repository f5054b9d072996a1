// The output sink (io/sink.hpp) for the Python package's files: the monitor's out_dir, plots.
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
}

}  // namespace fp8kit::py
