// fp8kit calibrate DUMPS --method M [...]: activation scales as ModelOpt's and llm-compressor's
// calibrators compute them, and what each does to held-out steps (lib: fp8kit/calibrate.hpp;
// docs/inference.md, "Calibration").
#include <cmath>
#include <memory>

#include "command.hpp"
#include "fp8kit/calibrate.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/json_number.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::calibrate_command {
namespace {

struct Options {
    std::vector<std::string> files, methods, tensors;
    std::string holdout, save, granularity = "tensor", scheme = "fp8";
    double holdout_tokens = 0;
    bool json = false, csv = false;
};

Register reg([](CLI::App& root) {
    auto o = std::make_shared<Options>();
    auto* cmd = root.add_subcommand(
        "calibrate",
        "Replay activation dumps through ModelOpt's and llm-compressor's FP8 calibrators (per tensor, E4M3): the\n"
        "input_scale each writes, and its clipping, underflow and SQNR on held-out steps. Methods: modelopt_max,\n"
        "modelopt_mse, modelopt_percentile, llmc_memoryless_minmax, llmc_static_minmax, llmc_minmax, llmc_mse, or "
        "all.\n"
        "Per channel: modelopt_max, modelopt_mse; per head: those and the llmc observers. ModelOpt's histogram\n"
        "entropy and mse are refused: ModelOpt 0.47.0 raises TypeError for FP8 in both (docs/inference.md).\n"
        "modelopt_nvfp4_sweep (not in 'all'): ModelOpt's FP8-scale sweep of a static NVFP4 weight, one step of\n"
        "a weight tensor (--tensors 'step_000299/*/weight'): weight_scale (E4M3 per block of 16) and weight_scale_2.\n"
        "--save --scheme nvfp4 writes an NVFP4 (W4A4) layer's activation scale as its producer stores it:\n"
        "modelopt_max: <module>.input_scale F32 [] = amax / (6 * 448); llmc_static_minmax (the NVFP4 preset's\n"
        "observer) or llmc_memoryless_minmax: <module>.input_global_scale F32 [1] = 448 * 6 / amax in the\n"
        "activation's dtype (docs/inference.md, \"NVFP4 input scales\").");
    cmd->add_option("DUMPS", o->files, "Dump files (HDF5 / safetensors); each step of a tensor is one batch")
        ->required();
    cmd->add_option("--method", o->methods, "Calibration method (repeatable; 'all' for every one)")->required();
    cmd->add_option("--tensors", o->tensors, "Tensor name patterns (fnmatch; default: tensors of role activation)");
    cmd->add_option("--holdout-steps", o->holdout,
                    "Steps held out for the report (\"299\", \"200-\", \"none\"; default: each tensor's last step)");
    auto* tokens =
        cmd->add_option("--holdout-tokens", o->holdout_tokens,
                        "Hold out by sample instead: this fraction of every step's tokens (the last ones), e.g. 0.25");
    cmd->add_option("--granularity", o->granularity,
                    "tensor (default), channel (the last dimension: ModelOpt axis=-1) or head (dimension 1 of a\n"
                    "[batch, heads, positions, head_dim] Q/K/V tensor: llm-compressor attn_head, ModelOpt axis=1)");
    cmd->add_option("--save", o->save, "Write the scales of the one --method as safetensors, under the tool's names");
    auto* scheme = cmd->add_option(
        "--scheme", o->scheme,
        "The scheme of the layers --save writes for: fp8 (default: input_scale, E4M3 per tensor) or nvfp4 (W4A4:\n"
        "ModelOpt input_scale F32 [], llm-compressor input_global_scale F32 [1]; KV scales stay FP8)");
    cmd->add_flag("--json", o->json, "Print the report as JSON");
    cmd->add_flag("--csv", o->csv, "Print one CSV row per tensor and method");
    cmd->callback([o, tokens, scheme] {
        if (o->json && o->csv) throw UsageError("calibrate: --json and --csv exclude each other");
        calibrate::Options opt;
        opt.files = o->files;
        opt.include = o->tensors;
        for (const auto& m : o->methods) {
            if (m == "all") {
                for (auto a : calibrate::all_methods()) opt.methods.push_back(a);
                continue;
            }
            if (auto why = calibrate::not_offered(m)) throw UsageError("calibrate: --method " + *why);
            auto p = calibrate::parse_method(m);
            if (!p)
                throw UsageError(
                    fmt::format("calibrate: --method '{}': unknown (modelopt_max, modelopt_mse, modelopt_percentile, "
                                "llmc_memoryless_minmax, llmc_static_minmax, llmc_minmax, llmc_mse, all; the weight "
                                "method modelopt_nvfp4_sweep)",
                                m));
            opt.methods.push_back(*p);
        }
        if (!o->save.empty() && opt.methods.size() != 1)
            throw UsageError("calibrate: --save needs exactly one --method (the tool whose names and dtype it writes)");
        const auto sch = calibrate::parse_scheme(o->scheme);
        if (!sch) throw UsageError(fmt::format("calibrate: --scheme '{}': unknown (fp8, nvfp4)", o->scheme));
        if (scheme->count() != 0 && o->save.empty())
            throw UsageError("calibrate: --scheme says what --save writes; give --save FILE with it");
        if (!o->save.empty()) {
            try {
                calibrate::require_scheme(opt.methods.front(), *sch);
            } catch (const calibrate::CalibrateError& e) {
                throw UsageError(fmt::format("calibrate: {}", e.what()));
            }
        }
        if (!o->holdout.empty()) opt.holdout_steps = o->holdout;
        const auto g = calibrate::parse_granularity(o->granularity);
        if (!g)
            throw UsageError(
                fmt::format("calibrate: --granularity '{}': unknown (tensor, channel, head)", o->granularity));
        opt.granularity = *g;
        if (tokens->count() != 0) opt.holdout_tokens = o->holdout_tokens;
        calibrate::Report r;
        try {
            r = calibrate::run(opt);
            if (!o->save.empty()) calibrate::write_safetensors(r, opt.methods.front(), o->save, *sch);
        } catch (const calibrate::CalibrateError& e) {
            throw UsageError(fmt::format("calibrate: {}", e.what()));
        }
        if (o->csv)
            for (const auto& n : r.skipped)
                fmt::print(stderr, "fp8kit calibrate: note: skipped {}\n", io::printable(n.describe()));
        if (o->json)
            fmt::print("{}\n", calibrate::to_json(r));
        else if (o->csv)
            fmt::print("{}", calibrate::to_csv(r));
        else
            calibrate::write_text(r, stdout);
    });
});

}  // namespace
}  // namespace fp8kit::cli::calibrate_command
