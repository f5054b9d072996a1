// MS-AMP simulation (fp8kit/simulate.hpp): the scale rule, the FP8 gradient all-reduce and the
// O2 optimizer states.
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::py {
namespace {

namespace sim = fp8kit::simulate;
using F32Array = pyb::array_t<float, pyb::array::c_style | pyb::array::forcecast>;

std::vector<float> to_vector(const F32Array& a) { return std::vector<float>(a.data(), a.data() + a.size()); }

sim::HopArith parse_hop(const std::string& s) { return parse_named(sim::parse_hop, s, "hop"); }
sim::Path parse_path(const std::string& s) { return parse_named(sim::parse_path, s, "path"); }

// The all-reduce's dict: lib's field tables (the metric names of `fp8kit simulate msamp`'s rows),
// `ranks`, and per order its summed codes and values beside its fields.
pyb::dict result_dict(const sim::AllReduceResult& r) {
    pyb::dict d;
    d["ranks"] = r.ranks;
    put_fields(d, sim::allreduce_fields(), r);
    pyb::dict orders;
    for (const auto& o : r.orders) {
        pyb::dict od;
        od["codes"] = to_array(o.codes);
        od["values"] = to_array(o.values);
        put_fields(od, sim::order_fields(), sim::OrderRow{r, o});
        orders[pyb::str(std::string(sim::name(o.order)))] = od;
    }
    d["orders"] = orders;
    return d;
}

sim::AllReduceResult run(const sim::RankSource& src, const std::vector<std::string>& orders, const std::string& path,
                         const std::string& hop, float old_scale) {
    std::vector<sim::Order> os;
    for (const auto& o : orders) os.push_back(sim::parse_order(o));
    sim::AllReduceOptions opt{parse_path(path), parse_hop(hop), old_scale};
    pyb::gil_scoped_release nogil;
    return sim::fp8_allreduce(src, os, opt);
}

pyb::dict adam_report_dict(const sim::AdamReport& r) {
    pyb::dict d;
    d["steps"] = r.steps;
    d["m_underflow"] = r.m_underflow;
    d["v_underflow"] = r.v_underflow;
    d["m_nonzero"] = r.m_nonzero;
    d["v_nonzero"] = r.v_nonzero;
    d["m_rel_error"] = r.m_rel_error;
    d["v_rel_error"] = r.v_rel_error;
    d["update_rel_error"] = r.update_rel_error;
    d["weight_max_abs_diff"] = r.weight_max_abs_diff;
    d["m_scale"] = r.m_scale;
    d["v_scale"] = r.v_scale;
    return d;
}

}  // namespace

// A whole simulation over dumps (simulate::run_msamp), as the CLI runs it: the rows, the flags
// and the notes. Strings are parsed by lib's parsers; their errors become ValueError.
// An MsampAdam state as numpy: E4M3 codes as uint8, FP16 bits as uint16.
pyb::array state_codes(const std::vector<std::uint16_t>& codes, sim::StateDtype d) {
    if (d != sim::StateDtype::fp8) return to_array(codes);
    return to_array(std::vector<std::uint8_t>(codes.begin(), codes.end()));
}

pyb::dict run_dumps(const std::vector<std::string>& files, bool o2, const std::vector<int>& ranks,
                    const std::vector<std::string>& paths, const std::vector<std::string>& orders,
                    const std::string& hop, double spread, std::uint64_t seed, const sim::AdamHyper& h,
                    const std::string& optimizer, const std::vector<std::string>& dtypes, bool fp32_master,
                    const std::string& optimizer_grad, const std::vector<std::string>& include) {
    sim::MsampRunOptions o;
    o.o2 = o2;
    o.ranks = ranks;
    o.paths.clear();
    for (const auto& p : paths) o.paths.push_back(parse_path(p));
    o.orders.clear();
    for (const auto& s : orders) o.orders.push_back(sim::parse_order(s));
    o.hop = parse_hop(hop);
    o.spread = spread;
    o.seed = seed;
    o.hyper = h;
    sim::set_optimizer(o, optimizer, dtypes.at(0), dtypes.at(1), dtypes.at(2), dtypes.at(3));
    o.fp32_master = fp32_master;
    o.optimizer_grad = sim::parse_optimizer_grad(optimizer_grad);
    sim::MsampRun r;
    std::vector<dump::Problem> skipped;
    {
        pyb::gil_scoped_release nogil;
        sim::DumpInput in(files, include);
        skipped = in.skipped();
        r = sim::run_msamp(in, o);
    }
    pyb::list rows;
    for (const auto& x : r.rows) {
        pyb::dict d;
        d["section"] = x.section, d["tensor"] = x.tensor, d["step"] = x.step, d["ranks"] = x.ranks;
        d["path"] = x.path, d["order"] = x.order, d["metric"] = x.metric, d["value"] = x.value;
        rows.append(d);
    }
    pyb::list flags;
    for (const auto& [k, f] : r.flags) {
        pyb::dict d;
        d["ranks"] = k.first, d["path"] = k.second, d["overflow"] = f.overflow, d["underflow"] = f.underflow;
        d["margin"] = f.margin;
        flags.append(d);
    }
    pyb::dict out;
    out["params"] = r.params, out["rows"] = rows, out["flags"] = flags, out["notes"] = r.notes;
    out["skipped"] = skipped_list(skipped);
    return out;
}

void bind_simulate(pyb::module_& m) {
    m.def("msamp_simulate_dumps",
          [](const std::vector<std::string>& files, bool o2, const std::vector<int>& ranks,
             const std::vector<std::string>& paths, const std::vector<std::string>& orders, const std::string& hop,
             double spread, std::uint64_t seed, double lr, double beta1, double beta2, double eps, double weight_decay,
             const std::string& optimizer, const std::vector<std::string>& dtypes, bool fp32_master,
             const std::string& optimizer_grad, const std::vector<std::string>& include) {
              return run_dumps(files, o2, ranks, paths, orders, hop, spread, seed,
                               sim::AdamHyper{lr, beta1, beta2, eps, weight_decay, true}, optimizer, dtypes,
                               fp32_master, optimizer_grad, include);
          });
    m.def("msamp_compute_scaling_factor", [](F32Array amax, F32Array scale, float fp_max, int margin) {
        if (scale.size() != amax.size() && scale.size() != 1)
            throw std::invalid_argument(fmt::format("scale: {} values for {} amaxes", scale.size(), amax.size()));
        std::vector<float> out(static_cast<std::size_t>(amax.size()));
        for (std::size_t i = 0; i < out.size(); ++i)
            out[i] =
                sim::compute_scaling_factor(amax.data()[i], scale.data()[scale.size() == 1 ? 0 : i], fp_max, margin);
        return to_array(out);
    });
    m.def("msamp_allreduce", [](F32Array ranks, const std::vector<std::string>& orders, const std::string& path,
                                const std::string& hop, float old_scale) {
        if (ranks.ndim() != 2) throw std::invalid_argument("ranks: a 2-D array (ranks x elements)");
        std::vector<std::vector<float>> r(static_cast<std::size_t>(ranks.shape(0)));
        const auto cols = static_cast<std::size_t>(ranks.shape(1));
        for (std::size_t k = 0; k < r.size(); ++k) r[k].assign(ranks.data() + k * cols, ranks.data() + (k + 1) * cols);
        return result_dict(run(*sim::explicit_ranks(std::move(r)), orders, path, hop, old_scale));
    });
    m.def("msamp_allreduce_split",
          [](F32Array g, int n, double spread, std::uint64_t seed, const std::vector<std::string>& orders,
             const std::string& path, const std::string& hop, float old_scale) {
              return result_dict(run(*sim::split_ranks(to_vector(g), n, spread, seed), orders, path, hop, old_scale));
          });
    m.def("msamp_split_rank", [](F32Array g, int n, double spread, std::uint64_t seed, int rank) {
        auto s = sim::split_ranks(to_vector(g), n, spread, seed);
        if (rank < 0 || rank >= n) throw std::invalid_argument(fmt::format("rank {}: must be 0..{}", rank, n - 1));
        std::vector<float> out(s->size());
        s->fill(rank, 0, out.size(), out.data());
        return to_array(out);
    });
    pyb::class_<sim::MsampAdam>(m, "MsampAdam")
        .def(pyb::init([](F32Array w, F32Array m, F32Array v, double lr, double beta1, double beta2, double eps,
                          double weight_decay, bool bias_correction, std::int64_t step, bool fp16_master,
                          const std::string& m_dtype, const std::string& v_dtype) {
            sim::AdamHyper h{lr, beta1, beta2, eps, weight_decay, bias_correction};
            const sim::MsampStates states{sim::parse_state_dtype(m_dtype), sim::parse_state_dtype(v_dtype)};
            return sim::MsampAdam(to_vector(w), to_vector(m), to_vector(v), h, step, fp16_master, states);
        }))
        .def(
            "step",
            [](sim::MsampAdam& a, F32Array g, std::optional<F32Array> ref) {
                ref ? a.step(to_vector(g), to_vector(*ref)) : a.step(to_vector(g));
            },
            pyb::arg("grad"), pyb::arg("ref_grad") = pyb::none())
        .def_property_readonly("steps", &sim::MsampAdam::steps)
        .def_property_readonly("m_codes",
                               [](const sim::MsampAdam& a) { return state_codes(a.m_codes(), a.states().exp_avg); })
        .def_property_readonly("v_bits",
                               [](const sim::MsampAdam& a) { return state_codes(a.v_bits(), a.states().exp_avg_sq); })
        .def_property_readonly("master_bits", [](const sim::MsampAdam& a) { return to_array(a.master_bits()); })
        .def_property_readonly("m_scale", &sim::MsampAdam::m_scale)
        .def_property_readonly("v_scale", &sim::MsampAdam::v_scale)
        .def_property_readonly("master_scale", &sim::MsampAdam::master_scale)
        .def_property_readonly("weight", [](const sim::MsampAdam& a) { return to_array(a.weight()); })
        .def_property_readonly("ref_weight", [](const sim::MsampAdam& a) { return to_array(a.ref_weight()); })
        .def_property_readonly("ref_m", [](const sim::MsampAdam& a) { return to_array(a.ref_m()); })
        .def_property_readonly("ref_v", [](const sim::MsampAdam& a) { return to_array(a.ref_v()); })
        .def("report", [](const sim::MsampAdam& a) { return adam_report_dict(sim::report(a)); });

    // TransformerEngine FusedAdam with FP8/FP16/BF16 states (docs/msamp.md).
    auto state_dict = [](const sim::TeState& s) {
        pyb::dict d;
        d["dtype"] = std::string(sim::name(s.dtype));
        d["bits"] = to_array(s.bits);
        d["scale"] = s.scale;
        d["fp8_scale"] = s.fp8_scale;
        d["fp8_scale_inv"] = s.fp8_scale_inv;
        d["value"] = to_array(s.dequantized());
        return d;
    };
    pyb::class_<sim::TeFusedAdam>(m, "TeFusedAdam")
        .def(pyb::init([](F32Array w, F32Array m, F32Array v, double lr, double beta1, double beta2, double eps,
                          double weight_decay, bool bias_correction, std::int64_t step, const std::string& m_dtype,
                          const std::string& v_dtype, const std::string& master_dtype, const std::string& build) {
            sim::AdamHyper h{lr, beta1, beta2, eps, weight_decay, bias_correction};
            sim::TeAdamOptions o{sim::parse_state_dtype(m_dtype), sim::parse_state_dtype(v_dtype),
                                 sim::parse_state_dtype(master_dtype), sim::parse_te_build(build)};
            return sim::TeFusedAdam(to_vector(w), to_vector(m), to_vector(v), h, step, o);
        }))
        .def(
            "step",
            [](sim::TeFusedAdam& a, F32Array g, std::optional<F32Array> ref) {
                ref ? a.step(to_vector(g), to_vector(*ref)) : a.step(to_vector(g));
            },
            pyb::arg("grad"), pyb::arg("ref_grad") = pyb::none())
        .def_property_readonly("steps", &sim::TeFusedAdam::steps)
        .def_property_readonly("exp_avg", [state_dict](const sim::TeFusedAdam& a) { return state_dict(a.m_state()); })
        .def_property_readonly("exp_avg_sq",
                               [state_dict](const sim::TeFusedAdam& a) { return state_dict(a.v_state()); })
        .def_property_readonly("master",
                               [state_dict](const sim::TeFusedAdam& a) { return state_dict(a.master_state()); })
        .def_property_readonly("weight", [](const sim::TeFusedAdam& a) { return to_array(a.weight()); })
        .def_property_readonly("ref_weight", [](const sim::TeFusedAdam& a) { return to_array(a.ref_weight()); })
        .def_property_readonly("ref_m", [](const sim::TeFusedAdam& a) { return to_array(a.ref_m()); })
        .def_property_readonly("ref_v", [](const sim::TeFusedAdam& a) { return to_array(a.ref_v()); })
        .def("report", [](const sim::TeFusedAdam& a) { return adam_report_dict(sim::report(a)); });
}

}  // namespace fp8kit::py
