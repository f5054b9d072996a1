// Tensor dumps (HDF5, safetensors): listing with selection, and whole tensors as numpy arrays.
#include <fmt/format.h>

#include <cstring>
#include <mutex>
#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/analysis/inspect.hpp"
#include "fp8kit/cluster/inspect.hpp"
#include <nlohmann/json.hpp>
#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::py {
namespace {

// HDF5's serial build is not thread-safe; reads run without the GIL, so they take this lock.
std::mutex& hdf5_lock() {
    static std::mutex m;
    return m;
}

pyb::dict info_dict(const dump::TensorInfo& t) {
    pyb::dict d;
    d["file"] = t.file;
    d["name"] = t.name;
    d["shape"] = pyb::tuple(pyb::cast(t.shape));
    d["numel"] = t.numel;
    d["storage"] = t.storage;
    d["dtype"] = std::string(dump::name(t.dtype));
    d["wide"] = std::string(name(t.wide));
    d["step"] = t.step ? pyb::cast(*t.step) : pyb::none();
    d["step_guessed"] = t.step_guessed;
    d["role"] = std::string(dump::name(t.role));
    d["role_guessed"] = t.role_guessed;
    return d;
}

pyb::list problems(const std::vector<dump::Problem>& v) {
    pyb::list out = skipped_list(v);  // the reports' item, plus the line the text prints
    for (std::size_t i = 0; i < v.size(); ++i) out[i].cast<pyb::dict>()["text"] = v[i].describe();
    return out;
}

class PyDump {
public:
    PyDump(const std::vector<std::string>& paths, const std::vector<std::string>& include,
           const std::vector<std::string>& exclude, const OptStr& steps) {
        std::vector<dump::Problem> expand_problems;
        const auto files = dump::expand_inputs(paths, expand_problems);
        dump::Selection sel;
        sel.include = include;
        sel.exclude = exclude;
        if (steps) sel.steps = dump::parse_steps(*steps);
        std::lock_guard<std::mutex> lock(hdf5_lock());
        dump_ = std::make_unique<dump::Dump>(files, sel);
        errors_ = expand_problems;
        errors_.insert(errors_.end(), dump_->errors().begin(), dump_->errors().end());
    }

    pyb::list tensors() const {
        pyb::list out;
        for (const auto& t : dump_->tensors()) out.append(info_dict(t));
        return out;
    }
    pyb::list errors() const { return problems(errors_); }
    pyb::list notes() const { return problems(dump_->notes()); }

    // Tensor i as raw bits of its delivered type (uint64/uint32/uint16) in its shape.
    pyb::array read(std::size_t i) {
        if (i >= dump_->tensors().size())
            throw std::out_of_range(
                fmt::format("tensor index {} out of range ({} tensors)", i, dump_->tensors().size()));
        const auto& t = dump_->tensors()[i];
        std::vector<pyb::ssize_t> shape(t.shape.begin(), t.shape.end());
        pyb::array out;
        switch (t.wide) {
            case Wide::f64: out = pyb::array_t<std::uint64_t>(shape); break;
            case Wide::f32: out = pyb::array_t<std::uint32_t>(shape); break;
            default: out = pyb::array_t<std::uint16_t>(shape); break;
        }
        auto* o = static_cast<unsigned char*>(out.mutable_data());
        const std::size_t size = wide_size(t.wide);
        const std::uint64_t numel = t.numel;
        {
            pyb::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(hdf5_lock());
            dump_->read(i, [&](const dump::Chunk& c) {
                if (c.first + c.count > numel)
                    throw dump::DumpError(t.file, t.name, "chunk past the end of the tensor");
                std::memcpy(o + c.first * size, c.bits, c.count * size);
            });
        }
        return out;
    }

    // [first, last): the tensors rank `rank` of `size` analyses (cluster::tensor_share, as the CLI under mpirun).
    std::pair<std::size_t, std::size_t> share(int rank, int size) const {
        if (size < 1 || rank < 0 || rank >= size)
            throw std::invalid_argument(fmt::format("rank {} of {}: expected 0 <= rank < size", rank, size));
        return cluster::tensor_share(*dump_, rank, size);
    }

    // inspect::analyse of tensor i: what `fp8kit inspect` computes for it.
    pyb::dict analyse(std::size_t i, const std::string& recipe, bool is_json, const OptStr& format) {
        if (i >= dump_->tensors().size())
            throw std::out_of_range(
                fmt::format("tensor index {} out of range ({} tensors)", i, dump_->tensors().size()));
        inspect::Options opts;
        opts.recipe = recipe_of(recipe, is_json);
        inspect::check_recipe(opts.recipe);
        if (format) opts.format = require_format(*format, "format");
        inspect::Result r;
        {
            pyb::gil_scoped_release nogil;
            std::lock_guard<std::mutex> lock(hdf5_lock());
            r = inspect::analyse(*dump_, i, opts, analyse_buf_);  // reused across tensors
        }
        pyb::dict d = stats_dict(r.stats);
        d["recipe"] = opts.recipe.name;
        d["recipe_role"] = std::string(slot_name(r.role));
        d["format"] = std::string(name(r.format));
        d["granularity"] = std::string(name(r.granularity));
        d["recipe_amax"] = r.amax;
        d["streamed"] = r.streamed;
        if (r.blocks) {
            d["scale"] = pyb::none();
            d["scale_inv"] = pyb::none();
            put_fields(d, block_stats_fields(*r.blocks));
        } else {
            d["scale"] = r.scale.scale;
            d["scale_inv"] = r.scale.scale_inv;
        }
        return d;
    }

private:
    std::unique_ptr<dump::Dump> dump_;
    std::vector<dump::Problem> errors_;
    // inspect::analyse's tensor buffer, kept between calls (under the HDF5 lock, as every call
    // that uses it): fresh allocations per tensor cost a third more CPU time in page faults.
    std::vector<unsigned char> analyse_buf_;
};

}  // namespace

pyb::list skipped_list(const std::vector<dump::Problem>& v) {
    pyb::list out;
    for (const auto& p : v) {
        pyb::dict d;
        d["file"] = p.file;
        d["name"] = p.name;
        d["message"] = p.message;
        out.append(d);
    }
    return out;
}

void bind_dump(pyb::module_& m) {
    using namespace pyb::literals;
    pyb::register_exception<dump::DumpError>(m, "DumpError", PyExc_OSError);
    pyb::class_<PyDump>(m, "Dump")
        .def(pyb::init<const std::vector<std::string>&, const std::vector<std::string>&,
                       const std::vector<std::string>&, const OptStr&>(),
             "paths"_a, "include"_a, "exclude"_a, "steps"_a)
        .def("tensors", &PyDump::tensors)
        .def("errors", &PyDump::errors)
        .def("notes", &PyDump::notes)
        .def("read", &PyDump::read, "i"_a)
        .def("share", &PyDump::share, "rank"_a, "size"_a)
        .def("analyse", &PyDump::analyse, "i"_a, "recipe"_a, "is_json"_a, "format"_a);
    // A skipped item as the CLI's "note: skipped" line (untrusted parts quoted short).
    m.def(
        "describe_problem",
        [](const std::string& file, const std::string& name, const std::string& message) {
            return dump::Problem{file, name, message}.describe();
        },
        "file"_a, "name"_a, "message"_a);
}

}  // namespace fp8kit::py
