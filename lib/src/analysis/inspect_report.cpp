// inspect's report: its tensors listed and analysed in order, TE's quantized files checked, and
// the machine-readable forms (JSON, long-form CSV).
#include "fp8kit/analysis/inspect_report.hpp"

#include <set>
#include <string_view>
#include <type_traits>
#include <variant>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/json_number.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/stats/fields.hpp"
#include "inspect_te.hpp"

namespace fp8kit::inspect {
namespace {

namespace dp = fp8kit::dump;

// Non-finite numbers as every report writes them (io/json_number.hpp).
nlohmann::ordered_json num(double v) { return io::json_number<nlohmann::ordered_json>(v); }

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
    for (const auto& f : quant_stats_fields(r.stats)) put(j, f);
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
    j["exp_hist"] = exp_hist_json(r.stats);
    return j;
}

nlohmann::ordered_json problems_json(const std::vector<dp::Problem>& ps) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& p : ps) a.push_back({{"file", p.file}, {"name", p.name}, {"message", p.message}});
    return a;
}

// Names and messages come from the files: bytes that are not UTF-8 become U+FFFD.
std::string json_text(const nlohmann::ordered_json& j) {
    return j.dump(1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

// The JSON fields that the CSV carries in its key columns, not as statistics.
const std::set<std::string> kCsvKeyFields = {"file",  "name",    "step",   "step_guessed", "role",  "role_guessed",
                                             "dtype", "storage", "recipe", "recipe_role",  "format"};

void write_csv_row(const Row& row, const std::string& recipe, std::FILE* out) {
    const nlohmann::ordered_json j = tensor_json(row, recipe);
    const std::string key = fmt::format("{},{},{},{},{},{}", io::csv_field(row.t->file), io::csv_field(row.t->name),
                                        row.t->step ? std::to_string(*row.t->step) : "", dp::name(row.t->role),
                                        dp::name(row.t->dtype), name(row.r.format));
    // Every scalar field of the JSON form, in its order.
    for (const auto& [stat, v] : j.items()) {
        if (kCsvKeyFields.count(stat) || v.is_null() || v.is_structured()) continue;
        std::string value = v.is_string()         ? v.get<std::string>()
                            : v.is_number_float() ? io::text_number(v.get<double>())
                                                  : v.dump();
        // fmt, not printf("%s"): a name may hold a NUL byte, and %s would cut it there.
        fmt::print(out, "{},{},{}\n", key, stat, value);
    }
    // The exponent histogram: exp_hist_zero, exp_hist_nonfinite and exp_hist_<e> for each
    // exponent e that occurs (pivot and sort on the number after the last '_').
    const auto& st = row.r.stats;
    fmt::print(out, "{},exp_hist_zero,{}\n", key, st.exp_hist[kExpHistZeroBin]);
    fmt::print(out, "{},exp_hist_nonfinite,{}\n", key, st.exp_hist[kExpHistNonfiniteBin]);
    for (std::size_t b = kExpHistZeroBin + 1; b < kExpHistNonfiniteBin; ++b)
        if (st.exp_hist[b]) fmt::print(out, "{},exp_hist_{},{}\n", key, exp_hist_exponent(b), st.exp_hist[b]);
}

}  // namespace

Report open(const std::vector<std::string>& inputs, dump::Selection sel, const dump::ReadOptions& read) {
    Report r;
    const auto files = dp::expand_inputs(inputs, r.errors);
    r.dump = std::make_unique<dp::Dump>(files, std::move(sel), read);
    r.errors.insert(r.errors.end(), r.dump->errors().begin(), r.dump->errors().end());
    return r;
}

std::string nothing_matched(const dump::Selection& sel, const std::string& steps, const dump::Dump& d) {
    std::vector<std::string> filters;
    for (const auto& p : sel.include) filters.push_back("--include '" + p + "'");
    for (const auto& p : sel.exclude) filters.push_back("--exclude '" + p + "'");
    if (!steps.empty()) filters.push_back("--steps " + steps);
    std::string names;
    for (const auto& n : d.unselected_sample()) names += (names.empty() ? "" : ", ") + io::quoted(n, 120);
    return fmt::format("no tensor matches {}: the input has {} tensor(s), e.g. {}{}", fmt::join(filters, " "),
                       d.unselected(), names, d.unselected() > d.unselected_sample().size() ? ", ..." : "");
}

void add(Report& r, std::size_t i, const Result* result, std::exception_ptr failed) {
    const auto& t = r.dump->tensors()[i];
    if (result) r.rows.push_back({&t, *result});
    try {
        if (failed) std::rethrow_exception(failed);
    } catch (const dp::DumpError& e) {
        r.errors.push_back({e.file, e.name, e.message});
    } catch (const std::exception& e) {
        r.errors.push_back({t.file, t.name, e.what()});
    }
}

void write_json(const Report& r, std::FILE* out) {
    // The tensors are written one at a time into the document's place for them, in exactly the
    // layout dump(1) gives the whole.
    static const char* kTensors = "\x01fp8kit tensors\x01";
    const auto& notes = r.dump->notes();
    nlohmann::ordered_json head;
    head["recipe"] = r.options.recipe.name;
    head["format"] = r.format_choice;
    head["tensors"] = kTensors;
    head["errors"] = problems_json(r.errors);
    head["skipped"] = problems_json(notes);
    head["summary"] = {{"tensors", r.rows.size()}, {"failed", r.errors.size()}, {"skipped", notes.size()}};
    if (!r.te_checks.empty()) head["te_quantized"] = te_checks_json(r.te_checks);
    const std::string doc = json_text(head), mark = json_text(nlohmann::ordered_json(kTensors));
    const std::size_t at = doc.find(mark);  // the first: "tensors" precedes names from files
    fmt::print(out, "{}", std::string_view(doc).substr(0, at));
    if (r.rows.empty()) fmt::print(out, "[]");
    for (std::size_t i = 0; i < r.rows.size(); ++i) {
        std::string t = json_text(tensor_json(r.rows[i], r.options.recipe.name));
        for (std::size_t nl = t.find('\n'); nl != std::string::npos; nl = t.find('\n', nl + 3)) t.insert(nl + 1, "  ");
        fmt::print(out, "{}  {}", i == 0 ? "[\n" : ",\n", t);
    }
    if (!r.rows.empty()) fmt::print(out, "\n ]");
    fmt::print(out, "{}\n", std::string_view(doc).substr(at + mark.size()));
}

void write_csv(const Report& r, std::FILE* out) {
    fmt::print(out, "file,name,step,role,dtype,format,stat,value\n");
    for (const auto& row : r.rows) write_csv_row(row, r.options.recipe.name, out);
}

}  // namespace fp8kit::inspect
