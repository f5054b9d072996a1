// A whole MS-AMP simulation over a run's dumps: the FP8 all-reduce of every parameter, step, N and
// path, and at O2 the optimizer over the dumped steps (docs/msamp.md). The CLI and Python print
// what this returns; the rows come out in one fixed order.
#include <algorithm>
#include <map>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {
namespace {

void allreduce_rows(const AllReduceResult& r, const std::string& tensor, std::int64_t step, const std::string& path,
                    std::vector<MsampRow>& rows, MsampFlags& flags) {
    auto add = [&](const std::string& order, const std::string& metric, double v) {
        rows.push_back({"allreduce", tensor, step, r.ranks, path, order, metric, v});
    };
    for (const auto& f : allreduce_fields()) add("", std::string(f.key), io::field_number(f.get(r)));
    bool over = r.cast_saturated > 0;
    double worst_under = 0;
    for (const auto& o : r.orders) {
        const std::string on(name(o.order));
        for (const auto& f : order_fields()) add(on, std::string(f.key), io::field_number(f.get(OrderRow{r, o})));
        if (stalled_share(o) >= kStallFlag) flags.stall.insert(tensor);
        over = over || o.hop_overflows > 0 || o.nonfinite > 0;
        worst_under = std::max(worst_under, underflow_share(r, o));
    }
    if (over) flags.overflow.insert(tensor);
    if (worst_under >= kUnderflowFlag) flags.underflow.insert(tensor);
    if (r.extra_margin > 0) flags.margin[tensor] = std::max(flags.margin[tensor], r.extra_margin);
}

// The exact rank mean: float64 sum of the ranks' float32 values / N, rounded to float32.
std::vector<float> mean_of(const std::vector<std::vector<float>>& g) {
    std::vector<float> m(g[0].size());
    for (std::size_t i = 0; i < m.size(); ++i) {
        double s = 0;
        for (const auto& r : g) s += r[i];
        m[i] = static_cast<float>(s / double(g.size()));
    }
    return m;
}

std::unique_ptr<RankSource> rank_source(DumpInput& in, std::vector<std::vector<float>> g, int n,
                                        const MsampRunOptions& o) {
    auto src = in.ranks() > 1 ? explicit_ranks(std::move(g)) : split_ranks(std::move(g[0]), n, o.spread, o.seed);
    return o.wgrad == WgradDtype::f32 ? std::move(src) : rounded_ranks(std::move(src), o.wgrad);
}

// The old scale of the weight gradient's ScalingMeta at each dumped step, for the N and path whose
// all-reduce feeds the optimizer (OptimizerGrad::fp8_allreduce).
using GradScales = std::map<std::int64_t, float>;

// The gradient the simulated optimizer takes at `step` (OptimizerGrad), next to the exact mean.
std::vector<float> optimizer_grad(DumpInput& in, const std::vector<std::vector<float>>& g,
                                  const std::vector<float>& mean, const MsampRunOptions& o, float old_scale) {
    if (o.optimizer_grad == OptimizerGrad::mean) return mean;
    const int n = in.ranks() > 1 ? in.ranks() : o.ranks.front();
    const AllReduceOptions ar{o.paths.front(), o.hop, old_scale};
    auto r = fp8_allreduce(*rank_source(in, g, n, o), {o.orders.front()}, ar);
    return std::move(r.orders.front().values);
}

// Applies the dumped gradients (after the first step when starting from dumped states).
template <class Optimizer>
void apply_steps(Optimizer& a, DumpInput& in, const std::string& p, const std::vector<std::int64_t>& steps,
                 bool from_states, const MsampRunOptions& o, const GradScales& scales, int ranks,
                 std::vector<MsampRow>& rows) {
    const std::int64_t last = steps.back();
    auto add = [&](const std::string& metric, double val) {
        rows.push_back({"optimizer", p, last, ranks, "", "", metric, val});
    };
    std::size_t applied = 0;
    for (std::int64_t s : steps) {
        if (from_states && s == steps.front()) continue;
        const auto g = in.grads(p, s);
        const auto mean = mean_of(g);
        a.step(optimizer_grad(in, g, mean, o, scales.at(s)), mean);
        if (++applied == 1) add("update_rel_error_step1", report(a).update_rel_error);
    }
    const auto r = report(a);
    add("steps_applied", double(applied));
    add("m_underflow_share", r.m_nonzero ? double(r.m_underflow) / double(r.m_nonzero) : 0.0);
    add("v_underflow_share", r.v_nonzero ? double(r.v_underflow) / double(r.v_nonzero) : 0.0);
    add("m_rel_error", r.m_rel_error);
    add("v_rel_error", r.v_rel_error);
    add("update_rel_error", r.update_rel_error);
    add("weight_max_abs_diff", r.weight_max_abs_diff);
    add("m_scale", r.m_scale);
    add("v_scale", r.v_scale);
}

// O2 for one parameter. From dumped states (exp_avg and exp_avg_sq at the first step, and later
// steps): they are the states after that step, and the later gradients follow. Otherwise zero
// states, and every dumped gradient is applied in order (v recomputed).
void optimizer_rows(DumpInput& in, const std::string& p, const MsampRunOptions& o, const GradScales& scales, int ranks,
                    MsampRun& run) {
    const auto steps = in.steps(p);
    const std::int64_t first = steps.front();
    auto w = in.state(p, first, "weight");
    if (w.empty()) {
        // Say so when the weight is there but was skipped (stored outside the file, ...).
        std::string why;
        for (const auto& s : in.skipped())
            if (s.name.find(p + "/weight") != std::string::npos ||
                s.name.find(p + "/master_weight") != std::string::npos)
                why = s.describe();
        throw std::invalid_argument(fmt::format("--level O2: {} has no weight at step {} (a dataset .../weight){}", p,
                                                first, why.empty() ? "" : "; skipped " + why));
    }
    auto m = in.state(p, first, "exp_avg"), v = in.state(p, first, "exp_avg_sq");
    const bool from_states = !m.empty() && !v.empty() && steps.size() > 1;
    if (!from_states && run.notes.empty())
        run.notes.push_back(
            "optimizer: exp_avg_sq not dumped (or a single step): states start at zero and every dumped "
            "gradient is applied in order as consecutive steps");
    if (!from_states) m.clear(), v.clear();
    const std::int64_t step0 = from_states ? first + 1 : 0;
    if (o.te_fused_adam) {
        TeFusedAdam a(w, m, v, o.hyper, step0, o.te);
        apply_steps(a, in, p, steps, from_states, o, scales, ranks, run.rows);
    } else {
        MsampAdam a(w, m, v, o.hyper, step0, !o.fp32_master, o.msamp_states);
        apply_steps(a, in, p, steps, from_states, o, scales, ranks, run.rows);
    }
}

}  // namespace

void set_optimizer(MsampRunOptions& o, std::string_view optimizer, std::string_view exp_avg,
                   std::string_view exp_avg_sq, std::string_view master, std::string_view te_build) {
    if (optimizer != "msamp" && optimizer != "te-fused-adam")
        throw std::invalid_argument(fmt::format("optimizer {}: msamp or te-fused-adam", optimizer));
    o.te_fused_adam = optimizer == "te-fused-adam";
    auto dtype = [](std::string_view s, std::string_view fallback, const char* what) {
        try {
            return parse_state_dtype(s.empty() ? fallback : s);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(fmt::format("{}: {}", what, e.what()));
        }
    };
    if (o.te_fused_adam) {
        o.te = TeAdamOptions{dtype(exp_avg, "fp8", "exp_avg dtype"), dtype(exp_avg_sq, "fp8", "exp_avg_sq dtype"),
                             dtype(master, "fp32", "master weight dtype")};
        if (o.te.master != StateDtype::f32 && o.te.master != StateDtype::f16)
            throw std::invalid_argument(fmt::format("master weight dtype {}: fp32 or fp16", master));
        try {
            o.te.build = te_build.empty() ? TeBuild::fast_math : parse_te_build(te_build);
        } catch (const std::invalid_argument& e) {
            throw std::invalid_argument(fmt::format("TE build: {}", e.what()));
        }
        return;
    }
    if (!te_build.empty())
        throw std::invalid_argument(
            "TE build: set for te-fused-adam only (MS-AMP builds its kernels with nvcc's defaults)");
    if (!master.empty())
        throw std::invalid_argument(
            "master weight dtype: set for te-fused-adam only (msamp's master weight is FP16 with a scale, or FP32 "
            "with fp32_master)");
    o.msamp_states = MsampStates{dtype(exp_avg, "fp8", "exp_avg dtype"), dtype(exp_avg_sq, "fp16", "exp_avg_sq dtype")};
    for (StateDtype d : {o.msamp_states.exp_avg, o.msamp_states.exp_avg_sq})
        if (d != StateDtype::fp8 && d != StateDtype::f16)
            throw std::invalid_argument(
                fmt::format("msamp state dtype {}: fp8 or fp16 (LBAdamW's exp_avg_dtype and "
                            "exp_avg_sq_dtype, msamp/optim/adamw_base.py)",
                            name(d)));
}

std::string_view name(OptimizerGrad g) { return g == OptimizerGrad::mean ? "mean" : "fp8-allreduce"; }
OptimizerGrad parse_optimizer_grad(std::string_view s) {
    if (s == "mean") return OptimizerGrad::mean;
    if (s == "fp8-allreduce") return OptimizerGrad::fp8_allreduce;
    throw std::invalid_argument(fmt::format("'{}': mean or fp8-allreduce", s));
}

MsampRun run_msamp(DumpInput& in, const MsampRunOptions& o) {
    if (in.ranks() == 1 && o.ranks.empty())
        throw std::invalid_argument("a single dump needs the ranks N to split it into");
    if (o.paths.empty() || o.orders.empty()) throw std::invalid_argument("no all-reduce path or reduction order");
    const std::vector<int> ranks = in.ranks() > 1 ? std::vector<int>{in.ranks()} : o.ranks;
    MsampRun run;
    run.params = in.params();
    run.optimizer_ranks = in.ranks();
    for (const auto& p : run.params) {
        // MS-AMP keeps one ScalingMeta per weight gradient (FP8Linear.scaling_metas['wgrad'],
        // msamp/nn/linear.py; scale 1 when created, window 1). The DDP reducer stores the new scale,
        // 1/sqrt(N) included, in it (_reduce_bucket: meta.scale.copy_(scale)); the non-DDP cast
        // (cast.py cast_to_fp8(sync=True) -> meta.reset_scaling_factor()) stores its own. The next
        // step's compute_scaling_factor takes it as the old scale (used where amax is 0, NaN or
        // +-Inf). So each (N, path) carries it over the dumped steps, in step order.
        std::map<std::pair<int, Path>, float> carried;
        GradScales opt_scales;
        for (std::int64_t s : in.steps(p)) {
            const auto g = in.grads(p, s);
            for (int n : ranks) {
                const auto src = rank_source(in, g, n, o);
                for (Path path : o.paths) {
                    float& old = carried.try_emplace({n, path}, 1.0f).first->second;
                    if (n == ranks.front() && path == o.paths.front()) opt_scales[s] = old;
                    const AllReduceOptions ar{path, o.hop, old};
                    const std::string pn(name(path));
                    const auto r = fp8_allreduce(*src, o.orders, ar);
                    allreduce_rows(r, p, s, pn, run.rows, run.flags[{n, pn}]);
                    old = r.scale;
                }
            }
        }
        if (o.o2) optimizer_rows(in, p, o, opt_scales, in.ranks(), run);
    }
    if (o.o2 && o.optimizer_grad == OptimizerGrad::fp8_allreduce)
        run.notes.push_back(
            fmt::format("optimizer: the simulated side takes the FP8 all-reduce ({} path, {} order, N = {}); "
                        "the FP32 reference takes the exact rank mean",
                        name(o.paths.front()), name(o.orders.front()), ranks.front()));
    return run;
}

}  // namespace fp8kit::simulate
