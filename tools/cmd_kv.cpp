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
            kv::write_text(r, stdout);
    });
});

}  // namespace
}  // namespace fp8kit::cli::kv_command
