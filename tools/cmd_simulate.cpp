// fp8kit simulate msamp: MS-AMP's FP8 gradient all-reduce (O1) and FP8/FP16 optimizer states (O2)
// simulated on a run's dumps (docs/msamp.md).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

#include <nlohmann/json.hpp>

#include "fp8kit/io/json_number.hpp"
#include "command.hpp"
#include "read_flags.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::cli {
namespace {

namespace sim = fp8kit::simulate;

struct SimOpts {
    std::vector<std::string> dumps, orders{"rank", "ring", "tree"}, include;
    std::string level, path = "both", hop = "half";
    std::string optimizer = "msamp", exp_avg_dtype = "fp8", exp_avg_sq_dtype = "fp8", master_dtype = "fp32";
    std::vector<int> ranks;
    double spread = 1.0, lr = 3e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
    std::uint64_t seed = 0;
    bool fp32_master = false, csv = false, json = false;
    std::string optimizer_grad = "mean";
    std::string wgrad_dtype = "fp32";
};

using Row = sim::MsampRow;
using Flags = sim::MsampFlags;

nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp

double find(const std::vector<Row>& rows, const std::string& sec, const std::string& t, int n, const std::string& path,
            const std::string& order, const std::string& metric, bool worst_max = true) {
    double best = worst_max ? -INFINITY : INFINITY;
    for (const auto& r : rows)
        if (r.section == sec && r.tensor == t && r.ranks == n && r.path == path && r.order == order &&
            r.metric == metric)
            best = worst_max ? std::max(best, r.value) : std::min(best, r.value);
    return best;
}

void print_summary(const std::vector<Row>& rows, const std::vector<std::string>& params,
                   const std::map<std::pair<int, std::string>, Flags>& flags, const SimOpts& o,
                   const std::vector<std::string>& notes, int opt_ranks) {
    std::size_t w = 6;
    for (const auto& p : params) w = std::max(w, p.size());
    const std::string o0 = o.orders.front();
    for (const auto& [key, f] : flags) {
        const auto& [n, path] = key;
        std::printf("FP8 all-reduce, %d ranks, %s path (worst step; SQNR and underflow for order %s):\n", n,
                    path.c_str(), o0.c_str());
        std::printf("  %-*s  %9s  %9s  %10s  %9s  %12s  %6s\n", int(w), "tensor", "hop ovf", "underflow", "SQNR dB",
                    "rel err", "order spread", "margin");
        for (const auto& p : params) {
            std::printf("  %-*s  %9.0f  %8.3f%%  %10.2f  %9.3g  %12.3g  %6.0f\n", int(w), p.c_str(),
                        find(rows, "allreduce", p, n, path, o0, "hop_overflows"),
                        100 * find(rows, "allreduce", p, n, path, o0, "underflow_share"),
                        find(rows, "allreduce", p, n, path, o0, "sqnr_db", false),
                        find(rows, "allreduce", p, n, path, o0, "rel_error"),
                        find(rows, "allreduce", p, n, path, "", "order_spread"),
                        find(rows, "allreduce", p, n, path, "", "extra_margin"));
        }
        auto list = [](const std::set<std::string>& s) {
            std::string out;
            for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
            return s.empty() ? std::string("none") : out;
        };
        std::printf("  overflow: %s\n  underflow (>= %.0f%% of elements sum to 0): %s\n", list(f.overflow).c_str(),
                    100 * sim::kUnderflowFlag, list(f.underflow).c_str());
        std::map<int, std::set<std::string>> by_margin;
        for (const auto& [t, k] : f.margin) by_margin[k].insert(t);
        for (const auto& [k, ts] : by_margin)
            std::printf("  margin %d (scale / 2^%d) keeps every partial sum <= 448 for: %s\n", k, k, list(ts).c_str());
        if (!f.stall.empty())
            std::printf(
                "  stalled partial sums (>= %.0f%% of hops add a nonzero value and change nothing): %s\n"
                "    an E4M3 partial keeps 3 mantissa bits, so once it is more than 16 times an addend the\n"
                "    addend is lost; the rank and ring orders add N values one by one into one partial. A\n"
                "    margin does not help (it scales partial and addend alike); the tree order (pairwise\n"
                "    partials of equal size, with the margin it needs against overflow) or a BF16/FP32\n"
                "    all-reduce does.\n",
                100 * sim::kStallFlag, list(f.stall).c_str());
        std::printf("\n");
    }
    if (o.level == "O2") {
        if (o.optimizer == "te-fused-adam")
            std::printf(
                "O2 optimizer states, TransformerEngine FusedAdam (%s exp_avg, %s exp_avg_sq, %s master weights) vs "
                "FP32:\n",
                o.exp_avg_dtype.c_str(), o.exp_avg_sq_dtype.c_str(), o.master_dtype.c_str());
        else
            std::printf("O2 optimizer states (E4M3 exp_avg, FP16 exp_avg_sq, %s master weights) vs FP32:\n",
                        o.fp32_master ? "FP32" : "FP16");
        std::printf("  %-*s  %6s  %9s  %9s  %9s  %9s  %12s  %12s\n", int(w), "tensor", "steps", "m undfl", "v undfl",
                    "m rel err", "v rel err", "upd err 1st", "upd err last");
        for (const auto& p : params)
            std::printf("  %-*s  %6.0f  %8.3f%%  %8.3f%%  %9.3g  %9.3g  %12.3g  %12.3g\n", int(w), p.c_str(),
                        find(rows, "optimizer", p, opt_ranks, "", "", "steps_applied"),
                        100 * find(rows, "optimizer", p, opt_ranks, "", "", "m_underflow_share"),
                        100 * find(rows, "optimizer", p, opt_ranks, "", "", "v_underflow_share"),
                        find(rows, "optimizer", p, opt_ranks, "", "", "m_rel_error"),
                        find(rows, "optimizer", p, opt_ranks, "", "", "v_rel_error"),
                        find(rows, "optimizer", p, opt_ranks, "", "", "update_rel_error_step1"),
                        find(rows, "optimizer", p, opt_ranks, "", "", "update_rel_error"));
    }
    for (const auto& n : notes) std::printf("note: %s\n", n.c_str());
}

void run(const SimOpts& o) {
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    if (o.level != "O1" && o.level != "O2") throw UsageError(fmt::format("--level {}: O1 or O2", o.level));
    if (o.optimizer != "msamp" && o.optimizer != "te-fused-adam")
        throw UsageError(fmt::format("--optimizer {}: msamp or te-fused-adam", o.optimizer));
    for (const auto* d : {&o.exp_avg_dtype, &o.exp_avg_sq_dtype, &o.master_dtype}) {
        try {
            sim::parse_state_dtype(*d);
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--exp-avg-dtype/--exp-avg-sq-dtype/--master-weight-dtype: {}", e.what()));
        }
    }
    if (o.master_dtype != "fp32" && o.master_dtype != "fp16")
        throw UsageError(fmt::format("--master-weight-dtype {}: fp32 or fp16", o.master_dtype));
    sim::MsampRunOptions ro;
    try {
        ro.paths = o.path == "both" ? std::vector<sim::Path>{sim::Path::ddp, sim::Path::non_ddp}
                                    : std::vector<sim::Path>{sim::parse_path(o.path)};
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--path: {}, or both", e.what()));
    }
    try {
        ro.hop = sim::parse_hop(o.hop);
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--hop: {}", e.what()));
    }
    ro.o2 = o.level == "O2";
    ro.orders.clear();
    for (const auto& s : o.orders) {
        try {
            ro.orders.push_back(sim::parse_order(s));
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--order: {}", e.what()));
        }
    }
    try {
        ro.optimizer_grad = sim::parse_optimizer_grad(o.optimizer_grad);
        try {
            ro.wgrad = sim::parse_wgrad_dtype(o.wgrad_dtype);
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--wgrad-dtype: {}", e.what()));
        }
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--optimizer-grad {}", e.what()));
    }
    std::vector<dump::Problem> problems;
    const auto files = dump::expand_inputs(o.dumps, problems);
    if (!problems.empty()) throw UsageError(problems.front().describe());
    if (files.size() > 1 && !o.ranks.empty())
        throw UsageError(fmt::format("--ranks: {} dumps are {} ranks already; --ranks splits a single dump",
                                     files.size(), files.size()));
    ro.ranks = o.ranks.empty() ? std::vector<int>{8, 64, 1024} : o.ranks;
    for (int n : ro.ranks)
        if (n < 2 || n > 65536) throw UsageError(fmt::format("--ranks {}: must be 2..65536", n));
    if (!(o.spread >= 0 && o.spread <= 1)) throw UsageError(fmt::format("--spread {}: must be in [0, 1]", o.spread));
    ro.spread = o.spread;
    ro.seed = o.seed;
    ro.hyper = sim::AdamHyper{o.lr, o.beta1, o.beta2, o.eps, o.weight_decay, true};
    ro.te_fused_adam = o.optimizer == "te-fused-adam";
    ro.te = sim::TeAdamOptions{sim::parse_state_dtype(o.exp_avg_dtype), sim::parse_state_dtype(o.exp_avg_sq_dtype),
                               sim::parse_state_dtype(o.master_dtype)};
    ro.fp32_master = o.fp32_master;
    std::unique_ptr<sim::DumpInput> in;
    sim::MsampRun res;
    try {
        in = std::make_unique<sim::DumpInput>(files, o.include, cli_read_options());
        // Datasets stored outside the dump are skipped, never read: on stderr for every output form
        // (CSV and JSON stay parseable), and in the JSON and the terminal notes too.
        for (const auto& s : in->skipped()) std::fprintf(stderr, "fp8kit: skipped %s\n", io::printable(s).c_str());
        res = sim::run_msamp(*in, ro);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    const std::vector<std::string> skipped = in->skipped();
    const auto& params = res.params;
    const auto& rows = res.rows;
    const auto& flags = res.flags;
    const auto& notes = res.notes;
    if (o.csv) {
        std::printf("section,tensor,step,ranks,path,order,metric,value\n");
        for (const auto& r : rows)
            std::printf("%s,\"%s\",%lld,%d,%s,%s,%s,%s\n", r.section.c_str(), r.tensor.c_str(),
                        static_cast<long long>(r.step), r.ranks, r.path.c_str(), r.order.c_str(), r.metric.c_str(),
                        exact(r.value).c_str());
        return;
    }
    if (o.json) {
        nlohmann::json j;
        j["dumps"] = files;
        j["level"] = o.level;
        if (o.level == "O2") {
            j["optimizer"] = o.optimizer;
            if (o.optimizer == "te-fused-adam")
                j["state_dtypes"] = {
                    {"exp_avg", o.exp_avg_dtype}, {"exp_avg_sq", o.exp_avg_sq_dtype}, {"master", o.master_dtype}};
        }
        if (o.level == "O2") j["optimizer_grad"] = o.optimizer_grad;
        j["wgrad_dtype"] = o.wgrad_dtype;
        j["orders"] = o.orders;
        j["hop"] = o.hop;
        j["spread"] = o.spread;
        j["seed"] = o.seed;
        j["rows"] = nlohmann::json::array();
        for (const auto& r : rows)
            j["rows"].push_back({{"section", r.section},
                                 {"tensor", r.tensor},
                                 {"step", r.step},
                                 {"ranks", r.ranks},
                                 {"path", r.path},
                                 {"order", r.order},
                                 {"metric", r.metric},
                                 {"value", num(r.value)}});
        auto& fl = j["flags"] = nlohmann::json::array();
        for (const auto& [k, f] : flags)
            fl.push_back({{"ranks", k.first},
                          {"path", k.second},
                          {"overflow", f.overflow},
                          {"underflow", f.underflow},
                          {"margin", f.margin},
                          {"stall", f.stall}});
        j["notes"] = notes;
        j["skipped"] = skipped;
        std::printf("%s\n", j.dump(1).c_str());
        return;
    }
    std::printf("MS-AMP %s simulation: %zu dump(s), %zu tensors, %s\n\n", o.level.c_str(), files.size(), params.size(),
                files.size() > 1
                    ? "one dump per rank"
                    : fmt::format("one gradient split into N ranks (spread {}, seed {})", o.spread, o.seed).c_str());
    print_summary(rows, params, flags, o, notes, res.optimizer_ranks);
}

Register reg([](CLI::App& root) {
    auto o = std::make_shared<SimOpts>();
    auto* top = root.add_subcommand("simulate", "Simulate a training framework's low-precision paths on a run's dumps");
    top->require_subcommand(1);
    auto* cmd = top->add_subcommand(
        "msamp",
        "MS-AMP: the FP8 weight-gradient all-reduce over N ranks (O1) and the E4M3/FP16 Adam states and FP16\n"
        "master weights (O2), bit-exact to MS-AMP's formulas, against FP32 (docs/msamp.md).");
    cmd->add_option("DUMPS", o->dumps,
                    "HDF5/safetensors dumps (.../wgrad, exp_avg, exp_avg_sq, weight); several = one per rank")
        ->required();
    cmd->add_option("--level", o->level, "O1 (all-reduce) or O2 (all-reduce and optimizer states)")->required();
    cmd->add_option("--ranks", o->ranks, "Split one dump's gradient into N ranks (comma list; default 8,64,1024)")
        ->delimiter(',');
    cmd->add_option("--order", o->orders, "Reduction orders: rank, ring, tree (comma list; default all)")
        ->delimiter(',');
    cmd->add_option("--path", o->path, "ddp (1/sqrt(N) pre-scale), non-ddp, or both")->capture_default_str();
    cmd->add_option("--hop", o->hop, "FP8 sum per hop: half (sm_80+ NCCL) or float32")->capture_default_str();
    cmd->add_option("--spread", o->spread, "Perturbation of the split ranks, in [0, 1]")->capture_default_str();
    cmd->add_option("--seed", o->seed, "Seed of the split ranks")->capture_default_str();
    cmd->add_option("--tensor", o->include, "Only datasets matching this glob (repeatable)");
    cmd->add_option("--lr", o->lr, "O2: learning rate")->capture_default_str();
    cmd->add_option("--beta1", o->beta1, "O2: Adam beta1")->capture_default_str();
    cmd->add_option("--beta2", o->beta2, "O2: Adam beta2")->capture_default_str();
    cmd->add_option("--eps", o->eps, "O2: Adam eps")->capture_default_str();
    cmd->add_option("--weight-decay", o->weight_decay, "O2: AdamW weight decay")->capture_default_str();
    cmd->add_flag("--fp32-master", o->fp32_master, "O2 msamp: keep FP32 master weights (default FP16 with scale)");
    cmd->add_option("--optimizer", o->optimizer, "O2: msamp (LBAdamW) or te-fused-adam (TransformerEngine FusedAdam)")
        ->capture_default_str();
    cmd->add_option("--optimizer-grad", o->optimizer_grad,
                    "O2: what the simulated optimizer takes: mean (the exact rank mean, as the FP32 reference;\n"
                    "isolates the states) or fp8-allreduce (the FP8 all-reduce's result, first --path and --order;\n"
                    "the drift is O2 end to end)")
        ->capture_default_str();
    cmd->add_option("--wgrad-dtype", o->wgrad_dtype,
                    "dtype the weight gradient enters the FP8 all-reduce in: fp32 (the dump as is), fp16 (MS-AMP's FP8 "
                    "GEMM output under autocast) or bf16")
        ->capture_default_str();
    cmd->add_option("--exp-avg-dtype", o->exp_avg_dtype, "O2 te-fused-adam: exp_avg as fp32, fp16, bf16 or fp8")
        ->capture_default_str();
    cmd->add_option("--exp-avg-sq-dtype", o->exp_avg_sq_dtype,
                    "O2 te-fused-adam: exp_avg_sq as fp32, fp16, bf16 or fp8")
        ->capture_default_str();
    cmd->add_option("--master-weight-dtype", o->master_dtype, "O2 te-fused-adam: master weights fp32 or fp16")
        ->capture_default_str();
    cmd->add_flag("--csv", o->csv, "Long-form CSV: section,tensor,step,ranks,path,order,metric,value");
    cmd->add_flag("--json", o->json, "JSON: every row, the flagged tensors per N and path");
    add_read_flags(cmd);
    cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace fp8kit::cli
