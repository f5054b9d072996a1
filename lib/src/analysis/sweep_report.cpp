// sweep's machine-readable report: the JSON object (its small parts through nlohmann, each tensor
// as its own line written by io::json_out) and the CSV; and the early warnings --warn adds.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/report_fields.hpp"
#include "fp8kit/io/json_out.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/io/sink.hpp"
#include "fp8kit/warn/watch.hpp"
#include "sweep_rows.hpp"

namespace fp8kit::sweep {
namespace {

namespace json_out = io::json_out;

// An outcome as one JSON object, from its field table (outcome_fields): the per-class outcomes.
nlohmann::json outcome_json(const OutcomeRow& row) {
    nlohmann::json j = nlohmann::json::object();
    io::put_fields(j, outcome_fields(), row);
    return j;
}

// The same object written by json_out, in the table's order: the per-tensor rows, where building
// nlohmann objects cost most of a 10^5-tensor sweep.
void outcome_row(fmt::memory_buffer& b, const OutcomeRow& row) { io::json_fields(b, outcome_fields(), row, true); }

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
            const Outcome oc = sw.per_class(c, cls);
            k["outcomes"].push_back(outcome_json(sw.row(c, cls, oc)));
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
                outcome_row(b, sw.row(c, S[s].role, oc[c], &oc));
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

// The CSV's rows of one sweep: scope, name, then the candidate's fields and the outcome's fields
// (their tables). The candidate's cells depend on the class and candidate only: made once per
// (class, candidate).
class CsvRows {
public:
    explicit CsvRows(const Sweep& sw) : sw_(sw) {
        const auto& C = sw.candidates();
        for (std::size_t k = 0; k < 3; ++k)
            for (std::size_t c = 0; c < C.size(); ++c) {
                fmt::memory_buffer b;
                io::csv_fields(b, candidate_fields(), CandidateRow{C[c], kClasses[k]});
                middle_[k].push_back(fmt::to_string(b));
            }
    }
    void row(fmt::memory_buffer& b, std::string_view scope, std::string_view field, Role cls, std::size_t c,
             const OutcomeRow& oc) const {
        b.append(scope);
        b.push_back(',');
        b.append(field);
        b.append(middle_[class_index(cls)][c]);
        io::csv_fields(b, outcome_fields(), oc);
        b.push_back('\n');
    }
    // Per class, one row per candidate, written to `out` once per class.
    void write_classes(std::FILE* out) const {
        fmt::memory_buffer b;
        for (Role cls : kClasses) {
            if (!sw_.has_class(cls)) continue;
            const std::string field = io::csv_field(name(cls));
            for (std::size_t c = 0; c < sw_.candidates().size(); ++c) {
                const Outcome oc = sw_.per_class(c, cls);
                row(b, "class", field, cls, c, sw_.row(c, cls, oc));
            }
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
                row(b, "tensor", field, S[s].role, c, sw_.row(c, S[s].role, oc[c], &oc));
        }
        return fmt::to_string(b);
    }

private:
    const Sweep& sw_;
    std::vector<std::string> middle_[3];
};

}  // namespace

void write_csv(const Loaded& L, const ReportOptions& o, std::FILE* out, std::FILE* notes) {
    if (o.root) {
        fmt::memory_buffer h;
        h.append(std::string_view("scope,name"));
        io::csv_keys(h, candidate_fields());
        io::csv_keys(h, outcome_fields());
        h.push_back('\n');
        write_bytes(fmt::to_string(h), out);
    }
    // Rows go through one buffer, written once per class or group of tensors (10^5 tensors x 60 rows).
    const CsvRows rows(*L.sweep);
    if (o.root) rows.write_classes(out);
    write_series_rows(
        o, L.sweep->series().size(), [&](std::size_t first, std::size_t last) { return rows.tensors(first, last); },
        out);
    if (!o.root) return;
    io::flush(out);
    for (const auto& n : L.skipped) fmt::print(notes, "fp8kit sweep: note: skipped {}\n", io::printable(n.describe()));
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
