// TransformerEngine DumpTensors files holding both entries, high_precision and quantized: TE's
// FP8/FP4 codes checked against fp8kit's reference quantisation (validate.hpp, check_te_quantized).
#include "inspect_te.hpp"

#include <algorithm>
#include <string>
#include <string_view>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "fp8kit/analysis/inspect_report.hpp"
#include "fp8kit/io/printable.hpp"

namespace fp8kit::inspect {
namespace {

// "rounding 3, saturation 1": the mismatch classes that occur, with their counts.
std::string te_classes(const ValidateReport& r) {
    std::vector<std::string> parts;
    for (MismatchClass c : kAllMismatchClasses)
        if (r[c].count) parts.push_back(fmt::format("{} {}", name(c), r[c].count));
    return fmt::format("{}", fmt::join(parts, ", "));
}

// "name (file): what TE stored: " before the verdict.
void write_te_subject(const TeQuantizedCheck& c, std::FILE* out) {
    if (c.kind == "NVFP4Tensor")
        fmt::print(out,
                   "  {} ({}): NVFP4Tensor e2m1, amax {}{}, {} of {} E4M3 block scales differ from the reference's{}: ",
                   io::printable(c.name), io::printable(c.file), c.scale_inv, c.amax_matches ? "" : " (not max |x|)",
                   c.scale_mismatches, c.scale_blocks, c.swizzled ? " (GEMM-swizzled)" : "");
    else if (c.layout == BlockLayout::tensor)
        fmt::print(out, "  {} ({}): {}, scale_inv {}: ", io::printable(c.name), io::printable(c.file), name(c.format),
                   c.scale_inv);
    else if (c.scale_blocks)
        fmt::print(out, "  {} ({}): {} {}, {} block scale_inv{}, {} of {} differ from the reference's: ",
                   io::printable(c.name), io::printable(c.file), c.kind, name(c.format), name(c.layout),
                   c.swizzled ? " (GEMM-swizzled)" : "", c.scale_mismatches, c.scale_blocks);
    else
        fmt::print(out, "  {} ({}): {} {}, {} block scale_inv{}: ", io::printable(c.name), io::printable(c.file),
                   c.kind, name(c.format), name(c.layout), c.swizzled ? " (GEMM-swizzled)" : "");
}

}  // namespace

void check_te_files(Report& r) {
    std::string last;
    for (const auto& t : r.dump->tensors()) {
        // "{name}/quantized", or "{name}/quantized/columnwise" when only the column-wise copy is held
        if (t.file == last || t.name.find("/quantized") == std::string::npos) continue;
        last = t.file;
        try {
            if (auto c = check_te_quantized(t.file)) r.te_checks.push_back(std::move(*c));
        } catch (const dump::DumpError& e) {
            r.errors.push_back({e.file, e.name, e.message});
        }
        try {
            if (auto c = check_te_quantized_columnwise(t.file)) r.te_checks.push_back(std::move(*c));
        } catch (const dump::DumpError& e) {
            r.errors.push_back({e.file, e.name, e.message});
        }
    }
}

nlohmann::ordered_json te_checks_json(const std::vector<TeQuantizedCheck>& checks) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& c : checks)
        a.push_back({{"file", c.file},
                     {"name", c.name},
                     {"format", std::string(name(c.format))},
                     {"scale_inv", c.scale_inv},
                     {"codes", c.report.total},
                     {"mismatches", c.report.mismatches},
                     {"bit_exact", c.report.exact()},
                     {"classes", te_classes(c.report)},
                     {"scale_blocks", c.scale_blocks},
                     {"scale_mismatches", c.scale_mismatches}});
    return a;
}

void write_te_text(const std::vector<TeQuantizedCheck>& checks, std::FILE* out) {
    if (checks.empty()) return;
    fmt::print(out, "\nTransformerEngine quantized vs fp8kit reference (TE's scale_inv, profile cuda-satfinite):\n");
    for (const auto& c : checks) {
        const auto& r = c.report;
        write_te_subject(c, out);
        if (r.exact()) {
            fmt::print(out, "bit-exact, {} codes\n", r.total);
            continue;
        }
        std::uint64_t first = ~std::uint64_t(0);
        for (const auto& cl : r.classes)
            for (const auto& e : cl.examples) first = std::min(first, e.index);
        fmt::print(out, "{} of {} codes differ ({}); first at {}\n", r.mismatches, r.total, te_classes(r),
                   r.position(first));
    }
}

}  // namespace fp8kit::inspect
