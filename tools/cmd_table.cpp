// fp8kit table: an exhaustive conversion table as raw bytes, for diffing a kernel's own output
// (lib: fp8kit/convert/table.hpp).
#include <memory>

#include "command.hpp"
#include "fp8kit/convert/table.hpp"

// A namespace of its own: the CLI builds as one unity file (tools/CMakeLists.txt).
namespace fp8kit::cli::table_command {
namespace {

struct TableOpts {
    std::string from, to, output;
    PolicyOptions policy;
};

Register reg([](CLI::App& root) {
    auto o = std::make_shared<TableOpts>();
    auto* cmd = root.add_subcommand(
        "table",
        "Write a whole conversion table as raw bytes: one output per input bit pattern, in increasing order.\n"
        "Encode tables: --from f32|f16|bf16 --to FORMAT (2^32 bytes for f32, 65,536 for f16/bf16).\n"
        "Decode tables: --from FORMAT --to f32|f16|bf16 (2^bits little-endian values: 16 for FP4, 64 for FP6, 256 for "
        "FP8).\n"
        "Codes are one per byte, in the low bits (FP4: 0x0..0xF).");
    cmd->add_option("--from", o->from, "Input type (f32, f16, bf16) or a format of at most 8 bits")->required();
    cmd->add_option("--to", o->to,
                    "Output format (at most 8 bits, one code per byte), or f32/f16/bf16 for a decode table")
        ->required();
    cmd->add_option("-o,--output", o->output, "Output file, or - for standard output")->required();
    o->policy.add_to(cmd);
    cmd->callback([o] {
        const auto wide_from = parse_wide(o->from);
        const auto fmt_from = parse_format(o->from);
        if (fmt_from) {  // decode table
            const Wide to = require_wide(o->to, "--to");
            if (to == Wide::f64) throw UsageError("--to: decode tables are written as f32, f16 or bf16");
            write_decode_table(*fmt_from, to, o->output, "-o");
            return;
        }
        if (!wide_from || *wide_from == Wide::f64)
            throw UsageError(fmt::format("--from: '{}' is neither f32, f16, bf16 nor an 8-bit format ({})", o->from,
                                         format_choices()));
        const Format to = require_format(o->to, "--to");
        const Policy p = o->policy.resolve(to, *wide_from);
        if (p.rounding == Rounding::stochastic)
            throw UsageError("--round stochastic has no single table; choose a deterministic rounding");
        write_encode_table(*wide_from, to, p, o->output, "-o");
    });
});

}  // namespace
}  // namespace fp8kit::cli::table_command
