// fp8kit kv DUMPS: the KV cache before serving: Q/K/V captured after the rotary embedding, cast to
// an E4M3 / E5M2 / E4M3FNUZ / NVFP4 cache under each scale policy, and FP8 attention's numerics
// (lib: fp8kit/kv.hpp; docs/inference.md, "The KV cache").
#include <cmath>
#include <memory>

#include "command.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/kv.hpp"
#include "fp8kit/io/json_number.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::kv_command {
namespace {

struct Options {
    std::vector<std::string> files, formats, policies;
    std::size_t bucket = 32;
    bool json = false, csv = false, no_attention = false;
};

std::string db(double v) { return io::fixed_number(v, 2); }
double pct(std::uint64_t n, std::uint64_t d) { return d ? 100.0 * static_cast<double>(n) / d : 0.0; }

// Per (layer, tensor, format, policy): the heads summed, and the worst head's SQNR.
void print_summary(const kv::Report& r) {
    fmt::print("{:<28} {:<2} {:<9} {:<17} {:>10} {:>8} {:>8} {:>9} {:>10}\n", "layer", "t", "format", "policy", "scale",
               "sat%", "under%", "SQNR dB", "worst head");
    for (std::size_t i = 0; i < r.rows.size();) {
        std::size_t j = i;
        kv::CastStats all;
        double worst = HUGE_VAL;
        std::size_t worst_head = 0;
        while (j < r.rows.size() && r.rows[j].layer == r.rows[i].layer && r.rows[j].tensor == r.rows[i].tensor &&
               r.rows[j].format == r.rows[i].format && r.rows[j].policy == r.rows[i].policy) {
            all.add(r.rows[j].stats);
            if (r.rows[j].stats.sqnr_db() < worst) worst = r.rows[j].stats.sqnr_db(), worst_head = r.rows[j].head;
            ++j;
        }
        const auto& row = r.rows[i];
        const std::string scale = row.policy == kv::ScalePolicy::token_head ? "per token"
                                  : row.policy == kv::ScalePolicy::head     ? "per head"
                                                                            : fmt::format("{:.6g}", row.scale);
        fmt::print("{:<28} {:<2} {:<9} {:<17} {:>10} {:>8.4f} {:>8.4f} {:>9} {:>5} (h{})\n", io::printable(row.layer),
                   row.tensor, kv::name(row.format), kv::name(row.policy), scale, pct(all.saturated, all.nonzero),
                   pct(all.underflow, all.nonzero), db(all.sqnr_db()), db(worst), worst_head);
        i = j;
    }
}

void print_text(const kv::Report& r) {
    fmt::print("{} layers, {} steps (batches) of [{} x heads x {} positions x {}]; step 0 is the first batch.\n\n",
               r.layers.size(), r.steps, r.batch, r.positions, r.dim);
    print_summary(r);
    if (!r.attention.empty()) {
        fmt::print(
            "\nFP8 attention (E4M3 Q, K, V; P in E4M3 without a scale), SQNR dB against binary64 on the BF16 "
            "values:\n");
        fmt::print("{:<28} {:>4} {:<17} {:>9} {:>9} {:>9} {:>11} {:>10}\n", "layer", "head", "policy", "scores", "P",
                   "O (FA3)", "O (normed)", "P under%");
        for (const auto& a : r.attention)
            fmt::print("{:<28} {:>4} {:<17} {:>9} {:>9} {:>9} {:>11} {:>10.4f}\n", io::printable(a.layer), a.head,
                       kv::name(a.policy), db(a.scores_sqnr_db), db(a.probs_sqnr_db), db(a.out_sqnr_db),
                       db(a.out_normalized_sqnr_db), pct(a.p_underflow, a.p_nonzero));
    }
    fmt::print("\nPosition buckets and per-head rows: --json (or --csv for the rows).\n");
    for (const auto& n : r.skipped) fmt::print("note: skipped {}\n", io::printable(n.describe()));
    for (const auto& n : r.notes) fmt::print("note: {}\n", io::printable(n));
}

Register reg([](CLI::App& root) {
    auto o = std::make_shared<Options>();
    auto* cmd = root.add_subcommand(
        "kv",
        fmt::format(
            "The KV cache before serving: K, V (and Q) captured after the rotary embedding (fp8kit.torch.Monitor\n"
            "attention=True), cast to each cache format ({}) under each scale policy\n({}): saturation, "
            "underflow, SQNR per layer, head and position,\n"
            "and FP8 attention (Q K^T, P in E4M3, P V) through the reference GEMM.",
            kv::format_names(), kv::policy_names()));
    cmd->add_option("DUMPS", o->files,
                    "Dump files with <layer>.q/.k/.v tensors [batch, heads, positions, head_dim]; each step one batch")
        ->required();
    cmd->add_option("--format", o->formats,
                    fmt::format("Cache format (repeatable): {} (default: all)", kv::format_names()));
    cmd->add_option("--policy", o->policies,
                    fmt::format("Scale policy (repeatable): {} (default: all)", kv::policy_names()));
    cmd->add_option("--bucket", o->bucket, "Positions per position bucket (default 32)");
    cmd->add_flag("--no-attention", o->no_attention, "Skip FP8 attention");
    cmd->add_flag("--json", o->json, "Print the report as JSON (rows, positions, attention)");
    cmd->add_flag("--csv", o->csv, "Print one CSV row per layer, tensor, head, format and policy");
    cmd->callback([o] {
        if (o->json && o->csv) throw UsageError("kv: --json and --csv exclude each other");
        kv::Options opt;
        opt.files = o->files;
        opt.bucket = o->bucket;
        opt.attention = !o->no_attention;
        const char* option = "--format";
        try {
            for (const auto& f : o->formats) opt.formats.push_back(kv::parse_format(f));
            option = "--policy";
            for (const auto& p : o->policies) opt.policies.push_back(kv::parse_policy(p));
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("kv: {}: {}", option, e.what()));
        }
        kv::Report r;
        try {
            r = kv::run(opt);
        } catch (const kv::KvError& e) {
            throw UsageError(fmt::format("kv: {}", e.what()));
        }
        if (o->csv)
            for (const auto& n : r.skipped)
                fmt::print(stderr, "fp8kit kv: note: skipped {}\n", io::printable(n.describe()));
        if (o->json)
            fmt::print("{}\n", kv::to_json(r));
        else if (o->csv)
            fmt::print("{}", kv::to_csv(r));
        else
            print_text(r);
    });
});

}  // namespace
}  // namespace fp8kit::cli::kv_command
