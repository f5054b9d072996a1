// fp8kit validate: a kernel's codes (or, --gemm, a GEMM's D) against the reference, bit for bit, each
// mismatch diagnosed (lib: validate.hpp, validate/files.hpp, gemm/compare.hpp). Exit 0/1/2: exact/not/bad.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <memory>

#include "command.hpp"
#include "device_flag.hpp"
#include "gemm_args.hpp"
#include "read_flags.hpp"
#include "terminal.hpp"

#include "fp8kit/cluster/validate.hpp"
#include "fp8kit/validate/files.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::validate_command {
namespace {

struct ValidateOpts {
    std::string input, output, to, scale, scale_inv, scales, block,
        scales_are = "scale_inv", scales_dtype = "f32", dtype, shape, scales_layout = "row-major", global_scale;
    bool json = false, quiet = false, progress = false, packed = false;
    std::size_t examples = 5;
    PolicyOptions policy;
    bool gemm = false;  // --gemm: --output is a GEMM's D, compared with the accumulation models
    GemmArgs gemm_args;
    DeviceFlags device;
};

// validate --gemm: which model D equals, its differences by class, its error against exact.
void validate_gemm(const ValidateOpts& o, const gemm::GemmDevice& dev) {
    if (!cluster::world().root()) return;  // not split over ranks: rank 0 alone compares (docs/mpi.md)
    if (o.gemm_args.a.empty() || o.gemm_args.b.empty()) throw UsageError("--gemm needs --a A.npy and --b B.npy");
    if (!o.input.empty() || !o.to.empty())
        throw UsageError("--gemm compares a GEMM output: give --a/--b, not --input/--to");
    gemm::GemmInputs in;
    o.gemm_args.load(in);
    const auto& rq = in.request;
    try {
        const auto user = gemm::load_output(o.output, rq.a.rows, rq.b.rows, rq.out);
        const gemm::GemmComparison c = gemm::compare(rq, user, dev);
        if (o.json)
            fmt::print("{}\n", c.json());
        else
            fmt::print("validate --gemm {} ({} x {}, K = {})\n{}", o.output, rq.a.rows, rq.b.rows, rq.k, c.summary());
        exit_status() = c.matched.empty() ? 1 : 0;
    } catch (const std::invalid_argument& e) {
        throw UsageError(e.what());
    }
}

float parse_scale(const std::string& s, const char* option) {
    char* end = nullptr;
    errno = 0;
    const float v = std::strtof(s.c_str(), &end);  // correctly rounded to float32 (hex floats exact)
    if (s.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(v) || v == 0.0f)
        throw UsageError(fmt::format("{}: '{}' is not a finite non-zero float32 scale", option, s));
    return v;
}

// --scale S, --scale-inv S or --scales FILE with its --block and --scales-are.
void set_scaling(const ValidateOpts& o, ValidateFileSpec& spec) {
    if (!o.scale.empty()) {
        spec.mode = ScaleMode::scale;
        spec.value = parse_scale(o.scale, "--scale");
    } else if (!o.scale_inv.empty()) {
        spec.mode = ScaleMode::scale_inv;
        spec.value = parse_scale(o.scale_inv, "--scale-inv");
    } else if (!o.scales.empty()) {
        spec.mode = o.scales_are == "scale" ? ScaleMode::scale : ScaleMode::scale_inv;
        spec.scales = o.scales;
        spec.layout =
            parse_named([](const std::string& b) { return parse_block_layout(b, false); }, o.block, "--block");
    }
}

// The options as lib's spec: every check that needs no file, before any is opened.
ValidateFileSpec make_spec(const ValidateOpts& o) {
    if (o.input.empty()) throw UsageError("--input is required (or --gemm with --a and --b)");
    if (o.to.empty()) throw UsageError("--to is required");
    ValidateFileSpec spec;
    spec.input = o.input, spec.output = o.output, spec.to = require_format(o.to, "--to"), spec.packed = o.packed;
    spec.raw = parse_raw_layout(o.dtype, o.shape);  // ValidateInputError: run() makes it a UsageError
    if (!o.scale.empty() + !o.scale_inv.empty() + !o.scales.empty() > 1)
        throw UsageError("give at most one of --scale, --scale-inv and --scales");
    if (!o.scales.empty() && o.block.empty())
        throw UsageError(fmt::format("--scales needs --block ({})", block_layout_names(false)));
    if (o.scales.empty() && !o.block.empty()) throw UsageError("--block needs --scales FILE");
    if (o.scales_are != "scale_inv" && o.scales_are != "scale")
        throw UsageError(fmt::format("--scales-are: '{}' (choose scale_inv or scale)", o.scales_are));
    spec.scales_type = parse_named(parse_scale_type, o.scales_dtype, "--scales-dtype");
    spec.order = parse_named(parse_scale_order, o.scales_layout, "--scales-layout");
    if (!o.global_scale.empty()) spec.global = parse_scale(o.global_scale, "--global-scale");
    set_scaling(o, spec);
    return spec;
}

void run(const ValidateOpts& o) {
    std::unique_ptr<ValidateFiles> files;
    try {
        files = open_validate_files(make_spec(o), cli_read_options(),
                                    [&o](Wide from) { return o.policy.resolve(require_format(o.to, "--to"), from); });
    } catch (const ValidateInputError& e) {
        throw UsageError(e.what());
    }
    ValidateOptions vo;
    vo.examples = o.examples;
    // Progress on rank 0's stderr (under mpirun: rank 0's share of the blocks, drawn on the whole bar).
    const std::size_t blocks = (files->request.n + 65535) >> 16;  // validate's blocks of 2^16 elements
    Progress bar(progress_on(cluster::world().root(), o.quiet, o.progress), blocks, "blocks of 65536 elements");
    if (bar.on())
        vo.progress = [&bar, blocks](std::uint64_t done, std::uint64_t total) {
            bar.update(static_cast<std::size_t>(done * blocks / std::max<std::uint64_t>(total, 1)));
        };
    // Under mpirun the ranks share the comparison; rank 0 alone writes the report.
    auto split = cluster::validate(cluster::world(), files->request, vo);
    bar.done();
    if (!split) return;
    ValidateReport& r = *split;
    r.shape = files->shape;  // positions as multi-dimensional indices
    if (o.json)
        fmt::print("{}\n", r.json());
    else
        fmt::print("validate {} against {}\n{}", o.output, o.input, r.summary());
    exit_status() = r.exact() ? 0 : 1;
}

Register validate_cmd([](CLI::App& root) {
    static ValidateOpts opts;  // lives as long as the CLI::App that refers to it
    auto* o = &opts;
    auto* cmd =
        root.add_subcommand("validate",
                            "Compare a kernel's FP8 codes with the reference bit for bit and classify every mismatch "
                            "(tie, direction, overflow, nan-encoding, flush-to-zero, double-rounding, scale, other). "
                            "Exit 0: bit-exact, 1: mismatches, 2: bad input");
    cmd->add_option("--input", o->input,
                    "The kernel's input: .npy, raw .bin (with --dtype), file.h5:/dataset (or file.h5:dataset), or "
                    "model.safetensors:tensor (required unless --gemm)");
    cmd->add_option("--output", o->output,
                    "The kernel's FP8 codes, one byte each: .npy (|u1 or V1), raw .bin, file.h5:/dataset (or "
                    "file.h5:dataset), or model.safetensors:tensor (F8_* or U8)")
        ->required();
    cmd->add_flag("--packed", o->packed,
                  "--output holds E2M1 codes two per byte along each row, element 2i in the low "
                  "nibble (torch float4_e2m1fn_x2, TE's NVFP4 data): shape rows x cols/2 (--to e2m1)");
    cmd->add_option("--to", o->to, "Target format (required unless --gemm): " + format_choices());
    cmd->add_option("--dtype", o->dtype, "Element type of a raw --input: f64, f32, f16, bf16");
    cmd->add_option("--shape", o->shape, "Shape of raw files, e.g. 4096x1024 (default: one dimension)");
    cmd->add_option("--scale", o->scale, "Quantisation scale S: q = fp8(fl32(x * S))")->group("Scaling");
    cmd->add_option("--scale-inv", o->scale_inv, "Dequantisation scale S: q = fp8(fl32(x * fl32(1/S)))")
        ->group("Scaling");
    cmd->add_option("--scales", o->scales, "Per-block scales (.npy <f4 or |u1 E8M0, raw .bin, or file.h5:/dataset)")
        ->group("Scaling");
    cmd->add_option("--block", o->block, "Block layout of --scales: " + block_layout_names(false))->group("Scaling");
    cmd->add_option("--scales-layout", o->scales_layout,
                    "Where each block's scale lies in --scales: row-major (default), "
                    "padded (TE's scale_inv: 128-row x 4-column multiples) or swizzled "
                    "(cuBLASLt's 128x4 tiles, TE's swizzle, torchao's to_blocked); "
                    "padded and swizzled for mx32 and 1x16")
        ->group("Scaling");
    cmd->add_option("--global-scale", o->global_scale,
                    "E4M3 --scales: the float32 second-level dequantisation scale G "
                    "(TE's 1/S_enc, torchao's per_tensor_scale; default 1). scale_inv: "
                    "x * fl32(1/fl32(e4m3*G)) (TE); scale: x * fl32(fl32(1/G)/e4m3) (torchao)")
        ->group("Scaling");
    cmd->add_option("--scales-are", o->scales_are,
                    "What --scales holds: scale_inv (default: dequantisation "
                    "scales, as kernels write them) or scale")
        ->group("Scaling");
    cmd->add_option("--scales-dtype", o->scales_dtype,
                    "Type of --scales: f32 (default for raw files), e8m0 (default for "
                    "one-byte scales) or e4m3 (NVFP4 block scales)")
        ->group("Scaling");
    cmd->add_flag("--json", o->json, "Print the report as JSON");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress line");
    cmd->add_flag("--progress", o->progress,
                  "The progress line on stderr even when it is not a terminal (under mpirun: rank 0's)");
    cmd->add_option("--examples", o->examples, "Examples per class (default 5)");
    o->policy.add_to(cmd);
    add_read_flags(cmd);
    cmd->add_flag("--gemm", o->gemm,
                  "--output is a GEMM's D (.npy f32, or uint16 bf16 bits): say which accumulation model "
                  "it equals bit for bit and classify the differences (docs/gemm.md)")
        ->group("GEMM");
    o->gemm_args.add_to(cmd, false);
    add_device_flags(cmd, o->device,
                     "validate compares codes on the CPU whatever this says: its reference codes are one table "
                     "lookup per element, cheaper than copying the input and codes to a GPU; cuda still "
                     "checks that a GPU can be used. With --gemm, cuda computes every GEMM model but exact on "
                     "the GPU, with the same bits (docs/gemm.md, \"On the GPU\").");
    cmd->callback([o] {
        if (o->gemm) return validate_gemm(*o, resolve_gemm_device(o->device, "validate --gemm"));
        resolve_device(o->device, "validate", false);  // checks --device; validate runs on the CPU
        run(*o);
    });
});
}  // namespace
}  // namespace fp8kit::cli::validate_command
