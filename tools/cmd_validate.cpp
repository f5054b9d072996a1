// fp8kit validate: a kernel's FP8 codes against the reference, bit for bit, with a diagnosis of
// every mismatch. Exit 0 bit-exact, 1 mismatches, 2 bad input.
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "command.hpp"
#include "gemm_args.hpp"
#include "device_flag.hpp"
#include "read_flags.hpp"
#include "terminal.hpp"
#include <sys/stat.h>

#include "fp8kit/cluster/validate.hpp"
#include "fp8kit/io/array_file.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit::cli {
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
void validate_gemm(const ValidateOpts& o) {
    if (!cluster::world().root()) return;  // not split over ranks: rank 0 alone compares (docs/mpi.md)
    if (o.gemm_args.a.empty() || o.gemm_args.b.empty()) throw UsageError("--gemm needs --a A.npy and --b B.npy");
    if (!o.input.empty() || !o.to.empty())
        throw UsageError("--gemm compares a GEMM output: give --a/--b, not --input/--to");
    gemm::GemmInputs in;
    o.gemm_args.load(in);
    const auto& rq = in.request;
    try {
        const auto user = gemm::load_output(o.output, rq.a.rows, rq.b.rows, rq.out);
        const gemm::GemmComparison c = gemm::compare(rq, user);
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

// "file:name" where `file` is an existing regular file: the split that names one (file names
// may hold ':'). nullopt when the source is a plain file.
std::optional<std::pair<std::string, std::string>> split_source(const std::string& source) {
    struct stat whole {};
    if (::stat(source.c_str(), &whole) == 0) return std::nullopt;  // a file whose name holds ':'
    for (std::size_t c = source.find(':'); c != std::string::npos; c = source.find(':', c + 1)) {
        struct stat st {};
        const std::string file = source.substr(0, c);
        if (::stat(file.c_str(), &st) == 0 && S_ISREG(st.st_mode)) return std::make_pair(file, source.substr(c + 1));
    }
    return std::nullopt;
}

// One syntax for a tensor in a file, everywhere: file.h5:/x and file.h5:x (HDF5 paths are
// absolute either way), model.safetensors:name. `data` false: type and shape only, nothing read
// (validate checks its operands against each other before loading any). `mapped`: where the
// elements lie in the file as stored, map them instead of reading them (map_array): under mpirun
// each rank then reads only the pages of its own blocks (docs/mpi.md).
ArrayFile open_array(const std::string& source, const RawLayout& raw, bool data, bool mapped = false) {
    auto header_only = [&](const ArrayInfo& i) { return ArrayFile{i.source, i.type, i.shape, {}}; };
    try {
        if (const auto split = split_source(source)) {
            const auto& [file, name] = *split;
            if (fp8kit::dump::is_hdf5_file(file)) {
                const std::string path = name.empty() || name.front() != '/' ? file + ":/" + name : source;
                if (!data) return header_only(describe_array(path, raw, cli_read_options()));
                return mapped ? map_array(path, raw, cli_read_options()) : load_array(path, raw, cli_read_options());
            }
            if (fp8kit::dump::is_dump_file(file)) {
                if (!data) return describe_safetensors(source, file, name, cli_read_options());
                return mapped ? map_safetensors(source, file, name, cli_read_options())
                              : load_safetensors(source, file, name, cli_read_options());
            }
            throw UsageError(
                fmt::format("{}: {} is neither HDF5 nor safetensors, so ':{}' names nothing in it (a "
                            "tensor in a file: file.h5:/path, file.h5:path or model.safetensors:name)",
                            source, file, name));
        }
        if (!data) return header_only(describe_array(source, raw, cli_read_options()));
        return mapped ? map_array(source, raw, cli_read_options()) : load_array(source, raw, cli_read_options());
    } catch (const ArrayFileError& e) {
        throw UsageError(e.what());
    } catch (const fp8kit::dump::DumpError& e) {
        throw UsageError(e.what());
    }
}

ArrayFile load(const std::string& source, const RawLayout& raw) { return open_array(source, raw, true); }

std::uint64_t numel(const std::vector<std::size_t>& shape) {
    std::uint64_t n = 1;
    for (std::size_t d : shape) n *= d;
    return n;
}

// A name from lib's tables (validate/names.cpp), its error naming the option.
template <class Parse>
auto parse_named(Parse parse, const std::string& s, const char* option) {
    try {
        return parse(s);
    } catch (const std::invalid_argument& e) {
        throw UsageError(fmt::format("{}: {}", option, e.what()));
    }
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
                     "validate computes on the CPU whatever this says: its reference codes are one table "
                     "lookup per element, cheaper than copying the input and codes to a GPU; cuda still "
                     "checks that a GPU can be used.");
    cmd->callback([o] {
        resolve_device(o->device, "validate", false);  // checks --device; validate runs on the CPU
        if (o->gemm) return validate_gemm(*o);
        if (o->input.empty()) throw UsageError("--input is required (or --gemm with --a and --b)");
        if (o->to.empty()) throw UsageError("--to is required");
        const Format to = require_format(o->to, "--to");
        RawLayout raw_in;
        if (!o->dtype.empty()) {
            const auto t = parse_element_type(o->dtype);
            if (!t || t == ElementType::u8)
                throw UsageError(fmt::format("--dtype: unknown type '{}' (choose from f64, f32, f16, bf16)", o->dtype));
            raw_in.type = t;
        }
        if (!o->shape.empty()) {
            const auto s = parse_shape(o->shape);
            if (!s) throw UsageError(fmt::format("--shape: '{}' is not a shape like 4096x1024", o->shape));
            // The product must not wrap: 2^32 x 2^32 would read as 0 elements of an empty file.
            std::uint64_t n = 1;
            for (std::size_t d : *s)
                if (__builtin_mul_overflow(n, static_cast<std::uint64_t>(d), &n) || n > (std::uint64_t{1} << 60))
                    throw UsageError(fmt::format("--shape {}: more elements than any file holds", o->shape));
            raw_in.shape = *s;
        }
        const int scale_options = !o->scale.empty() + !o->scale_inv.empty() + !o->scales.empty();
        if (scale_options > 1) throw UsageError("give at most one of --scale, --scale-inv and --scales");
        if (!o->scales.empty() && o->block.empty())
            throw UsageError(fmt::format("--scales needs --block ({})", block_layout_names(false)));
        if (o->scales.empty() && !o->block.empty()) throw UsageError("--block needs --scales FILE");
        if (o->scales_are != "scale_inv" && o->scales_are != "scale")
            throw UsageError(fmt::format("--scales-are: '{}' (choose scale_inv or scale)", o->scales_are));
        parse_named(parse_scale_type, o->scales_dtype, "--scales-dtype");
        const ScaleOrder order = parse_named(parse_scale_order, o->scales_layout, "--scales-layout");
        if (o->scales.empty() && (order != ScaleOrder::row_major || !o->global_scale.empty()))
            throw UsageError("--scales-layout and --global-scale need --scales FILE");
        if (!o->global_scale.empty() && o->scales_dtype != "e4m3")
            throw UsageError("--global-scale needs --scales-dtype e4m3 (NVFP4's E4M3 block scales)");
        const float global = o->global_scale.empty() ? 1.0f : parse_scale(o->global_scale, "--global-scale");

        // 1. Everything that needs no data, before any is read: the input's and output's types
        //    and shapes from their headers, the options, and the scales' count. A wrong --output
        //    must not wait for a huge --input to load.
        const ArrayFile in_head = open_array(o->input, raw_in, false);
        const auto from = as_wide(in_head.type);
        if (!from)
            throw UsageError(
                fmt::format("{}: wrong dtype: the input must be f64, f32, f16 or bf16, got one-byte codes", o->input));
        const Policy policy = o->policy.resolve(to, *from);
        if (policy.rounding == Rounding::stochastic)
            throw UsageError("--round stochastic: validate needs a deterministic reference; choose another rounding");

        if (o->packed && to != Format::e2m1)
            throw UsageError(fmt::format("--packed: only E2M1 codes are packed two per byte, --to is {}", name(to)));
        // Packed E2M1: the output's last dimension is half the input's.
        std::vector<std::size_t> out_shape = raw_in.shape.empty() ? in_head.shape : raw_in.shape;
        const std::size_t in_cols = in_head.shape.empty() ? 1 : in_head.shape.back();
        if (o->packed) {
            if (in_cols % 2 != 0)
                throw UsageError(fmt::format(
                    "--packed: {} has rows of {} elements, which cannot be packed two per byte", o->input, in_cols));
            if (out_shape.empty()) out_shape = {1};
            out_shape.back() /= 2;
        }
        RawLayout raw_out{ElementType::u8, out_shape};
        const ArrayFile out_head = open_array(o->output, raw_out, false);
        if (out_head.type != ElementType::u8)
            throw UsageError(fmt::format("{}: wrong dtype: FP8 codes must be one byte per element (|u1 or V1), got {}",
                                         o->output, name(out_head.type)));
        // A safetensors F8_* dtype says which format its codes are in: a different --to would
        // report every code as a mismatch instead of naming the mistake.
        if (out_head.codes_format && *out_head.codes_format != to)
            throw UsageError(
                fmt::format("{}: holds {} codes, but --to is {}", o->output, name(*out_head.codes_format), name(to)));
        if (o->packed ? out_head.shape != out_shape : out_head.shape != in_head.shape)
            throw UsageError(
                fmt::format("shape mismatch: {} is {}, {} is {}{}", o->input, shape_text(in_head.shape), o->output,
                            shape_text(out_head.shape),
                            o->packed ? fmt::format(" (packed: {} expected)", shape_text(out_shape)) : ""));
        // Nothing compared is not "bit-exact": an empty input (or a zero in --shape) is refused.
        if (numel(in_head.shape) == 0)
            throw UsageError(fmt::format("{}: no elements to compare (shape {})", o->input, shape_text(in_head.shape)));

        ScaleMode mode = ScaleMode::none;
        float scale_value = 0;
        BlockLayout layout = BlockLayout::tensor;
        RawLayout raw_scales{o->scales_dtype == "f32" ? ElementType::f32 : ElementType::u8, {}};
        ScaleType scale_type = ScaleType::f32;
        const std::size_t cols = in_head.shape.empty() ? 1 : in_head.shape.back();
        const std::size_t rows = cols ? static_cast<std::size_t>(numel(in_head.shape)) / cols : 0;
        if (!o->scale.empty()) {
            mode = ScaleMode::scale;
            scale_value = parse_scale(o->scale, "--scale");
        } else if (!o->scale_inv.empty()) {
            mode = ScaleMode::scale_inv;
            scale_value = parse_scale(o->scale_inv, "--scale-inv");
        } else if (!o->scales.empty()) {
            mode = o->scales_are == "scale" ? ScaleMode::scale : ScaleMode::scale_inv;
            layout =
                parse_named([](const std::string& b) { return parse_block_layout(b, false); }, o->block, "--block");
            const ArrayFile sh = open_array(o->scales, raw_scales, false);
            if (sh.type != ElementType::u8 && sh.type != ElementType::f32)
                throw UsageError(fmt::format("{}: wrong dtype: scales must be float32, E8M0 or E4M3 bytes, got {}",
                                             o->scales, name(sh.type)));
            // One-byte scales: E8M0 unless --scales-dtype e4m3 (or a safetensors F8_E4M3 tensor).
            const bool e4m3 = o->scales_dtype == "e4m3" || (sh.codes_format && *sh.codes_format == Format::e4m3);
            if (sh.type == ElementType::f32 && o->scales_dtype != "f32")
                throw UsageError(
                    fmt::format("{}: holds float32 scales, but --scales-dtype is {}", o->scales, o->scales_dtype));
            if (sh.type == ElementType::u8) scale_type = e4m3 ? ScaleType::e4m3 : ScaleType::e8m0;
            if (sh.codes_format && *sh.codes_format != Format::e8m0 && *sh.codes_format != Format::e4m3)
                throw UsageError(fmt::format("{}: holds {} codes; one-byte scales are E8M0 or E4M3 codes", o->scales,
                                             name(*sh.codes_format)));
            if (sh.codes_format && *sh.codes_format == Format::e8m0 && o->scales_dtype == "e4m3")
                throw UsageError(fmt::format("{}: holds E8M0 codes, but --scales-dtype is e4m3", o->scales));
            if (!o->global_scale.empty() && scale_type != ScaleType::e4m3)
                throw UsageError(
                    fmt::format("--global-scale: {} holds {} scales, not E4M3", o->scales, name(scale_type)));
            std::size_t want = 0;
            try {
                want = stored_scale_count(layout, rows, cols, order);
            } catch (const std::invalid_argument& e) {
                throw UsageError(fmt::format("--scales-layout {}: {}", o->scales_layout, e.what()));
            }
            if (numel(sh.shape) != want)
                throw UsageError(fmt::format(
                    "{}: wrong size: {} blocks of a {} x {} input need {} scales{}, the file has {}", o->scales,
                    o->block, rows, cols, want,
                    order == ScaleOrder::row_major ? "" : fmt::format(" ({})", o->scales_layout), numel(sh.shape)));
        }

        // 2. The data, mapped where it lies in the file as stored: validate reads each element
        //    once, and under mpirun each rank only its own blocks' (plus the policy probes and
        //    the examples), so neither is held whole per rank (docs/mpi.md).
        const ArrayFile in = open_array(o->input, raw_in, true, true);
        const ArrayFile out = open_array(o->output, raw_out, true, true);
        if (in.type != in_head.type || in.shape != in_head.shape || out.type != out_head.type ||
            out.shape != out_head.shape)
            throw UsageError(fmt::format("{} or {} changed while it was read", o->input, o->output));

        std::vector<std::uint8_t> unpacked;  // --packed: one code per byte
        if (o->packed) {
            try {
                unpacked = unpack_fp4_codes(out.bytes(), out.size(), rows, cols);
            } catch (const std::invalid_argument& e) {
                throw UsageError(fmt::format("{}: {}", o->output, e.what()));
            }
        }
        ValidateRequest rq{*from, in.bytes(), o->packed ? unpacked.data() : out.bytes(), in.size(), to, policy, {}};
        std::vector<float> block_scales;
        rq.scaling.mode = mode;
        if (mode != ScaleMode::none && o->scales.empty()) rq.scaling.value = scale_value;
        if (!o->scales.empty()) {
            rq.scaling.layout = layout;
            const ArrayFile sf = load(o->scales, raw_scales);
            StoredScales st;
            st.data = sf.data.data();
            st.count = sf.size();
            st.type = sf.type == ElementType::u8 ? scale_type : ScaleType::f32;
            st.order = order;
            st.global = global;
            try {  // E8M0 decodes exactly; E4M3 combines with --global-scale (validate.hpp)
                block_scales = block_scale_values(st, layout, rows, cols, mode);
            } catch (const std::invalid_argument& e) {
                throw UsageError(fmt::format("{}: {} (changed while it was read?)", o->scales, e.what()));
            }
            rq.scaling.blocks = block_scales.data();
            rq.scaling.block_count = block_scales.size();
            rq.scaling.rows = rows;
            rq.scaling.cols = cols;
        }

        ValidateOptions vo;
        vo.examples = o->examples;
        // Progress on rank 0's stderr (under mpirun: rank 0's share of the blocks).
        const std::size_t blocks = (rq.n + 65535) >> 16;  // validate's blocks of 2^16 elements
        Progress bar(progress_on(cluster::world().root(), o->quiet, o->progress), blocks, "blocks of 65536 elements");
        if (bar.on())  // rank 0's share, drawn on the whole bar
            vo.progress = [&bar, blocks](std::uint64_t done, std::uint64_t total) {
                bar.update(static_cast<std::size_t>(done * blocks / std::max<std::uint64_t>(total, 1)));
            };
        // Under mpirun the ranks share the comparison; rank 0 alone writes the report.
        auto split = cluster::validate(cluster::world(), rq, vo);
        bar.done();
        if (!split) return;
        ValidateReport& r = *split;
        r.shape.assign(in.shape.begin(), in.shape.end());  // positions as multi-dimensional indices
        if (o->json) {
            fmt::print("{}\n", r.json());
        } else {
            fmt::print("validate {} against {}\n{}", o->output, o->input, r.summary());
        }
        exit_status() = r.exact() ? 0 : 1;
    });
});

}  // namespace
}  // namespace fp8kit::cli
