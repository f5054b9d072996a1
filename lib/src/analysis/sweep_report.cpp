// sweep's machine-readable report: the JSON object (its small parts through nlohmann, each tensor
// as its own line written by io::json_out) and the CSV; and the early warnings --warn adds.
#include <fmt/compile.h>
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/json_number.hpp"
#include "fp8kit/io/json_out.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"
#include "fp8kit/warn/watch.hpp"
#include "sweep_rows.hpp"

namespace fp8kit::sweep {
namespace {

namespace json_out = io::json_out;

nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp

nlohmann::json outcome_json(const Outcome& oc) {
    nlohmann::json j;
    j["tensors"] = oc.tensors;
    j["steps"] = oc.steps;
    j["overflow_steps"] = oc.overflow_steps;
    j["first_step_overflows"] = oc.first_step_overflows;
    j["worst_headroom"] = num(oc.worst_headroom);
    j["worst_step"] = oc.worst_step;
    j["mean_log2_headroom"] = num(oc.mean_log2_headroom());
    j["dumped"] = oc.dumped;
    j["underflow_share"] = num(oc.underflow_share());
    j["subnormal_share"] = num(oc.subnormal_share());
    j["underflow_uncertain"] = oc.underflow_uncertain;
    j["subnormal_uncertain"] = oc.subnormal_uncertain;
    j["sqnr_db"] = num(oc.mean_sqnr_db());
    j["sqnr_db_bounds"] = {num(oc.mean_sqnr_db_lo()), num(oc.mean_sqnr_db_hi())};
    j["lossless"] = oc.lossless;
    return j;
}

// outcome_json(oc) plus "min_safe_margin", written by json_out (keys in nlohmann's sorted order):
// the per-tensor rows, where building nlohmann objects cost most of a 10^5-tensor sweep.
void outcome_row(fmt::memory_buffer& b, const Outcome& oc, int min_safe_margin) {
    // At most 17 keys (255 bytes), 11 integers (20 bytes each) and 6 doubles (25 bytes each).
    json_out::Row r(b, 1024);
    r.lit("\"dumped\":");
    r.integer(oc.dumped);
    r.lit(",\"first_step_overflows\":");
    r.integer(oc.first_step_overflows);
    r.lit(",\"lossless\":");
    r.integer(oc.lossless);
    r.lit(",\"mean_log2_headroom\":");
    r.stat(oc.mean_log2_headroom());
    r.lit(",\"min_safe_margin\":");
    r.integer(min_safe_margin);
    r.lit(",\"overflow_steps\":");
    r.integer(oc.overflow_steps);
    r.lit(",\"sqnr_db\":");
    r.stat(oc.mean_sqnr_db());
    r.lit(",\"sqnr_db_bounds\":[");
    r.stat(oc.mean_sqnr_db_lo());
    r.lit(",");
    r.stat(oc.mean_sqnr_db_hi());
    r.lit("],\"steps\":");
    r.integer(oc.steps);
    r.lit(",\"subnormal_share\":");
    r.stat(oc.subnormal_share());
    r.lit(",\"subnormal_uncertain\":");
    r.integer(oc.subnormal_uncertain);
    r.lit(",\"tensors\":");
    r.integer(oc.tensors);
    r.lit(",\"underflow_share\":");
    r.stat(oc.underflow_share());
    r.lit(",\"underflow_uncertain\":");
    r.integer(oc.underflow_uncertain);
    r.lit(",\"worst_headroom\":");
    r.stat(oc.worst_headroom);
    r.lit(",\"worst_step\":");
    r.integer(oc.worst_step);
    r.done();
}

nlohmann::json candidates_json(const std::vector<Candidate>& C) {
    nlohmann::json a = nlohmann::json::array();
    for (const auto& c : C) {
        nlohmann::json cj = to_json(c.recipe);
        cj["label"] = c.label;
        cj["format_choice"] = c.forced ? std::string(name(*c.forced)) : "hybrid";
        cj["grid"] = c.grid;
        a.push_back(cj);
    }
    return a;
}

// The JSON object up to its "tensors" array (rank 0).
void write_json_head(const Loaded& L, const ReportOptions& o, std::FILE* out) {
    const Sweep& sw = *L.sweep;
    const auto& C = sw.candidates();
    nlohmann::json head;
    head["inputs"] = o.inputs;
    head["notes"] = L.notes;
    head["skipped"] = L.skipped;
    // Inputs that could not be read (as inspect's "errors"): the sweep went on without them.
    head["errors"] = nlohmann::json::array();
    for (const auto& p : L.errors)
        head["errors"].push_back({{"file", p.file}, {"name", p.name}, {"message", p.message}});
    if (o.warnings) {
        head["warnings"] = nlohmann::json::array();
        for (const auto& w : *o.warnings) head["warnings"].push_back(warn::to_json(w));
    }
    head["candidates"] = candidates_json(C);
    for (Role cls : kClasses) {
        if (!sw.has_class(cls)) continue;
        auto& k = head["classes"][std::string(name(cls))];
        k["recommendation"] = sw.recommendation(cls);
        k["ranked"] = sw.ranked(cls);
        for (std::size_t c = 0; c < C.size(); ++c) {
            auto oc = outcome_json(sw.per_class(c, cls));
            oc["min_safe_margin"] = sw.min_safe_margin(c, -1, cls);
            k["outcomes"].push_back(oc);
        }
    }
    std::string h = head.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    h.pop_back();  // the closing brace: the tensors follow
    fmt::print(out, "{}{}\"tensors\":[\n", h, head.empty() ? "" : ",");
}

// Series [first, last) as JSON lines, as nlohmann would write {"class", "outcomes", "steps",
// "tensor"}.
std::string json_tensor_rows(const Sweep& sw, std::size_t first, std::size_t last) {
    const auto& C = sw.candidates();
    const auto& S = sw.series();
    fmt::memory_buffer b;
    for (std::size_t s = first; s < last; ++s) {
        const auto oc = sw.tensor_outcomes(s);
        b.push_back('{');
        json_out::key(b, "class", true);
        json_out::string(b, name(S[s].role));
        if (!C.empty()) {
            json_out::key(b, "outcomes");
            for (std::size_t c = 0; c < C.size(); ++c) {
                b.append(std::string_view(c ? ",{" : "[{"));
                outcome_row(b, oc[c], sw.min_safe_margin(c, oc));
                b.push_back('}');
            }
            b.push_back(']');
        }
        json_out::key(b, "steps");
        json_out::integer(b, S[s].steps.size());
        json_out::key(b, "tensor");
        json_out::string(b, S[s].tensor);
        b.append(std::string_view(s + 1 < S.size() ? "},\n" : "}\n"));
    }
    return fmt::to_string(b);
}

// The CSV's rows of one sweep. The fields from class to format depend on the class and candidate
// only: spelled once per (class, candidate).
class CsvRows {
public:
    explicit CsvRows(const Sweep& sw) : sw_(sw) {
        const auto& C = sw.candidates();
        for (std::size_t k = 0; k < 3; ++k)
            for (std::size_t c = 0; c < C.size(); ++c) {
                const auto& r = C[c].recipe;
                const Role cls = kClasses[k];
                const std::string_view f =
                    name(replay::role_format(r, cls, C[c].forced));  // block presets: their role's format
                middle_[k].push_back(fmt::format(",{},\"{}\",{},{},{},{},{},", name(cls), C[c].label, name(r.kind),
                                                 r.history_len, name(r.algo), r.margin, f));
            }
    }
    void row(fmt::memory_buffer& b, std::string_view scope, std::string_view field, Role cls, std::size_t c,
             const Outcome& oc, int msm) const {
        b.append(scope);
        b.push_back(',');
        b.append(field);
        b.append(middle_[class_index(cls)][c]);
        fmt::format_to(fmt::appender(b), FMT_COMPILE("{},{},{:.9g},{:.9g},"), oc.steps, oc.overflow_steps,
                       oc.worst_headroom, oc.mean_log2_headroom());
        if (sw_.candidates()[c].grid) json_out::integer(b, msm);
        fmt::format_to(fmt::appender(b), FMT_COMPILE(",{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n"), oc.dumped,
                       oc.underflow_share(), oc.subnormal_share(), oc.mean_sqnr_db(), oc.mean_sqnr_db_lo(),
                       oc.mean_sqnr_db_hi());
    }
    // Per class, one row per candidate, written to `out` once per class.
    void write_classes(std::FILE* out) const {
        fmt::memory_buffer b;
        for (Role cls : kClasses) {
            if (!sw_.has_class(cls)) continue;
            const std::string field = io::csv_field(name(cls));
            for (std::size_t c = 0; c < sw_.candidates().size(); ++c)
                row(b, "class", field, cls, c, sw_.per_class(c, cls), sw_.min_safe_margin(c, -1, cls));
            std::fwrite(b.data(), 1, b.size(), out);
            b.clear();
        }
    }
    std::string tensors(std::size_t first, std::size_t last) const {
        const auto& S = sw_.series();
        fmt::memory_buffer b;
        for (std::size_t s = first; s < last; ++s) {
            const auto oc = sw_.tensor_outcomes(s);
            const std::string field = io::csv_field(S[s].tensor);
            for (std::size_t c = 0; c < sw_.candidates().size(); ++c)
                row(b, "tensor", field, S[s].role, c, oc[c], sw_.min_safe_margin(c, oc));
        }
        return fmt::to_string(b);
    }

private:
    const Sweep& sw_;
    std::vector<std::string> middle_[3];
};

}  // namespace

void write_csv(const Loaded& L, const ReportOptions& o, std::FILE* out, std::FILE* notes) {
    if (o.root)
        fmt::print(out,
                   "scope,name,class,candidate,kind,history,algo,margin,format,steps,overflow_steps,worst_headroom,"
                   "mean_log2_headroom,min_safe_margin,dumped,underflow_share,subnormal_share,sqnr_db,sqnr_db_lo,"
                   "sqnr_db_hi\n");
    // Rows go through one buffer, written once per class or group of tensors (10^5 tensors x 60 rows).
    const CsvRows rows(*L.sweep);
    if (o.root) rows.write_classes(out);
    write_series_rows(
        o, L.sweep->series().size(), [&](std::size_t first, std::size_t last) { return rows.tensors(first, last); },
        out);
    if (!o.root) return;
    io::flush(out);
    for (const auto& n : L.skipped) fmt::print(notes, "fp8kit sweep: note: skipped {}\n", io::printable(n));
    for (const auto& n : L.notes) fmt::print(notes, "fp8kit sweep: note: {}\n", io::printable(n));
}

void write_json(const Loaded& L, const ReportOptions& o, std::FILE* out) {
    if (o.root) write_json_head(L, o, out);
    write_series_rows(
        o, L.sweep->series().size(),
        [&](std::size_t first, std::size_t last) { return json_tensor_rows(*L.sweep, first, last); }, out);
    if (o.root) fmt::print(out, "]}}\n");
}

std::vector<warn::Warning> early_warnings(const std::vector<std::string>& files,
                                          const std::vector<std::string>& tensors, const dump::ReadOptions& read) {
    warn::WatchInputs in;
    warn::apply_options(in, nlohmann::json::object());
    in.files = files;
    in.tensors = tensors;
    in.read = read;
    return warn::watch_files(in).warnings;
}

}  // namespace fp8kit::sweep
