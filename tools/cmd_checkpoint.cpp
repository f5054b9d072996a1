// fp8kit checkpoint check DIR [--reference ORIGINAL_DIR]: a quantised inference checkpoint's
// scales, codes and KV scale names (lib: fp8kit/checkpoint.hpp; docs/inference.md).
#include <memory>
#include <optional>

#include <fmt/ranges.h>

#include "command.hpp"
#include "fp8kit/checkpoint.hpp"
#include "fp8kit/io/printable.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::checkpoint_command {
namespace {

struct Options {
    std::string dir, reference, engine;
    bool json = false, csv = false;
};

void print_text(const checkpoint::Report& r) {
    fmt::print("checkpoint {} (producer {})\n", io::printable(r.dir), checkpoint::name(r.producer));
    std::size_t quantised = 0, excluded = 0;
    for (const auto& L : r.layers) {
        quantised += L.scheme != checkpoint::Scheme::none;
        excluded += L.excluded;
    }
    fmt::print("layers: {} quantised, {} excluded, {} listed\n", quantised, excluded, r.layers.size());
    for (const auto& L : r.layers)
        if (L.scheme != checkpoint::Scheme::none)
            fmt::print("  {:<48} {:<16} scale {}{}\n", io::printable(L.module), checkpoint::name(L.scheme),
                       checkpoint::name(L.scale_convention),
                       L.global_scale.empty() ? "" : fmt::format(", global {}", checkpoint::name(L.global_convention)));
    if (!r.kv.empty()) {
        fmt::print("KV / attention scales (what each engine does with the name):\n");
        for (const auto& k : r.kv) {
            fmt::print("  {}{}\n", io::printable(k.name),
                       k.present ? fmt::format("  {} [{}]", k.dtype, fmt::join(k.shape, ", ")) : "  (missing)");
            for (int i = 0; i < 3; ++i)
                fmt::print("    {:<13} {:<12} {}\n", std::string(checkpoint::kKvEngines[i]) + ":",
                           checkpoint::name(k.engines[i].fate), io::printable(k.engines[i].detail));
        }
    }
    if (!r.comparisons.empty()) {
        fmt::print("against the original:\n");
        for (const auto& c : r.comparisons)
            fmt::print(
                "  {:<48} {:<26} codes differing {:>8}/{:<8} scales differing {:>6}  SQNR {:.2f} dB  max rel {:.3g}  "
                "[{}]\n",
                io::printable(c.module), c.verdict, c.code_mismatches, c.elements, c.scale_mismatches, c.sqnr_db,
                c.max_rel_error, c.variant);
    }
    for (const auto& f : r.findings)
        fmt::print("{} [{}] {}: {}\n", f.failed ? "FAIL" : "note", f.check, io::printable(f.tensor), f.message);
    fmt::print("{}\n", checkpoint::summary(r));
}

Register reg([](CLI::App& root) {
    auto* cmd = root.add_subcommand(
        "checkpoint", "Quantised inference checkpoints (ModelOpt, compressed-tensors, DeepSeek-V3, gpt-oss)");
    cmd->require_subcommand(1);
    auto o = std::make_shared<Options>();
    auto* chk = cmd->add_subcommand(
        "check",
        "Check every quantised weight's scales and codes, and the KV scale names, of checkpoint folder DIR\n"
        "(safetensors shards, config.json, hf_quant_config.json). With --reference, re-quantise each original\n"
        "weight under the producer's own rule and compare every code and scale. Exit 1 when a check fails.");
    chk->add_option("DIR", o->dir, "Checkpoint folder")->required();
    chk->add_option("--reference", o->reference, "The unquantised original (a folder of safetensors)");
    chk->add_option("--engine", o->engine,
                    "The serving engine the checkpoint is for: vllm, sglang, trtllm, or all. What that engine drops,\n"
                    "renames wrongly or rejects fails the check; other engines' concerns stay notes");
    chk->add_flag("--json", o->json, "Print the report as JSON");
    chk->add_flag("--csv", o->csv, "Print one CSV row per layer");
    chk->callback([o] {
        if (o->json && o->csv) throw UsageError("checkpoint check: --json and --csv exclude each other");
        checkpoint::Report r;
        try {
            r = checkpoint::check(
                o->dir, checkpoint::CheckOptions{
                            o->reference.empty() ? std::nullopt : std::optional<std::string>(o->reference), o->engine});
        } catch (const checkpoint::CheckpointError& e) {
            throw UsageError(fmt::format("checkpoint check: {}", e.what()));
        }
        if (o->json)
            fmt::print("{}\n", checkpoint::to_json(r));
        else if (o->csv)
            fmt::print("{}", checkpoint::to_csv(r));
        else
            print_text(r);
        exit_status() = r.failed() ? 1 : 0;
    });
});

}  // namespace
}  // namespace fp8kit::cli::checkpoint_command
