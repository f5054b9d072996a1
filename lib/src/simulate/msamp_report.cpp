// A run's report as `fp8kit simulate msamp` prints it: long-form CSV, JSON, and the text summary
// (per N and path the all-reduce's worst step, at O2 the optimizer states), all from MsampRun.
#include <algorithm>
#include <cmath>
#include <cstdarg>
#include <cstdio>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "fp8kit/io/json_number.hpp"
#include "fp8kit/simulate.hpp"

namespace fp8kit::simulate {
namespace {

// printf into a string: the text keeps the C formats it has always been printed with.
void appendf(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* format, ...) {
    va_list args, copy;
    va_start(args, format);
    va_copy(copy, args);
    const int n = std::vsnprintf(nullptr, 0, format, copy);
    va_end(copy);
    if (n > 0) {
        const std::size_t at = out.size();
        out.resize(at + static_cast<std::size_t>(n) + 1);
        std::vsnprintf(&out[at], static_cast<std::size_t>(n) + 1, format, args);
        out.resize(at + static_cast<std::size_t>(n));
    }
    va_end(args);
}

// The worst (largest, or smallest with worst_max false) value of one metric over the steps.
double find(const std::vector<MsampRow>& rows, const std::string& sec, const std::string& t, int n,
            const std::string& path, const std::string& order, const std::string& metric, bool worst_max = true) {
    double best = worst_max ? -INFINITY : INFINITY;
    for (const auto& r : rows)
        if (r.section == sec && r.tensor == t && r.ranks == n && r.path == path && r.order == order &&
            r.metric == metric)
            best = worst_max ? std::max(best, r.value) : std::min(best, r.value);
    return best;
}

std::string str(std::string_view s) { return std::string(s); }

std::string list(const std::set<std::string>& s) {
    std::string out;
    for (const auto& x : s) out += (out.empty() ? "" : ", ") + x;
    return s.empty() ? std::string("none") : out;
}

void allreduce_text(std::string& out, const MsampRun& run, int w, const std::string& o0) {
    const auto& rows = run.rows;
    for (const auto& [key, f] : run.flags) {
        const auto& [n, path] = key;
        appendf(out, "FP8 all-reduce, %d ranks, %s path (worst step; SQNR and underflow for order %s):\n", n,
                path.c_str(), o0.c_str());
        appendf(out, "  %-*s  %9s  %9s  %10s  %9s  %12s  %6s\n", w, "tensor", "hop ovf", "underflow", "SQNR dB",
                "rel err", "order spread", "margin");
        for (const auto& p : run.params)
            appendf(out, "  %-*s  %9.0f  %8.3f%%  %10.2f  %9.3g  %12.3g  %6.0f\n", w, p.c_str(),
                    find(rows, "allreduce", p, n, path, o0, "hop_overflows"),
                    100 * find(rows, "allreduce", p, n, path, o0, "underflow_share"),
                    find(rows, "allreduce", p, n, path, o0, "sqnr_db", false),
                    find(rows, "allreduce", p, n, path, o0, "rel_error"),
                    find(rows, "allreduce", p, n, path, "", "order_spread"),
                    find(rows, "allreduce", p, n, path, "", "extra_margin"));
        appendf(out, "  overflow: %s\n  underflow (>= %.0f%% of elements sum to 0): %s\n", list(f.overflow).c_str(),
                100 * kUnderflowFlag, list(f.underflow).c_str());
        std::map<int, std::set<std::string>> by_margin;
        for (const auto& [t, k] : f.margin) by_margin[k].insert(t);
        for (const auto& [k, ts] : by_margin)
            appendf(out, "  margin %d (scale / 2^%d) keeps every partial sum <= 448 for: %s\n", k, k, list(ts).c_str());
        if (!f.stall.empty())
            appendf(out,
                    "  stalled partial sums (>= %.0f%% of hops add a nonzero value and change nothing): %s\n"
                    "    an E4M3 partial keeps 3 mantissa bits, so once it is more than 16 times an addend the\n"
                    "    addend is lost; the rank and ring orders add N values one by one into one partial. A\n"
                    "    margin does not help (it scales partial and addend alike); the tree order (pairwise\n"
                    "    partials of equal size, with the margin it needs against overflow) or a BF16/FP32\n"
                    "    all-reduce does.\n",
                    100 * kStallFlag, list(f.stall).c_str());
        out += "\n";
    }
}

void optimizer_text(std::string& out, const MsampRun& run, const MsampRunOptions& o, int w) {
    if (o.te_fused_adam)
        appendf(out,
                "O2 optimizer states, TransformerEngine FusedAdam (%s exp_avg, %s exp_avg_sq, %s master weights; "
                "adam.cu as built %s) vs FP32:\n",
                str(name(o.te.exp_avg)).c_str(), str(name(o.te.exp_avg_sq)).c_str(), str(name(o.te.master)).c_str(),
                str(name(o.te.build)).c_str());
    else
        appendf(out, "O2 optimizer states (E4M3 exp_avg, FP16 exp_avg_sq, %s master weights) vs FP32:\n",
                o.fp32_master ? "FP32" : "FP16");
    appendf(out, "  %-*s  %6s  %9s  %9s  %9s  %9s  %12s  %12s\n", w, "tensor", "steps", "m undfl", "v undfl",
            "m rel err", "v rel err", "upd err 1st", "upd err last");
    const int n = run.optimizer_ranks;
    for (const auto& p : run.params)
        appendf(out, "  %-*s  %6.0f  %8.3f%%  %8.3f%%  %9.3g  %9.3g  %12.3g  %12.3g\n", w, p.c_str(),
                find(run.rows, "optimizer", p, n, "", "", "steps_applied"),
                100 * find(run.rows, "optimizer", p, n, "", "", "m_underflow_share"),
                100 * find(run.rows, "optimizer", p, n, "", "", "v_underflow_share"),
                find(run.rows, "optimizer", p, n, "", "", "m_rel_error"),
                find(run.rows, "optimizer", p, n, "", "", "v_rel_error"),
                find(run.rows, "optimizer", p, n, "", "", "update_rel_error_step1"),
                find(run.rows, "optimizer", p, n, "", "", "update_rel_error"));
}

}  // namespace

std::string msamp_csv(const MsampRun& run) {
    std::string out = "section,tensor,step,ranks,path,order,metric,value\n";
    for (const auto& r : run.rows)
        appendf(out, "%s,\"%s\",%lld,%d,%s,%s,%s,%s\n", r.section.c_str(), r.tensor.c_str(),
                static_cast<long long>(r.step), r.ranks, r.path.c_str(), r.order.c_str(), r.metric.c_str(),
                fmt::format("{}", r.value).c_str());
    return out;
}

std::string msamp_json(const MsampRun& run, const MsampRunOptions& o, const std::vector<std::string>& dumps,
                       const std::vector<dump::Problem>& skipped) {
    nlohmann::json j;
    j["dumps"] = dumps;
    j["level"] = o.o2 ? "O2" : "O1";
    if (o.o2) {
        j["optimizer"] = o.te_fused_adam ? "te-fused-adam" : "msamp";
        if (o.te_fused_adam) {
            j["state_dtypes"] = {{"exp_avg", str(name(o.te.exp_avg))},
                                 {"exp_avg_sq", str(name(o.te.exp_avg_sq))},
                                 {"master", str(name(o.te.master))}};
            j["te_build"] = str(name(o.te.build));
        } else {
            j["state_dtypes"] = {{"exp_avg", str(name(o.msamp_states.exp_avg))},
                                 {"exp_avg_sq", str(name(o.msamp_states.exp_avg_sq))},
                                 {"master", o.fp32_master ? "fp32" : "fp16"}};
        }
        j["optimizer_grad"] = str(name(o.optimizer_grad));
    }
    j["wgrad_dtype"] = str(name(o.wgrad));
    auto& orders = j["orders"] = nlohmann::json::array();
    for (Order x : o.orders) orders.push_back(str(name(x)));
    j["hop"] = str(name(o.hop));
    j["spread"] = o.spread;
    j["seed"] = o.seed;
    auto& rows = j["rows"] = nlohmann::json::array();
    for (const auto& r : run.rows)
        rows.push_back({{"section", r.section},
                        {"tensor", r.tensor},
                        {"step", r.step},
                        {"ranks", r.ranks},
                        {"path", r.path},
                        {"order", r.order},
                        {"metric", r.metric},
                        {"value", io::json_number(r.value)}});
    auto& fl = j["flags"] = nlohmann::json::array();
    for (const auto& [k, f] : run.flags)
        fl.push_back({{"ranks", k.first},
                      {"path", k.second},
                      {"overflow", f.overflow},
                      {"underflow", f.underflow},
                      {"margin", f.margin},
                      {"stall", f.stall}});
    j["notes"] = run.notes;
    j["skipped"] = skipped;
    return j.dump(1) + "\n";
}

std::string msamp_text(const MsampRun& run, const MsampRunOptions& o, std::size_t dumps) {
    std::string out;
    appendf(out, "MS-AMP %s simulation: %zu dump(s), %zu tensors, %s\n\n", o.o2 ? "O2" : "O1", dumps, run.params.size(),
            dumps > 1 ? "one dump per rank"
                      : fmt::format("one gradient split into N ranks (spread {}, seed {})", o.spread, o.seed).c_str());
    std::size_t w = 6;
    for (const auto& p : run.params) w = std::max(w, p.size());
    allreduce_text(out, run, int(w), str(name(o.orders.front())));
    if (o.o2) optimizer_text(out, run, o, int(w));
    for (const auto& n : run.notes) appendf(out, "note: %s\n", n.c_str());
    return out;
}

}  // namespace fp8kit::simulate
