// fp8kit inspect: what an FP8 recipe would do to every tensor of a dump (HDF5, safetensors).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/io/dump.hpp"
#include "fp8kit/analysis/inspect.hpp"

namespace fp8kit::cli {
namespace {

namespace dp = fp8kit::dump;

struct InspectOpts {
    std::vector<std::string> files, include, exclude;
    std::string recipe = "te-current", format = "auto", steps;
    bool json = false, csv = false, quiet = false;
};

struct Row {
    const dp::TensorInfo* t;
    inspect::Result r;
    double pct(std::uint64_t n) const { return 100.0 * static_cast<double>(n) / static_cast<double>(r.stats.numel); }
    double under() const { return pct(r.stats.underflow); }
    double sub() const { return pct(r.stats.subnormal); }
    double over() const { return pct(r.stats.overflow); }
};

// JSON has no Inf/NaN: they are written as the strings "inf", "-inf", "nan".
nlohmann::ordered_json num(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
}
std::string text(double v) {
    if (std::isnan(v)) return "nan";
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return exact(v);
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

// The last `width` characters, marked with "..." when cut.
std::string tail(const std::string& s, std::size_t width) {
    if (s.size() <= width) return s;
    return "..." + s.substr(s.size() - (width - 3));
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
    j["numel"] = s.numel;
    j["amax"] = num(s.amax);
    j["min_nonzero"] = num(s.min_nonzero);
    j["zeros"] = s.zeros;
    j["nan"] = s.nan;
    j["inf"] = s.inf;
    j["underflow"] = s.underflow;
    j["subnormal"] = s.subnormal;
    j["overflow"] = s.overflow;
    j["te_underflow"] = s.te_underflow;
    j["te_overflow"] = s.te_overflow;
    j["underflow_pct"] = num(row.under());
    j["subnormal_pct"] = num(row.sub());
    j["overflow_pct"] = num(row.over());
    if (r.blocks) {
        j["scale"] = nullptr;
        j["scale_inv"] = nullptr;
        j["blocks"] = r.blocks->blocks;
        j["block_rows"] = r.blocks->block_rows;
        j["block_cols"] = r.blocks->block_cols;
        j["scale_inv_min"] = num(r.blocks->scale_inv_min);
        j["scale_inv_max"] = num(r.blocks->scale_inv_max);
        j["block_dynamic_range_max"] = num(r.blocks->dr_max);
    } else {
        j["scale"] = num(r.scale.scale);
        j["scale_inv"] = num(r.scale.scale_inv);
    }
    j["mse"] = num(s.mse());
    j["sqnr_db"] = num(s.sqnr_db());
    j["dynamic_range_binades"] = num(s.dynamic_range_binades());
    j["sum_x2"] = num(s.sum_x2);
    j["sum_err2"] = num(s.sum_err2);
    return j;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
    std::string out = "\"";
    for (char c : s) {
        if (c == '"') out += '"';
        out += c;
    }
    return out + "\"";
}

// Long form: one line per tensor and statistic, for pandas (pivot on `stat`).
void write_csv(const std::vector<Row>& rows, const std::string& recipe) {
    std::printf("file,name,step,role,dtype,format,stat,value\n");
    for (const auto& row : rows) {
        const nlohmann::ordered_json j = tensor_json(row, recipe);
        const std::string key = fmt::format("{},{},{},{},{},{}", csv_field(row.t->file), csv_field(row.t->name),
                                            row.t->step ? std::to_string(*row.t->step) : "",
                                            dp::name(row.t->role), dp::name(row.t->dtype), name(row.r.format));
        for (const char* stat : {"numel", "amax", "min_nonzero", "zeros", "nan", "inf", "underflow",
                                 "subnormal", "overflow", "te_underflow", "te_overflow", "underflow_pct",
                                 "subnormal_pct", "overflow_pct", "scale", "scale_inv", "scale_inv_min",
                                 "scale_inv_max", "mse", "sqnr_db", "dynamic_range_binades"}) {
            if (!j.contains(stat) || j[stat].is_null()) continue;
            const auto& v = j[stat];
            std::string value = v.is_string() ? v.get<std::string>()
                                : v.is_number_float() ? text(v.get<double>())
                                                      : v.dump();
            std::printf("%s,%s,%s\n", key.c_str(), stat, value.c_str());
        }
    }
}

void write_json(const std::vector<Row>& rows, const inspect::Options& opts, const InspectOpts& o,
                const dp::Dump& dump, const std::vector<dp::Problem>& errors) {
    nlohmann::ordered_json out;
    out["recipe"] = opts.recipe.name;
    out["format"] = o.format;
    out["tensors"] = nlohmann::ordered_json::array();
    for (const auto& row : rows) out["tensors"].push_back(tensor_json(row, opts.recipe.name));
    auto problems = [](const std::vector<dp::Problem>& ps) {
        nlohmann::ordered_json a = nlohmann::ordered_json::array();
        for (const auto& p : ps) a.push_back({{"file", p.file}, {"name", p.name}, {"message", p.message}});
        return a;
    };
    out["errors"] = problems(errors);
    out["skipped"] = problems(dump.notes());
    out["summary"] = {{"tensors", rows.size()}, {"failed", errors.size()}, {"skipped", dump.notes().size()}};
    // Names and messages come from the files: bytes that are not UTF-8 become U+FFFD.
    std::printf("%s\n", out.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace).c_str());
}

// The five worst tensors by `metric`: largest positive values, or lowest finite ones.
void write_worst(const std::vector<Row>& rows, const char* title,
                 const std::function<double(const Row&)>& metric, bool lowest) {
    std::vector<const Row*> v;
    for (const auto& r : rows) {
        const double m = metric(r);
        if (lowest ? std::isfinite(m) : m > 0) v.push_back(&r);
    }
    if (v.empty()) return;
    std::stable_sort(v.begin(), v.end(), [&](const Row* a, const Row* b) {
        return lowest ? metric(*a) < metric(*b) : metric(*a) > metric(*b);
    });
    std::printf("%s\n", title);
    for (std::size_t i = 0; i < std::min<std::size_t>(5, v.size()); ++i) {
        const double m = metric(*v[i]);
        const std::string val = lowest ? sqnr_text(m) + " dB" : pct_text(m) + "%";
        std::printf("  %9s  %-4s  %s\n", val.c_str(), std::string(name(v[i]->r.format)).c_str(),
                    tail(v[i]->t->name, 100 - 19).c_str());
    }
}

void write_terminal(const std::vector<Row>& rows, const inspect::Options& opts, const InspectOpts& o,
                    const dp::Dump& dump, const std::vector<dp::Problem>& errors) {
    std::uint64_t elements = 0;
    std::size_t with_over = 0, with_under = 0, with_nonfinite = 0;
    for (const auto& r : rows) {
        elements += r.r.stats.numel;
        with_over += r.r.stats.overflow > 0;
        with_under += r.r.stats.underflow > 0;
        with_nonfinite += r.r.stats.nan + r.r.stats.inf > 0;
    }
    std::printf("fp8kit inspect: %zu tensors, %llu elements, from %zu file(s)\n", rows.size(),
                static_cast<unsigned long long>(elements), dump.files_opened());
    std::printf("  recipe %s, format %s\n", opts.recipe.name.c_str(),
                o.format == "auto" ? "auto (e4m3 for activations and weights, e5m2 for gradients)"
                                   : o.format.c_str());
    std::printf("  with overflow: %zu   with underflow: %zu   with NaN/Inf: %zu   failed: %zu   "
                "skipped: %zu\n",
                with_over, with_under, with_nonfinite, errors.size(), dump.notes().size());
    for (std::size_t i = 0; i < std::min<std::size_t>(3, dump.notes().size()); ++i)
        std::printf("  skipped %s\n", tail(dump.notes()[i].describe(), 100 - 10).c_str());
    if (!rows.empty()) std::printf("\n");
    write_worst(rows, "worst overflow (share of elements past the format's max):",
                [](const Row& r) { return r.over(); }, false);
    write_worst(rows, "worst underflow (share of elements, nonzero, that become zero):",
                [](const Row& r) { return r.under(); }, false);
    write_worst(rows, "most subnormal (share of elements cast to subnormal codes):",
                [](const Row& r) { return r.sub(); }, false);
    write_worst(rows, "lowest SQNR (signal to quantisation noise):",
                [](const Row& r) { return r.r.stats.sqnr_db(); }, true);
    if (rows.empty()) return;
    std::printf("\n%-20s %6s %-7s %-4s %-4s %9s %9s %6s %6s %6s %6s\n", "tensor", "step", "role", "type",
                "fmt", "numel", "amax", "undr%", "subn%", "ovfl%", "SQNR");
    std::string group;
    for (const auto& row : rows) {
        const auto& t = *row.t;
        const auto slash = t.name.find_last_of('/');
        const std::string parent = slash == std::string::npos ? "" : t.name.substr(0, slash);
        const std::string leaf = slash == std::string::npos ? t.name : t.name.substr(slash + 1);
        const std::string g = dump.files_opened() > 1 ? t.file + ": " + parent : parent;
        if (g != group || &row == &rows.front()) {
            group = g;
            std::printf("%s\n", tail(g.empty() ? "/" : g, 100).c_str());
        }
        std::printf("  %-18s %6s %-7s %-4s %-4s %9llu %9s %6s %6s %6s %6s\n", tail(leaf, 18).c_str(),
                    t.step ? std::to_string(*t.step).c_str() : "-", short_role(t).c_str(),
                    std::string(dp::name(t.dtype)).c_str(), std::string(name(row.r.format)).c_str(),
                    static_cast<unsigned long long>(row.r.stats.numel),
                    fmt::format("{:.3g}", row.r.stats.amax).c_str(), pct_text(row.under()).c_str(),
                    pct_text(row.sub()).c_str(), pct_text(row.over()).c_str(),
                    sqnr_text(row.r.stats.sqnr_db()).c_str());
    }
    std::printf("\nrole* = guessed from the name; undr%% = nonzero values that become 0; SQNR in dB "
                "(exact: no error)\n");
}

Register reg([](CLI::App& root) {
    // Owned by the callback (so by the app): the options bind to its members.
    auto o = std::make_shared<InspectOpts>();
    auto* cmd = root.add_subcommand(
        "inspect",
        "What FP8 would do to the tensors of a dump: per tensor and step, amax, scale, overflow,\n"
        "underflow, subnormal share and SQNR under a scaling recipe.\n"
        "Reads HDF5 (any group layout; float64/32/16, bfloat16 as uint16 or opaque with a 'dtype'\n"
        "attribute, FP8 as uint8 with a 'dtype' attribute) and safetensors. Step and role come from\n"
        "'step'/'role' attributes or are guessed from names (shown with *).\n"
        "Exit status: 0 when every input was analysed, 1 when some input failed (each failure is\n"
        "named on stderr; the others are still reported), 2 for bad arguments.");
    cmd->add_option("FILE", o->files, "Dump files or quoted glob patterns ('dumps/*.h5')")->required();
    cmd->add_option("--recipe", o->recipe,
                    "Scaling recipe: a current-scaling preset or a JSON recipe file (default te-current: "
                    "scale = fl32(fmax / amax) per tensor)");
    cmd->add_option("--format", o->format,
                    "auto (the recipe's format per role: e4m3 for activations and weights, e5m2 for "
                    "gradients), or one 8-bit format for every tensor: " + format_choices());
    auto* json = cmd->add_flag("--json", o->json, "Machine-readable output (non-finite numbers as \"inf\"/\"nan\")");
    cmd->add_flag("--csv", o->csv, "Long-form CSV: file,name,step,role,dtype,format,stat,value")->excludes(json);
    // One pattern per occurrence, so patterns never swallow the FILE arguments after them.
    cmd->add_option("--include", o->include, "Only tensors whose name matches this glob pattern (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--exclude", o->exclude, "Skip tensors whose name matches this glob pattern (repeatable)")
        ->allow_extra_args(false);
    cmd->add_option("--steps", o->steps, "Only these steps, e.g. 0-100,200,300-");
    cmd->add_flag("-q,--quiet", o->quiet, "No progress bar");
    cmd->callback([o] {
        inspect::Options opts;
        try {
            opts.recipe = parse_recipe(o->recipe);
            inspect::check_recipe(opts.recipe);
        } catch (const std::invalid_argument& e) {
            throw UsageError(fmt::format("--recipe {}: {}", o->recipe, e.what()));
        }
        if (o->format != "auto") opts.format = require_format(o->format, "--format");
        dp::Selection sel;
        sel.include = o->include;
        sel.exclude = o->exclude;
        if (!o->steps.empty()) {
            try {
                sel.steps = dp::parse_steps(o->steps);
            } catch (const std::invalid_argument& e) {
                throw UsageError(e.what());
            }
        }
        std::vector<dp::Problem> errors;
        const auto files = dp::expand_inputs(o->files, errors);
        dp::Dump dump(files, sel);
        errors.insert(errors.end(), dump.errors().begin(), dump.errors().end());

        const bool progress = !o->quiet && isatty(STDERR_FILENO) && dump.tensors().size() > 1;
        std::vector<Row> rows;
        const std::size_t n = dump.tensors().size();
        auto next_draw = std::chrono::steady_clock::now();
        inspect::analyse_all(dump, opts, [&](std::size_t i, const inspect::Result* r, std::exception_ptr failed) {
            const auto& t = dump.tensors()[i];
            if (r) rows.push_back({&t, *r});
            try {
                if (failed) std::rethrow_exception(failed);
            } catch (const dp::DumpError& e) {
                errors.push_back({e.file, e.name, e.message});
            } catch (const std::exception& e) {
                errors.push_back({t.file, t.name, e.what()});
            }
            if (progress && std::chrono::steady_clock::now() >= next_draw) {
                next_draw = std::chrono::steady_clock::now() + std::chrono::milliseconds(100);
                const std::size_t w = 30, done = (i + 1) * w / n;
                std::fprintf(stderr, "\r[%s%s] %zu/%zu tensors", std::string(done, '#').c_str(),
                             std::string(w - done, ' ').c_str(), i + 1, n);
                std::fflush(stderr);
            }
        });
        if (progress) std::fprintf(stderr, "\r%s\r", std::string(60, ' ').c_str());

        if (o->json) write_json(rows, opts, *o, dump, errors);
        else if (o->csv) write_csv(rows, opts.recipe.name);
        else write_terminal(rows, opts, *o, dump, errors);
        std::fflush(stdout);
        for (const auto& p : errors) std::fprintf(stderr, "fp8kit: error: %s\n", p.describe().c_str());
        if (!errors.empty()) exit_status() = 1;
    });
});

}  // namespace
}  // namespace fp8kit::cli
