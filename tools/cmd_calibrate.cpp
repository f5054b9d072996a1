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
    std::string holdout, save, granularity = "tensor";
    double holdout_tokens = 0;
    bool json = false, csv = false;
};

double share(std::uint64_t n, std::uint64_t d) { return d ? 100.0 * static_cast<double>(n) / d : 0.0; }

void print_text(const calibrate::Report& r) {
    fmt::print("{:<44} {:<22} {:>13} {:<8} {:>9} {:>8} {:>9}\n", "tensor", "method", "scale", "dtype", "clipped%",
               "under%", "SQNR dB");
    std::string last;
    for (const auto& row : r.rows) {
        if (row.tensor != last && !last.empty()) fmt::print("\n");
        last = row.tensor;
        const bool h = row.holdout_batches != 0;
        const auto& s = h ? row.holdout : row.calib;
        const std::string t = row.index < 0 ? row.tensor : fmt::format("{}[{}]", row.tensor, row.index);
        if (row.sweep) {  // scale: weight_scale_2; SQNR: NVFP4 under the chosen block scales
            fmt::print("{:<44} {:<22} {:>13.7g} {:<8} {:>9} {:>8} {:>9}\n", io::printable(t),
                       calibrate::name(row.method), row.scale.value, row.scale.dtype, "-", "-",
                       io::fixed_number(row.sweep->sqnr_db, 2));
            fmt::print("{:<44}   NVFP4: {} of {} block scales differ from the max rule's (SQNR {:.2f} dB with those)\n",
                       "", row.sweep->blocks_changed, row.sweep->blocks, row.sweep->sqnr_max_db);
            continue;
        }
        fmt::print("{:<44} {:<22} {:>13.7g} {:<8} {:>9.4f} {:>8.4f} {:>9}\n", io::printable(t),
                   calibrate::name(row.method), row.scale.value, row.scale.dtype, share(s.clipped, s.nonzero),
                   share(s.underflow, s.nonzero), io::fixed_number(s.sqnr_db, 2));
    }
    if (!r.rows.empty() && r.rows.front().sweep) {
        fmt::print(
            "\n{} rows; scale = weight_scale_2; SQNR: NVFP4 on the weight under the sweep's E4M3 block scales.\n",
            r.rows.size());
        for (const auto& n : r.skipped) fmt::print("note: skipped {}\n", io::printable(n.describe()));
        for (const auto& n : r.notes) fmt::print("note: {}\n", io::printable(n));
        return;
    }
    const bool any_holdout = !r.rows.empty() && r.rows.front().holdout_batches != 0;
    const bool by_token = any_holdout && r.rows.front().calib_steps == r.rows.front().holdout_steps;
    fmt::print("\n{} rows; clipping, underflow and SQNR are on the {} (E4M3, x / scale, round to nearest even).\n",
               r.rows.size(),
               !any_holdout ? "calibration steps (nothing held out)"
               : by_token   ? "held-out tokens"
                            : "held-out steps");
    for (const auto& n : r.skipped) fmt::print("note: skipped {}\n", io::printable(n.describe()));
    for (const auto& n : r.notes) fmt::print("note: {}\n", io::printable(n));
}

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
        "a weight tensor (--tensors 'step_000299/*/weight'): weight_scale (E4M3 per block of 16) and weight_scale_2.");
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
    cmd->add_flag("--json", o->json, "Print the report as JSON");
    cmd->add_flag("--csv", o->csv, "Print one CSV row per tensor and method");
    cmd->callback([o, tokens] {
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
            if (!o->save.empty()) calibrate::write_safetensors(r, opt.methods.front(), o->save);
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
            print_text(r);
    });
});

}  // namespace
}  // namespace fp8kit::cli::calibrate_command
