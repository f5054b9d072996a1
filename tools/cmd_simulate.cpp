// fp8kit simulate msamp: MS-AMP's FP8 gradient all-reduce (O1) and FP8/FP16 optimizer states (O2)
// simulated on a run's dumps (docs/msamp.md).
#include <cstdio>
#include <memory>

#include "command.hpp"
#include "read_flags.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/simulate.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::simulate_command {
namespace {

namespace sim = fp8kit::simulate;

struct SimOpts {
    std::vector<std::string> dumps, orders{"rank", "ring", "tree"}, include;
    std::string level, path = "both", hop = "half";
    std::string optimizer = "msamp", exp_avg_dtype, exp_avg_sq_dtype, master_dtype, te_build;  // "": the default
    std::vector<int> ranks;
    double spread = 1.0, lr = 3e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0.01;
    std::uint64_t seed = 0;
    bool fp32_master = false, csv = false, json = false;
    std::string optimizer_grad = "mean";
    std::string wgrad_dtype = "fp32";
};

void run(const SimOpts& o) {
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    if (o.level != "O1" && o.level != "O2") throw UsageError(fmt::format("--level {}: O1 or O2", o.level));
    sim::MsampRunOptions ro;
    try {
        sim::set_optimizer(ro, o.optimizer, o.exp_avg_dtype, o.exp_avg_sq_dtype, o.master_dtype, o.te_build);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    try {
        ro.paths = o.path == "both" ? std::vector<sim::Path>{sim::Path::ddp, sim::Path::non_ddp}
                                    : std::vector<sim::Path>{sim::parse_path(o.path)};
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("--path: {}, or both", e.what()));
    }
    ro.hop = parse_named(sim::parse_hop, o.hop, "--hop");
    ro.o2 = o.level == "O2";
    ro.orders.clear();
    for (const auto& s : o.orders) ro.orders.push_back(parse_named(sim::parse_order, s, "--order"));
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
    ro.fp32_master = o.fp32_master;
    std::unique_ptr<sim::DumpInput> in;
    sim::MsampRun res;
    try {
        in = std::make_unique<sim::DumpInput>(files, o.include, cli_read_options());
        // Datasets stored outside the dump are skipped, never read: on stderr for every output form
        // (CSV and JSON stay parseable), and in the JSON and the terminal notes too.
        for (const auto& s : in->skipped())
            std::fprintf(stderr, "fp8kit: skipped %s\n", io::printable(s.describe()).c_str());
        res = sim::run_msamp(*in, ro);
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
    if (o.csv)
        std::fputs(sim::msamp_csv(res).c_str(), stdout);
    else if (o.json)
        std::fputs(sim::msamp_json(res, ro, files, in->skipped()).c_str(), stdout);
    else
        std::fputs(sim::msamp_text(res, ro, files.size()).c_str(), stdout);
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
    cmd->add_option("--exp-avg-dtype", o->exp_avg_dtype,
                    "O2: exp_avg's dtype. msamp: fp8 (default) or fp16; te-fused-adam: fp32, fp16, bf16 or fp8 "
                    "(default)");
    cmd->add_option("--exp-avg-sq-dtype", o->exp_avg_sq_dtype,
                    "O2: exp_avg_sq's dtype. msamp: fp16 (default) or fp8; te-fused-adam: fp32, fp16, bf16 or fp8 "
                    "(default)");
    cmd->add_option("--master-weight-dtype", o->master_dtype,
                    "O2 te-fused-adam: master weights fp32 (default) or fp16 (msamp: see --fp32-master)");
    cmd->add_option("--te-build", o->te_build,
                    "O2 te-fused-adam: how TE's adam.cu was compiled. fast-math (default): TE's own build\n"
                    "(--use_fast_math: flushed subnormals, the GPU's approximate division and square root,\n"
                    "as an H200 computes them); nvcc-default: a TE built without that flag (IEEE)");
    cmd->add_flag("--csv", o->csv, "Long-form CSV: section,tensor,step,ranks,path,order,metric,value");
    cmd->add_flag("--json", o->json, "JSON: every row, the flagged tensors per N and path");
    add_read_flags(cmd);
    cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace fp8kit::cli::simulate_command
