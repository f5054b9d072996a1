// fp8kit gemm: the reference FP8 GEMM D = (A . B^T) * (scale_a (x) scale_b) under an
// accumulation model (docs/gemm.md), written as .npy.
#include "command.hpp"
#include "gemm_args.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::gemm_command {
namespace {

struct GemmOpts {
    GemmArgs args;
    std::string accum = "exact", out;
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
    cmd->callback([o] {
        const gemm::AccumModel model = require_model(o->accum);
        gemm::GemmInputs in;
        o->args.load(in);
        std::vector<std::uint32_t> d;
        try {
            d = gemm::gemm(in.request, model);
            gemm::save_output(o->out, d, in.request.a.rows, in.request.b.rows, in.request.out);
        } catch (const std::invalid_argument& e) {
            throw UsageError(e.what());
        }
    });
});

}  // namespace
}  // namespace fp8kit::cli::gemm_command
