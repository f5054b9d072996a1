// Amax traces and their replay through a scaling recipe (trace.hpp, replay.hpp).
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <stdexcept>

#include "bindings.hpp"
#include "comm.hpp"
#include "fp8kit/analysis/replay.hpp"
#include "fp8kit/analysis/sweep.hpp"
#include "fp8kit/analysis/sweep_input.hpp"
#include "fp8kit/cluster/sweep.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/io/trace.hpp"

namespace fp8kit::py {
namespace {

pyb::list read_trace(const std::string& path) {
    trace::Trace t;
    {
        pyb::gil_scoped_release nogil;
        t = trace::read_trace(path);
    }
    pyb::list out;
    for (const auto& s : t.series) {
        pyb::dict d;
        d["tensor"] = s.tensor;
        d["role"] = std::string(name(s.role));
        d["steps"] = to_array(s.steps);
        d["amax"] = to_array(s.amax);
        out.append(d);
    }
    return out;
}

// Every statistic of TransformerEngine's statistics logs (te::read_run_stats).
pyb::dict te_stats(const std::string& path) {
    te::RunStats r;
    {
        pyb::gil_scoped_release nogil;
        try {
            r = te::read_run_stats(path);
        } catch (const trace::TraceError&) {
            throw;
        } catch (const std::runtime_error& e) {
            throw trace::TraceError(e.what());
        }
    }
    pyb::list series;
    for (const auto& s : r.series) {
        pyb::dict d;
        put_fields(d, te::series_fields(), s);  // the keys and values of stats_json
        d["steps"] = to_array(s.steps);
        d["values"] = to_array(s.values);
        std::vector<std::uint8_t> ok(s.steps.size());
        for (std::size_t k = 0; k < ok.size(); ++k) ok[k] = s.readable(k);
        d["readable"] =
            pyb::array_t<bool>(static_cast<pyb::ssize_t>(ok.size()), reinterpret_cast<const bool*>(ok.data()));
        series.append(d);
    }
    pyb::dict out;
    out["files"] = r.files;
    out["series"] = series;
    out["skipped"] = skipped_list(r.skipped);
    return out;
}

pyb::dict replay_series(const std::string& recipe, bool is_json, const std::string& tensor,
                        pyb::array_t<std::int64_t, pyb::array::c_style | pyb::array::forcecast> steps,
                        pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast> amax, const OptStr& format) {
    const RecipeSpec r = recipe_of(recipe, is_json);
    if (steps.size() != amax.size())
        throw std::invalid_argument(fmt::format("amax: {} values for {} steps", amax.size(), steps.size()));
    trace::Series s;
    s.tensor = tensor;
    s.role = recipe_slot(guess_role(tensor));
    s.steps.assign(steps.data(), steps.data() + steps.size());
    s.amax.assign(amax.data(), amax.data() + amax.size());
    for (std::size_t i = 1; i < s.steps.size(); ++i)
        if (s.steps[i] <= s.steps[i - 1])
            throw std::invalid_argument(
                fmt::format("steps: not strictly increasing at index {} ({} after {})", i, s.steps[i], s.steps[i - 1]));
    std::optional<Format> forced;
    if (format) forced = require_format(*format, "format");
    replay::SeriesResult res;
    {
        pyb::gil_scoped_release nogil;
        res = replay::replay_series(r, s, forced);
    }
    pyb::dict d;
    d["tensor"] = res.tensor;
    d["role"] = std::string(name(res.role));
    d["format"] = std::string(name(res.format));
    d["steps"] = to_array(res.steps);
    d["amax"] = to_array(res.amax);
    d["scale"] = to_array(res.scale);
    d["headroom"] = to_array(res.headroom);
    d["overflow"] = to_array(res.overflow).attr("astype")("bool");
    d["overflow_steps"] = res.overflow_steps;
    d["worst_headroom"] = res.worst_headroom;
    d["worst_step"] = res.worst_step;
    return d;
}

// One row of a candidate's outcome (per class, or per tensor with `series_outcomes` = that tensor's
// outcomes under every candidate, computed once by the caller: recomputing them for each candidate's
// min_safe_margin made the tensor table quadratic in the candidates): the candidate's fields and the
// outcome's, from lib's field tables (the keys of `fp8kit sweep --csv` and `--json`).
pyb::dict outcome_row(const sweep::Sweep& sw, std::size_t c, Role cls, const sweep::Outcome& o,
                      const std::vector<sweep::Outcome>* series_outcomes = nullptr) {
    pyb::dict d;
    put_fields(d, sweep::candidate_fields(), sweep::CandidateRow{sw.candidates()[c], cls});
    put_fields(d, sweep::outcome_fields(), sw.row(c, cls, o, series_outcomes));
    return d;
}

// `fp8kit sweep` over amax traces and tensor dumps (sweep_input.hpp loads them as the CLI does).
// comm (a Python communicator, or None): the passes and the series groups are split over its
// ranks by cluster::load_sweep_inputs and cluster::run_sweep, as `mpirun fp8kit sweep` does;
// every rank then holds one process's Sweep, and rank 0 alone makes the rows (None elsewhere).
pyb::object sweep_inputs(const std::vector<std::string>& files, const std::vector<std::string>& include,
                         const std::vector<std::string>& formats, bool blocks, const pyb::object& comm) {
    sweep::Inputs in;
    in.files = files;
    in.tensors = include;
    in.blocks = blocks;
    in.formats.clear();
    for (const auto& f : formats) {
        if (f == "auto" || f == "hybrid") {
            in.formats.push_back(std::nullopt);
            continue;
        }
        const Format fm = require_format(f, "formats");
        if (fm == Format::e8m0) throw std::invalid_argument("formats: e8m0 holds scales, not tensor values");
        in.formats.push_back(fm);
    }
    if (in.formats.empty()) in.formats.push_back(std::nullopt);
    std::optional<PyComm> pc;
    if (!comm.is_none()) pc.emplace(comm);
    cluster::Comm& c = pc ? static_cast<cluster::Comm&>(*pc) : cluster::serial();
    sweep::Loaded L;
    {
        pyb::gil_scoped_release nogil;
        L = cluster::load_sweep_inputs(c, std::move(in));
        // fp8kit.sweep raises for an input it cannot read (the CLI reports it and goes on). Every
        // rank holds the same errors, so every rank raises here, before the next exchange.
        if (!L.errors.empty()) {
            const auto& e = L.errors.front();
            throw dump::DumpError(e.file, e.name, e.message);
        }
        cluster::run_sweep(c, L);
    }
    if (!c.root()) return pyb::none();
    const sweep::Sweep& sw = *L.sweep;
    pyb::list rows, tensor_rows;
    const Role classes[] = {Role::activation, Role::weight, Role::gradient};
    for (std::size_t c = 0; c < sw.candidates().size(); ++c)
        for (Role cls : classes)
            if (sw.has_class(cls)) rows.append(outcome_row(sw, c, cls, sw.per_class(c, cls)));
    // Every row goes back to Python, so each series' outcomes are computed once and kept here.
    std::vector<std::vector<sweep::Outcome>> per_series;
    for (std::size_t s = 0; s < sw.series().size(); ++s) per_series.push_back(sw.tensor_outcomes(s));
    for (std::size_t c = 0; c < sw.candidates().size(); ++c)
        for (std::size_t s = 0; s < sw.series().size(); ++s) {
            const auto& ser = sw.series()[s];
            pyb::dict d = outcome_row(sw, c, ser.role, per_series[s][c], &per_series[s]);
            d["tensor"] = ser.tensor;
            tensor_rows.append(d);
        }
    pyb::dict ranked, rec;
    for (Role cls : classes) {
        if (!sw.has_class(cls)) continue;
        pyb::list r;
        for (std::size_t c : sw.ranked(cls)) r.append(sw.candidates()[c].label);
        ranked[pyb::str(std::string(name(cls)))] = r;
        rec[pyb::str(std::string(name(cls)))] = sw.recommendation(cls);
    }
    pyb::dict out;
    out["rows"] = rows;
    out["tensor_rows"] = tensor_rows;
    out["ranked"] = ranked;
    out["recommendation"] = rec;
    out["notes"] = L.notes;
    out["skipped"] = skipped_list(L.skipped);
    out["trace_files"] = L.trace_files;
    out["dump_files"] = L.dump_files;
    return out;
}

}  // namespace

void bind_replay(pyb::module_& m) {
    using namespace pyb::literals;
    pyb::register_exception<trace::TraceError>(m, "TraceError", PyExc_ValueError);
    m.def("read_trace", &read_trace, "path"_a);
    m.def("te_stats", &te_stats, "path"_a);
    m.def("replay_series", &replay_series, "recipe"_a, "is_json"_a, "tensor"_a, "steps"_a, "amax"_a, "format"_a);
    m.def(
        "overflows",
        [](float amax, float scale, const std::string& f) {
            return replay::overflows(amax, scale, require_format(f, "format"));
        },
        "amax"_a, "scale"_a, "format"_a);
    m.def("sweep", &sweep_inputs, "files"_a, "include"_a, "formats"_a, "blocks"_a, "comm"_a = pyb::none());
    m.def(
        "classify_tensor", [](const std::string& n) { return std::string(name(recipe_slot(guess_role(n)))); },
        "name"_a);
}

}  // namespace fp8kit::py
