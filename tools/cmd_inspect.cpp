// fp8kit inspect: what an FP8 recipe would do to every tensor of a dump (HDF5, safetensors).
#include <deque>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <set>
#include <type_traits>
#include <variant>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "device_flag.hpp"
#include "read_flags.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/analysis/inspect.hpp"
#include "fp8kit/cluster/inspect.hpp"
#include "fp8kit/io/json_number.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/stats/fields.hpp"
#include "fp8kit/validate.hpp"
#include "fp8kit/io/sink.hpp"
#include "terminal.hpp"

namespace fp8kit::cli {
namespace {

using io::csv_field;

namespace dp = fp8kit::dump;

struct InspectOpts {
    std::vector<std::string> files, include, exclude, roles;
    std::string recipe = "te-current", format = "auto", steps;
    bool json = false, csv = false, quiet = false, wide = false, progress = false;
    DeviceFlags device;
};

struct Row {
    const dp::TensorInfo* t;
    inspect::Result r;
    double pct(std::uint64_t n) const { return 100.0 * static_cast<double>(n) / static_cast<double>(r.stats.numel); }
    double under() const { return pct(r.stats.underflow); }
    double sub() const { return pct(r.stats.subnormal); }
    double over() const { return pct(r.stats.overflow); }
};
// A deque: rows are added one per tensor and never move (a vector's doubling copies every row,
// 2.4 KB each with the exponent histogram: 10^5 tensors peaked at three times the rows).
using Rows = std::deque<Row>;

// Non-finite numbers as every report writes them (io/json_number.hpp).
nlohmann::ordered_json num(double v) { return io::json_number<nlohmann::ordered_json>(v); }
std::string text(double v) { return std::isfinite(v) ? exact(v) : io::nonfinite_word(v); }

// One row of a statistics type's field table (stats/fields.hpp).
void put(nlohmann::ordered_json& j, const StatField& f) {
    std::visit(
        [&](auto v) {
            if constexpr (std::is_same_v<decltype(v), double>)
                j[std::string(f.key)] = num(v);
            else
                j[std::string(f.key)] = v;
        },
        f.value);
}

std::string short_role(const dp::TensorInfo& t) {
    std::string s;
    switch (t.role) {
        case dp::Role::activation: s = "act"; break;
        case dp::Role::weight: s = "weight"; break;
        case dp::Role::gradient: s = "grad"; break;
        case dp::Role::optimizer_state: s = "optim"; break;
        case dp::Role::unknown: s = "?"; break;
    }
    return t.role_guessed ? s + "*" : s;
}

std::string pct_text(double p) {
    if (p == 0.0) return "0";
    if (p < 0.005) return "<0.01";
    return fmt::format("{:.2f}", p);
}

std::string sqnr_text(double db) {
    if (std::isnan(db)) return "-";
    if (std::isinf(db)) return db > 0 ? "exact" : "-inf";
    return fmt::format("{:.1f}", db);
}

// The exponent histogram of the scaled values (docs/statistics.md), sparse: the count of
// floor(log2|x*scale|) = e under the key "e" for every e that occurs, and the zero and non-finite
// bins by name.
nlohmann::ordered_json exp_hist_json(const QuantStats& s) {
    nlohmann::ordered_json bins = nlohmann::ordered_json::object();
    for (std::size_t b = kExpHistZeroBin + 1; b < kExpHistNonfiniteBin; ++b)
        if (s.exp_hist[b]) bins[std::to_string(exp_hist_exponent(b))] = s.exp_hist[b];
    return {{"zero", s.exp_hist[kExpHistZeroBin]}, {"nonfinite", s.exp_hist[kExpHistNonfiniteBin]}, {"log2", bins}};
}

nlohmann::ordered_json tensor_json(const Row& row, const std::string& recipe) {
    const auto& t = *row.t;
    const auto& r = row.r;
    const auto& s = r.stats;
    nlohmann::ordered_json j;
    j["file"] = t.file;
    j["name"] = t.name;
    j["step"] = t.step ? nlohmann::ordered_json(*t.step) : nlohmann::ordered_json(nullptr);
    j["step_guessed"] = t.step_guessed;
    j["role"] = std::string(dp::name(t.role));
    j["role_guessed"] = t.role_guessed;
    j["dtype"] = std::string(dp::name(t.dtype));
    j["storage"] = t.storage;
    j["shape"] = t.shape;
    j["recipe"] = recipe;
    j["recipe_role"] = std::string(slot_name(r.role));
    j["format"] = std::string(name(r.format));
    for (const auto& f : quant_stats_fields(s)) put(j, f);
    j["underflow_pct"] = num(row.under());
    j["subnormal_pct"] = num(row.sub());
    j["overflow_pct"] = num(row.over());
    if (r.blocks) {
        j["scale"] = nullptr;
        j["scale_inv"] = nullptr;
        for (const auto& f : block_stats_fields(*r.blocks)) put(j, f);
    } else {
        j["scale"] = num(r.scale.scale);
        j["scale_inv"] = num(r.scale.scale_inv);
    }
    j["exp_hist"] = exp_hist_json(s);
    return j;
}

// The JSON fields that the CSV carries in its key columns, not as statistics.
const std::set<std::string> kCsvKeyFields = {"file",  "name",    "step",   "step_guessed", "role",  "role_guessed",
                                             "dtype", "storage", "recipe", "recipe_role",  "format"};

// Long form: one line per tensor and statistic, for pandas (pivot on `stat`).
void write_csv(const Rows& rows, const std::string& recipe) {
    std::printf("file,name,step,role,dtype,format,stat,value\n");
    for (const auto& row : rows) {
        const nlohmann::ordered_json j = tensor_json(row, recipe);
        const std::string key = fmt::format("{},{},{},{},{},{}", csv_field(row.t->file), csv_field(row.t->name),
                                            row.t->step ? std::to_string(*row.t->step) : "", dp::name(row.t->role),
                                            dp::name(row.t->dtype), name(row.r.format));
        // Every scalar field of the JSON form, in its order.
        for (const auto& [stat, v] : j.items()) {
            if (kCsvKeyFields.count(stat) || v.is_null() || v.is_structured()) continue;
            std::string value = v.is_string()         ? v.get<std::string>()
                                : v.is_number_float() ? text(v.get<double>())
                                                      : v.dump();
            // fmt, not printf("%s"): a name may hold a NUL byte, and %s would cut it there.
            fmt::print("{},{},{}\n", key, stat, value);
        }
        // The exponent histogram: exp_hist_zero, exp_hist_nonfinite and exp_hist_<e> for each
        // exponent e that occurs (pivot and sort on the number after the last '_').
        const auto& st = row.r.stats;
        fmt::print("{},exp_hist_zero,{}\n", key, st.exp_hist[kExpHistZeroBin]);
        fmt::print("{},exp_hist_nonfinite,{}\n", key, st.exp_hist[kExpHistNonfiniteBin]);
        for (std::size_t b = kExpHistZeroBin + 1; b < kExpHistNonfiniteBin; ++b)
            if (st.exp_hist[b]) fmt::print("{},exp_hist_{},{}\n", key, exp_hist_exponent(b), st.exp_hist[b]);
    }
}

// TransformerEngine DumpTensors files holding both entries: TE's codes against the reference.
std::vector<TeQuantizedCheck> check_te_files(const dp::Dump& dump, std::vector<dp::Problem>& errors) {
    std::vector<TeQuantizedCheck> out;
    std::string last;
    for (const auto& t : dump.tensors()) {
        const std::string_view q = "/quantized";
        if (t.file == last || t.name.size() < q.size() || t.name.compare(t.name.size() - q.size(), q.size(), q) != 0)
            continue;
        last = t.file;
        try {
            if (auto c = check_te_quantized(t.file)) out.push_back(std::move(*c));
        } catch (const dp::DumpError& e) {
            errors.push_back({e.file, e.name, e.message});
        }
    }
    return out;
}

std::string te_classes(const ValidateReport& r) {
    std::vector<std::string> parts;
    for (MismatchClass c : kAllMismatchClasses)
        if (r[c].count) parts.push_back(fmt::format("{} {}", name(c), r[c].count));
    return fmt::format("{}", fmt::join(parts, ", "));
}

void write_te_terminal(const std::vector<TeQuantizedCheck>& checks) {
    if (checks.empty()) return;
    fmt::print("\nTransformerEngine quantized vs fp8kit reference (TE's scale_inv, profile cuda-satfinite):\n");
    for (const auto& c : checks) {
        const auto& r = c.report;
        if (c.kind == "NVFP4Tensor")
            fmt::print(
                "  {} ({}): NVFP4Tensor e2m1, amax {}{}, {} of {} E4M3 block scales differ from the reference's{}: ",
                io::printable(c.name), io::printable(c.file), c.scale_inv, c.amax_matches ? "" : " (not max |x|)",
                c.scale_mismatches, c.scale_blocks, c.swizzled ? " (GEMM-swizzled)" : "");
        else if (c.layout == BlockLayout::tensor)
            fmt::print("  {} ({}): {}, scale_inv {}: ", io::printable(c.name), io::printable(c.file), name(c.format),
                       c.scale_inv);
        else
            fmt::print("  {} ({}): {} {}, {} block scale_inv{}: ", io::printable(c.name), io::printable(c.file), c.kind,
                       name(c.format), name(c.layout), c.swizzled ? " (GEMM-swizzled)" : "");
        if (r.exact()) {
            fmt::print("bit-exact, {} codes\n", r.total);
            continue;
        }
        std::uint64_t first = ~std::uint64_t(0);
        for (const auto& cl : r.classes)
            for (const auto& e : cl.examples) first = std::min(first, e.index);
        fmt::print("{} of {} codes differ ({}); first at {}\n", r.mismatches, r.total, te_classes(r),
                   r.position(first));
    }
}

void write_json(const Rows& rows, const inspect::Options& opts, const InspectOpts& o, const dp::Dump& dump,
                const std::vector<dp::Problem>& errors, const std::vector<TeQuantizedCheck>& te_checks) {
    // The tensors are written one at a time into the document's place for them (memory: the
    // rows, not a JSON tree of every tensor), in exactly the layout dump(1) gives the whole.
    static const char* kTensors = "\x01fp8kit tensors\x01";
    nlohmann::ordered_json out;
    out["recipe"] = opts.recipe.name;
    out["format"] = o.format;
    out["tensors"] = kTensors;
    auto problems = [](const std::vector<dp::Problem>& ps) {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (const auto& p : ps) a.push_back({{"file", p.file}, {"name", p.name}, {"message", p.message}});
        return a;
    };
    out["errors"] = problems(errors);
    out["skipped"] = problems(dump.notes());
    out["summary"] = {{"tensors", rows.size()}, {"failed", errors.size()}, {"skipped", dump.notes().size()}};
    if (!te_checks.empty()) {
        auto& a = out["te_quantized"] = nlohmann::ordered_json::array();
        for (const auto& c : te_checks)
            a.push_back({{"file", c.file},
                         {"name", c.name},
                         {"format", std::string(name(c.format))},
                         {"scale_inv", c.scale_inv},
                         {"codes", c.report.total},
                         {"mismatches", c.report.mismatches},
                         {"bit_exact", c.report.exact()},
                         {"classes", te_classes(c.report)}});
    }
    // Names and messages come from the files: bytes that are not UTF-8 become U+FFFD.
    auto text_of = [](const nlohmann::ordered_json& j) {
        return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    };
    const std::string doc = text_of(out), mark = text_of(nlohmann::ordered_json(kTensors));
    const std::size_t at = doc.find(mark);  // the first: "tensors" precedes names from files
    fmt::print("{}", std::string_view(doc).substr(0, at));
    if (rows.empty()) fmt::print("[]");
    for (std::size_t i = 0; i < rows.size(); ++i) {
        std::string t = text_of(tensor_json(rows[i], opts.recipe.name));
        for (std::size_t nl = t.find('\n'); nl != std::string::npos; nl = t.find('\n', nl + 3)) t.insert(nl + 1, "  ");
        fmt::print("{}  {}", i == 0 ? "[\n" : ",\n", t);
    }
    if (!rows.empty()) fmt::print("\n ]");
    fmt::print("{}\n", std::string_view(doc).substr(at + mark.size()));
}

// "tensor" or "file: tensor" when the run read several files; whole, escaped for the terminal.
std::string where(const dp::TensorInfo& t, bool multi_file) {
    return multi_file ? io::printable(t.file) + ": " + io::printable(t.name) : io::printable(t.name);
}

// The five worst tensors by `metric`: largest positive values, or lowest finite ones.
void write_worst(const Rows& rows, const char* title, const std::function<double(const Row&)>& metric, bool lowest,
                 bool multi_file) {
    std::vector<const Row*> v;
    for (const auto& r : rows) {
        const double m = metric(r);
        if (lowest ? std::isfinite(m) : m > 0) v.push_back(&r);
    }
    if (v.empty()) return;
    std::stable_sort(v.begin(), v.end(), [&](const Row* a, const Row* b) {
        return lowest ? metric(*a) < metric(*b) : metric(*a) > metric(*b);
    });
    fmt::print("{}\n", title);
    for (std::size_t i = 0; i < std::min<std::size_t>(5, v.size()); ++i) {
        const double m = metric(*v[i]);
        const std::string val = lowest ? sqnr_text(m) + " dB" : pct_text(m) + "%";
        const auto& t = *v[i]->t;
        const std::string step = t.step ? fmt::format(" (step {}{})", *t.step, t.step_guessed ? "*" : "") : "";
        fmt::print("  {:>9}  {:<4}  {}{}\n", val, name(v[i]->r.format), where(t, multi_file), step);
    }
}

// "activations e4m3, weights e4m3, gradients e5m2": what the recipe (or --format) casts each role to.
std::string formats_by_role(const inspect::Options& opts) {
    if (opts.format) return fmt::format("{} for every tensor (--format)", name(*opts.format));
    const auto& r = opts.recipe;
    return fmt::format("activations {}, weights {}, gradients {}", name(r.input.format), name(r.weight.format),
                       name(r.grad.format));
}

// One line per tensor, grouped under its parent path. The leaf column is as wide as the longest
// leaf, within the width of the terminal (the other columns take kFixed); a longer leaf is written
// whole and its row goes on below it (name_cell).
void write_table(const Rows& rows, const dp::Dump& dump, std::size_t width) {
    constexpr std::size_t kFixed = 76, kMinName = 18;  // kFixed: the columns after the name
    auto split = [](const std::string& n) {
        const auto slash = n.find_last_of('/');
        return slash == std::string::npos
                   ? std::pair<std::string, std::string>{"", n}
                   : std::pair<std::string, std::string>{n.substr(0, slash), n.substr(slash + 1)};
    };
    std::size_t leaf_w = kMinName;
    for (const auto& row : rows) leaf_w = std::max(leaf_w, io::printable(split(row.t->name).second).size());
    if (width) leaf_w = std::min(leaf_w, std::max(kMinName, width > kFixed ? width - kFixed : 0));
    fmt::print("\n{:<{}} {:>7} {:<7} {:<4} {:<4} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6}\n", "tensor", leaf_w + 2, "step",
               "role", "type", "fmt", "numel", "amax", "undr%", "subn%", "ovfl%", "SQNR");
    std::string group;
    for (const auto& row : rows) {
        const auto& t = *row.t;
        const auto [parent, leaf] = split(t.name);
        const std::string g = dump.files_opened() > 1 ? t.file + ": " + parent : parent;
        if (g != group || &row == &rows.front()) {
            group = g;
            fmt::print("{}\n", io::printable(g.empty() ? "/" : g));
        }
        const std::string step = t.step ? std::to_string(*t.step) + (t.step_guessed ? "*" : "") : "-";
        fmt::print("  {} {:>7} {:<7} {:<4} {:<4} {:>9} {:>9} {:>6} {:>6} {:>6} {:>6}\n", io::name_cell(leaf, leaf_w, 2),
                   step, short_role(t), dp::name(t.dtype), name(row.r.format), row.r.stats.numel,
                   fmt::format("{:.3g}", row.r.stats.amax), pct_text(row.under()), pct_text(row.sub()),
                   pct_text(row.over()), sqnr_text(row.r.stats.sqnr_db()));
    }
}

constexpr std::size_t kNotesShown = 5;

void write_notes(const dp::Dump& dump) {
    const auto& notes = dump.notes();
    for (std::size_t i = 0; i < std::min(kNotesShown, notes.size()); ++i)
        fmt::print("  skipped {}\n", io::printable(notes[i].describe()));
    if (notes.size() > kNotesShown)
        fmt::print("  ... and {} more skipped (--json lists every one)\n", notes.size() - kNotesShown);
}

void write_terminal(const Rows& rows, const inspect::Options& opts, const InspectOpts& o, const dp::Dump& dump,
                    const std::vector<dp::Problem>& errors) {
    std::uint64_t elements = 0;
    std::size_t with_over = 0, with_under = 0, with_nonfinite = 0;
    for (const auto& r : rows) {
        elements += r.r.stats.numel;
        with_over += r.r.stats.overflow > 0;
        with_under += r.r.stats.underflow > 0;
        with_nonfinite += r.r.stats.nan + r.r.stats.inf > 0;
    }
    const bool multi = dump.files_opened() > 1;
    const std::size_t width = o.wide ? 0 : output_width();
    fmt::print("fp8kit inspect: {} tensors, {} elements, from {} file(s)\n", rows.size(), elements,
               dump.files_opened());
    fmt::print("  recipe {}: {}\n", io::printable(opts.recipe.name), formats_by_role(opts));
    fmt::print("  with overflow: {}   with underflow: {}   with NaN/Inf: {}   failed: {}   skipped: {}\n", with_over,
               with_under, with_nonfinite, errors.size(), dump.notes().size());
    write_notes(dump);
    if (!rows.empty()) fmt::print("\n");
    write_worst(
        rows, "worst overflow (share of elements past the format's max):", [](const Row& r) { return r.over(); }, false,
        multi);
    write_worst(
        rows, "worst underflow (share of elements, nonzero, that become zero):", [](const Row& r) { return r.under(); },
        false, multi);
    write_worst(
        rows, "most subnormal (share of elements cast to subnormal codes):", [](const Row& r) { return r.sub(); },
        false, multi);
    write_worst(
        rows, "lowest SQNR (signal to quantisation noise):", [](const Row& r) { return r.r.stats.sqnr_db(); }, true,
        multi);
    if (rows.empty()) return;
    write_table(rows, dump, width);
    fmt::print(
        "\nrole*, step* = guessed from the name (a step also from the file or folder name)\n"
        "undr% = nonzero values that become 0; SQNR in dB (exact: no error)\n");
}

// --include/--exclude/--steps left nothing: say so, with a few names that do exist.
std::string nothing_matched(const InspectOpts& o, const dp::Dump& dump) {
    std::vector<std::string> filters;
    for (const auto& p : o.include) filters.push_back("--include '" + p + "'");
    for (const auto& p : o.exclude) filters.push_back("--exclude '" + p + "'");
    if (!o.steps.empty()) filters.push_back("--steps " + o.steps);
    std::string names;
    for (const auto& n : dump.unselected_sample()) names += (names.empty() ? "" : ", ") + io::quoted(n, 120);
    return fmt::format("no tensor matches {}: the input has {} tensor(s), e.g. {}{}", fmt::join(filters, " "),
                       dump.unselected(), names, dump.unselected() > dump.unselected_sample().size() ? ", ..." : "");
}

Register reg([](CLI::App& root) {
    // Owned by the callback (so by the app): the options bind to its members.
    auto o = std::make_shared<InspectOpts>();
    auto* cmd = root.add_subcommand(
        "inspect",
        "What FP8 would do to the tensors of a dump: per tensor and step, amax, scale, overflow,\n"
        "underflow, subnormal share and SQNR under a scaling recipe.\n"
        "Reads HDF5 (any group layout; float64/32/16, bfloat16 as uint16 or opaque with a 'dtype'\n"
        "attribute or as h5py saves ml_dtypes.bfloat16, FP8 as uint8/opaque with a 'dtype' attribute)\n"
        "and safetensors, and TransformerEngine DumpTensors .pt files (torch.save; read without running\n"
        "any pickle: both entries are listed, and TE's FP8 codes are compared with fp8kit's reference).\n"
        "Step and role come from\n"
        "'step'/'role' attributes (safetensors: __metadata__ \"role:NAME\"), --role, or are guessed from\n"
        "names, file and folder names (shown with *; biases and norm parameters count as weights).\n"
        "Only regular files are read. Names fit the terminal (layer index and tail kept; --wide: whole).\n"
        "Exit status: 0 when every input was analysed, 1 when some input failed (each failure is\n"
        "named on stderr; the others are still reported), 2 for bad arguments, filters that match\n"
        "nothing, or output that could not be written.");
    cmd->add_option("FILE", o->files, "Dump files or quoted glob patterns ('dumps/*.h5')")->required();
    cmd->add_option("--recipe", o->recipe,
                    "Scaling recipe: a current-scaling preset or a JSON recipe file (default te-current: "
                    "scale = fl32(fmax / amax) per tensor)");
    cmd->add_option("--format", o->format,
                    "auto (the recipe's format per role: e4m3 for activations and weights, e5m2 for "
                    "gradients), or one 8-bit format for every tensor: " +
                        format_choices());
    auto* json = cmd->add_flag("--json", o->json, "Machine-readable output (non-finite numbers as \"inf\"/\"nan\")");
    cmd->add_flag("--csv", o->csv, "Long-form CSV: file,name,step,role,dtype,format,stat,value")->excludes(json);
    // One pattern per occurrence, so patterns never swallow the FILE arguments after them.
    cmd->add_option("--include", o->include, "Only tensors whose name matches this glob pattern (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--exclude", o->exclude, "Skip tensors whose name matches this glob pattern (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--role", o->roles,
                    "PATTERN=ROLE: tensors whose name matches the glob PATTERN have role ROLE (activation, weight, "
                    "gradient, optimizer_state); repeatable, the first match wins, over attributes and guesses")
        ->allow_extra_args(false);
    cmd->add_option("--steps", o->steps, "Only these steps, e.g. 0-100,200,300-");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
    cmd->add_flag("--progress", o->progress,
                  "The progress bar on stderr even when it is not a terminal (under mpirun: rank 0's)");
    add_read_flags(cmd);
    add_device_flags(cmd, o->device,
                     "cuda: the per-tensor statistics of tensors of f32, f16 or bf16 run on the GPU (a copy "
                     "and one kernel pass each); amax, reading and block recipes stay on the CPU.");
    cmd->add_flag("--wide", o->wide,
                  "Name column as wide as the longest name (default: within the terminal's width; a longer name is "
                  "written whole and its row continues on the next line; a file or pipe gets one line per row)");
    cmd->callback([o] {
        inspect::Options opts;
        try {
            opts.recipe = parse_recipe(o->recipe);
            inspect::check_recipe(opts.recipe);
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--recipe {}: {}", o->recipe, e.what()));
        }
        if (o->format != "auto") opts.format = require_format(o->format, "--format");
        opts.device = resolve_device(o->device, "inspect");
        dp::Selection sel;
        sel.include = o->include;
        sel.exclude = o->exclude;
        for (const auto& r : o->roles) {
            const auto eq = r.rfind('=');
            const auto role = eq == std::string::npos ? std::nullopt : dp::parse_role(r.substr(eq + 1));
            if (!role || eq == 0)
                throw UsageError(
                    fmt::format("--role '{}': expected PATTERN=ROLE with ROLE activation, weight, gradient "
                                "or optimizer_state",
                                r));
            sel.roles.emplace_back(r.substr(0, eq), *role);
        }
        if (!o->steps.empty()) {
            try {
                sel.steps = dp::parse_steps(o->steps);
            } catch (const std::invalid_argument& e) {
                throw UsageError(e.what());
            }
        }
        std::vector<dp::Problem> errors;
        const auto files = dp::expand_inputs(o->files, errors);
        dp::Dump dump(files, sel, cli_read_options());
        errors.insert(errors.end(), dump.errors().begin(), dump.errors().end());
        if (dump.tensors().empty() && dump.unselected() > 0) throw UsageError(nothing_matched(*o, dump));

        // Under MPI each rank analyses its share of the tensors; rank 0 receives every result in
        // tensor order (lib/src/cluster) and alone writes the report and the progress.
        auto& comm = cluster::world();
        Progress progress(progress_on(comm.root(), o->quiet, o->progress), dump.tensors().size(), "tensors");
        Rows rows;
        cluster::analyse_all(comm, dump, opts, [&](std::size_t i, const inspect::Result* r, std::exception_ptr failed) {
            const auto& t = dump.tensors()[i];
            if (r) rows.push_back({&t, *r});
            try {
                if (failed) std::rethrow_exception(failed);
            } catch (const dp::DumpError& e) {
                errors.push_back({e.file, e.name, e.message});
            } catch (const std::exception& e) {
                errors.push_back({t.file, t.name, e.what()});
            }
            progress.update(i + 1);
        });
        progress.done();
        if (!comm.root()) return;

        const auto te_checks = check_te_files(dump, errors);
        if (o->json)
            write_json(rows, opts, *o, dump, errors, te_checks);
        else if (o->csv)
            write_csv(rows, opts.recipe.name);
        else {
            write_terminal(rows, opts, *o, dump, errors);
            write_te_terminal(te_checks);
        }
        io::flush_stdout();
        for (const auto& p : errors) fmt::print(stderr, "fp8kit: error: {}\n", io::printable(p.describe()));
        if (!errors.empty()) exit_status() = 1;
    });
});

}  // namespace
}  // namespace fp8kit::cli
