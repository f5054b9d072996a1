// kv's report as JSON (three flat tables: rows per head, position buckets, attention; each a list
// of records that pandas.DataFrame reads as is) and as CSV (the per-head rows).
#include <cmath>
#include "fp8kit/io/json_number.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/printable.hpp"
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

// The text's numbers: SQNR in dB with two decimals, shares in percent.
std::string db(double v) { return io::fixed_number(v, 2); }
double pct(std::uint64_t n, std::uint64_t d) { return d ? 100.0 * static_cast<double>(n) / d : 0.0; }

// Per (layer, tensor, format, policy): the heads summed, and the worst head's SQNR.
void write_summary(const Report& r, std::FILE* out) {
    fmt::print(out, "{:<28} {:<2} {:<9} {:<17} {:>10} {:>8} {:>8} {:>9} {:>10}\n", "layer", "t", "format", "policy",
               "scale", "sat%", "under%", "SQNR dB", "worst head");
    for (std::size_t i = 0; i < r.rows.size();) {
        std::size_t j = i;
        CastStats all;
        double worst = HUGE_VAL;
        std::size_t worst_head = 0;
        while (j < r.rows.size() && r.rows[j].layer == r.rows[i].layer && r.rows[j].tensor == r.rows[i].tensor &&
               r.rows[j].format == r.rows[i].format && r.rows[j].policy == r.rows[i].policy) {
            all.add(r.rows[j].stats);
            if (r.rows[j].stats.sqnr_db() < worst) worst = r.rows[j].stats.sqnr_db(), worst_head = r.rows[j].head;
            ++j;
        }
        const auto& row = r.rows[i];
        const std::string scale = row.policy == ScalePolicy::token_head ? "per token"
                                  : row.policy == ScalePolicy::head     ? "per head"
                                                                        : fmt::format("{:.6g}", row.scale);
        fmt::print(out, "{:<28} {:<2} {:<9} {:<17} {:>10} {:>8.4f} {:>8.4f} {:>9} {:>5} (h{})\n",
                   io::printable(row.layer), row.tensor, name(row.format), name(row.policy), scale,
                   pct(all.saturated, all.nonzero), pct(all.underflow, all.nonzero), db(all.sqnr_db()), db(worst),
                   worst_head);
        i = j;
    }
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

void write_text(const Report& r, std::FILE* out) {
    fmt::print(out, "{} layers, {} steps (batches) of [{} x heads x {} positions x {}]; step 0 is the first batch.\n\n",
               r.layers.size(), r.steps, r.batch, r.positions, r.dim);
    write_summary(r, out);
    if (!r.attention.empty()) {
        fmt::print(out,
                   "\nFP8 attention (E4M3 Q, K, V; P in E4M3 without a scale), SQNR dB against binary64 on the BF16 "
                   "values:\n");
        fmt::print(out, "{:<28} {:>4} {:<17} {:>9} {:>9} {:>9} {:>11} {:>10}\n", "layer", "head", "policy", "scores",
                   "P", "O (FA3)", "O (normed)", "P under%");
        for (const auto& a : r.attention)
            fmt::print(out, "{:<28} {:>4} {:<17} {:>9} {:>9} {:>9} {:>11} {:>10.4f}\n", io::printable(a.layer), a.head,
                       name(a.policy), db(a.scores_sqnr_db), db(a.probs_sqnr_db), db(a.out_sqnr_db),
                       db(a.out_normalized_sqnr_db), pct(a.p_underflow, a.p_nonzero));
    }
    fmt::print(out, "\nPosition buckets and per-head rows: --json (or --csv for the rows).\n");
    for (const auto& n : r.skipped) fmt::print(out, "note: skipped {}\n", io::printable(n.describe()));
    for (const auto& n : r.notes) fmt::print(out, "note: {}\n", io::printable(n));
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
