// fp8kit gemm: the reference FP8 GEMM D = (A . B^T) * (scale_a (x) scale_b) under an
// accumulation model (docs/gemm.md), written as .npy.
#include "command.hpp"
#include "device_flag.hpp"
#include "gemm_args.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::gemm_command {
namespace {

struct GemmOpts {
    GemmArgs args;
    std::string accum = "exact", out;
    DeviceFlags device;
};

Register gemm_cmd([](CLI::App& root) {
    static GemmOpts opts;
    auto* o = &opts;
    auto* cmd = root.add_subcommand(
        "gemm",
        "Reference FP8 GEMM: D = (A . B^T) * (scale_a (x) scale_b) under an accumulation "
        "model (exact, fp32, sm90, sm90-fast, sm90-splitk:N, sm90-fast-splitk:N, deepseek-128, h100tc, aligned:...)");
    o->args.add_to(cmd, true);
    cmd->add_option(
        "--accum", o->accum,
        "Accumulation model (default exact; docs/gemm.md). sm90[-fast]-splitk:N: cuBLASLt's split-K kernels, "
        "N products per split (a multiple of 128; validate --gemm finds N)");
    cmd->add_option("-o,--output", o->out, "Output .npy: M x N float32, or uint16 bfloat16 bits")->required();
    cmd->add_option("--device", o->device.device,
                    "auto, cpu or cuda: where the model runs. cuda: the CUDA model, the same bits, every model "
                    "but exact (docs/gemm.md, \"On the GPU\"); fails (exit 2) naming why where no GPU can be "
                    "used. auto is the CPU")
        ->capture_default_str()
        ->group("Device");
    cmd->add_flag("--verbose", o->device.verbose, "Say on stderr where the model runs")->group("Device");
    cmd->callback([o] {
        const gemm::AccumModel model = require_model(o->accum);
        const gemm::GemmDevice dev = resolve_gemm_device(o->device, "gemm");
        gemm::GemmInputs in;
        o->args.load(in);
        std::vector<std::uint32_t> d;
        try {
            dev.require(model);
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--device cuda: {}", e.what()));
        }
        try {
            d = dev.run(in.request, model);
            gemm::save_output(o->out, d, in.request.a.rows, in.request.b.rows, in.request.out);
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    });
});

}  // namespace
}  // namespace fp8kit::cli::gemm_command
