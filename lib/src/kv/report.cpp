// kv's report as JSON (three flat tables: rows per head, position buckets, attention; each a list
// of records that pandas.DataFrame reads as is) and as CSV (the per-head rows).
#include <cmath>
#include "fp8kit/io/json_number.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/kv.hpp"

namespace fp8kit::kv {
namespace {

nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp
double share(std::uint64_t n, std::uint64_t d) { return d ? static_cast<double>(n) / d : 0.0; }

void put_stats(nlohmann::json& o, const CastStats& s) {
    o["elements"] = s.elements;
    o["nonzero"] = s.nonzero;
    o["saturated"] = s.saturated;
    o["underflow"] = s.underflow;
    o["saturated_share"] = share(s.saturated, s.nonzero);
    o["underflow_share"] = share(s.underflow, s.nonzero);
    o["sqnr_db"] = num(s.sqnr_db());
    o["max_abs_err"] = s.max_abs_err;
}

}  // namespace

std::string to_json(const Report& r) {
    nlohmann::json j{{"steps", r.steps},   {"batch", r.batch}, {"positions", r.positions}, {"head_dim", r.dim},
                     {"layers", r.layers}, {"notes", r.notes}, {"skipped", r.skipped}};
    j["rows"] = nlohmann::json::array();
    for (const auto& row : r.rows) {
        nlohmann::json o{{"layer", row.layer},         {"tensor", std::string(1, row.tensor)}, {"head", row.head},
                         {"format", name(row.format)}, {"policy", name(row.policy)},           {"scale", row.scale}};
        put_stats(o, row.stats);
        j["rows"].push_back(o);
    }
    j["positions"] = nlohmann::json::array();
    for (const auto& b : r.buckets) {
        nlohmann::json o{{"layer", b.layer},         {"tensor", std::string(1, b.tensor)},
                         {"format", name(b.format)}, {"policy", name(b.policy)},
                         {"first", b.first},         {"last", b.last}};
        put_stats(o, b.stats);
        j["positions"].push_back(o);
    }
    j["attention"] = nlohmann::json::array();
    for (const auto& a : r.attention)
        j["attention"].push_back({{"layer", a.layer},
                                  {"head", a.head},
                                  {"kv_head", a.kv_head},
                                  {"policy", name(a.policy)},
                                  {"q_scale", a.q_scale},
                                  {"k_scale", a.k_scale},
                                  {"v_scale", a.v_scale},
                                  {"scores_sqnr_db", num(a.scores_sqnr_db)},
                                  {"probs_sqnr_db", num(a.probs_sqnr_db)},
                                  {"out_sqnr_db", num(a.out_sqnr_db)},
                                  {"out_normalized_sqnr_db", num(a.out_normalized_sqnr_db)},
                                  {"p_underflow", a.p_underflow},
                                  {"p_nonzero", a.p_nonzero}});
    return j.dump(1);
}

std::string to_csv(const Report& r) {
    std::string out =
        "layer,tensor,head,format,policy,scale,elements,nonzero,saturated,underflow,sqnr_db,max_abs_err\n";
    for (const auto& row : r.rows) {
        const auto& s = row.stats;
        const double q = s.sqnr_db();
        out += fmt::format("{},{},{},{},{},{:.9g},{},{},{},{},{},{:.9g}\n", row.layer, row.tensor, row.head,
                           name(row.format), name(row.policy), row.scale, s.elements, s.nonzero, s.saturated,
                           s.underflow, io::fixed_number(q, 6), s.max_abs_err);
    }
    return out;
}

}  // namespace fp8kit::kv
