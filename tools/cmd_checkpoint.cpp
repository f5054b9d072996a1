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

Register reg([](CLI::App& root) {
    auto* cmd = root.add_subcommand(
        "checkpoint",
        "Quantised inference checkpoints (ModelOpt HF and TensorRT-LLM exports, compressed-tensors, DeepSeek-V3, "
        "gpt-oss)");
    cmd->require_subcommand(1);
    auto o = std::make_shared<Options>();
    auto* chk = cmd->add_subcommand(
        "check",
        "Check every quantised weight's scales and codes, and the KV scale names, of checkpoint folder DIR\n"
        "(safetensors shards, config.json, hf_quant_config.json; or a one-rank TensorRT-LLM checkpoint:\n"
        "config.json + rank0.safetensors). With --reference, re-quantise each original\n"
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
            checkpoint::write_text(r, stdout);
        exit_status() = r.failed() ? 1 : 0;
    });
});

}  // namespace
}  // namespace fp8kit::cli::checkpoint_command
