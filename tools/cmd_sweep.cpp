// fp8kit sweep: a grid of delayed-scaling recipes (and reference presets) over amax traces and
// tensor dumps, with per-class recommendations.
#include <cmath>
#include <cstdio>
#include <memory>

#include <nlohmann/json.hpp>

#include "command.hpp"
#include "fp8kit/analysis/sweep.hpp"
#include "fp8kit/analysis/sweep_input.hpp"
#include "recipe_args.hpp"

namespace fp8kit::cli {
namespace {

struct SweepOpts {
    std::vector<std::string> inputs, tensors;
    std::string format = "auto";
    bool csv = false, json = false, blocks = true;
    int top = 5;
};

constexpr Role kClasses[] = {Role::input, Role::weight, Role::grad};

nlohmann::json num(double v) {
    if (std::isnan(v)) return nullptr;
    if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
    return v;
}

std::string pct(double v) { return std::isnan(v) ? "-" : fmt::format("{:.3g}", 100 * v); }
std::string dbs(const sweep::Outcome& o) {
    if (o.sqnr_count == 0) return o.lossless ? "inf" : "-";
    const double lo = o.mean_sqnr_db_lo(), hi = o.mean_sqnr_db_hi();
    if (hi - lo < 0.005) return fmt::format("{:.2f}", o.mean_sqnr_db());
    return fmt::format("{:.2f} [{:.2f},{:.2f}]", o.mean_sqnr_db(), lo, hi);
}
std::string margin_str(int m) { return m < 0 ? ">4" : std::to_string(m); }

void run(const SweepOpts& o) {
    if (o.csv && o.json) throw UsageError("--csv and --json: choose one");
    if (o.top < 1) throw UsageError(fmt::format("--top {}: must be at least 1", o.top));
    std::vector<std::optional<Format>> formats;
    if (o.format == "all") formats = {Format::e4m3, Format::e5m2};
    else formats = {parse_format_choice(o.format)};
    sweep::Loaded L = sweep::load_inputs({o.inputs, o.tensors, formats, o.blocks});
    const auto& sw = L.sweep;
    sw->run(L.dumped, L.notes);
    const auto& C = sw->candidates();
    const auto& S = sw->series();
    const auto& pt = sw->per_tensor();

    if (o.csv) {
        std::printf("scope,name,class,candidate,kind,history,algo,margin,format,steps,overflow_steps,worst_headroom,"
                    "mean_log2_headroom,min_safe_margin,dumped,underflow_share,subnormal_share,sqnr_db,sqnr_db_lo,"
                    "sqnr_db_hi\n");
        auto row = [&](const char* scope, const std::string& nm, Role cls, std::size_t c, const sweep::Outcome& oc,
                       int msm) {
            const auto& r = C[c].recipe;
            const std::string f = C[c].blockwise ? "e4m3" : std::string(name(replay::role_format(r, cls, C[c].forced)));
            std::printf("%s,%s,%s,\"%s\",%s,%d,%s,%d,%s,%zu,%zu,%.9g,%.9g,%s,%zu,%.9g,%.9g,%.9g,%.9g,%.9g\n", scope,
                        nm.c_str(), std::string(trace::class_name(cls)).c_str(), C[c].label.c_str(),
                        std::string(name(r.kind)).c_str(), r.history_len, std::string(name(r.algo)).c_str(), r.margin,
                        f.c_str(), oc.steps, oc.overflow_steps, oc.worst_headroom, oc.mean_log2_headroom(),
                        C[c].grid ? std::to_string(msm).c_str() : "", oc.dumped, oc.underflow_share(),
                        oc.subnormal_share(), oc.mean_sqnr_db(), oc.mean_sqnr_db_lo(), oc.mean_sqnr_db_hi());
        };
        for (Role cls : kClasses) {
            if (!sw->has_class(cls)) continue;
            for (std::size_t c = 0; c < C.size(); ++c)
                row("class", std::string(trace::class_name(cls)), cls, c, sw->per_class(c, cls),
                    sw->min_safe_margin(c, -1, cls));
        }
        for (std::size_t s = 0; s < S.size(); ++s)
            for (std::size_t c = 0; c < C.size(); ++c)
                row("tensor", S[s].tensor, S[s].role, c, pt[c][s], sw->min_safe_margin(c, static_cast<long>(s), S[s].role));
        for (const auto& n : L.notes) std::fprintf(stderr, "fp8kit sweep: note: %s\n", n.c_str());
        return;
    }
    auto jout = [&](const sweep::Outcome& oc) {
        nlohmann::json j;
        j["tensors"] = oc.tensors;
        j["steps"] = oc.steps;
        j["overflow_steps"] = oc.overflow_steps;
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
    };
    if (o.json) {
        nlohmann::json j;
        j["inputs"] = o.inputs;
        j["notes"] = L.notes;
        j["candidates"] = nlohmann::json::array();
        for (const auto& c : C) {
            nlohmann::json cj = to_json(c.recipe);
            cj["label"] = c.label;
            cj["format_choice"] = c.forced ? std::string(name(*c.forced)) : "hybrid";
            cj["grid"] = c.grid;
            j["candidates"].push_back(cj);
        }
        for (Role cls : kClasses) {
            if (!sw->has_class(cls)) continue;
            auto& k = j["classes"][std::string(trace::class_name(cls))];
            k["recommendation"] = sw->recommendation(cls);
            k["ranked"] = sw->ranked(cls);
            for (std::size_t c = 0; c < C.size(); ++c) {
                auto oc = jout(sw->per_class(c, cls));
                oc["min_safe_margin"] = sw->min_safe_margin(c, -1, cls);
                k["outcomes"].push_back(oc);
            }
        }
        for (std::size_t s = 0; s < S.size(); ++s) {
            nlohmann::json t;
            t["tensor"] = S[s].tensor;
            t["class"] = std::string(trace::class_name(S[s].role));
            for (std::size_t c = 0; c < C.size(); ++c) {
                auto oc = jout(pt[c][s]);
                oc["min_safe_margin"] = sw->min_safe_margin(c, static_cast<long>(s), S[s].role);
                t["outcomes"].push_back(oc);
            }
            j["tensors"].push_back(t);
        }
        std::printf("%s\n", j.dump(1).c_str());
        return;
    }
    std::size_t grid = 0;
    for (const auto& c : C) grid += c.grid;
    std::printf("sweep: %zu recipes (%zu on the delayed grid) over %zu tensors", C.size(), grid, S.size());
    if (!L.trace_files.empty()) std::printf(" from %zu trace file(s)", L.trace_files.size());
    if (!L.dumped.empty()) std::printf("; %zu dumped tensors evaluated", L.dumped.size());
    std::printf("\n\nRecommendations\n");
    for (Role cls : kClasses)
        if (sw->has_class(cls)) std::printf("  %s\n", sw->recommendation(cls).c_str());
    const bool dumps = sw->has_dumps();
    for (Role cls : kClasses) {
        if (!sw->has_class(cls)) continue;
        const auto order = sw->ranked(cls);
        std::printf("\n%s: best %d of the grid, then references\n", std::string(trace::class_name(cls)).c_str(), o.top);
        std::printf("  %-38s %9s %12s %10s %7s", "recipe", "overflow", "worst head", "mean log2h", "margin*");
        if (dumps) std::printf(" %10s %10s  %s", "underflow%", "subnorm%", "SQNR dB [bounds]");
        std::printf("\n");
        auto line = [&](std::size_t c) {
            const auto oc = sw->per_class(c, cls);
            if (C[c].blockwise)  // no trace side: per-block scales come from the data
                std::printf("  %-38s %9s %12s %10s %7s", C[c].label.c_str(), "-", "-", "-", "-");
            else
                std::printf("  %-38s %9zu %12.4g %10.3f %7s", C[c].label.c_str(), oc.overflow_steps, oc.worst_headroom,
                            oc.mean_log2_headroom(), C[c].grid ? margin_str(sw->min_safe_margin(c, -1, cls)).c_str() : "-");
            if (dumps) std::printf(" %10s %10s  %s", pct(oc.underflow_share()).c_str(), pct(oc.subnormal_share()).c_str(), dbs(oc).c_str());
            std::printf("\n");
        };
        for (std::size_t i = 0; i < order.size() && i < static_cast<std::size_t>(o.top); ++i) line(order[i]);
        std::printf("  --\n");
        for (const auto& f : formats) {
            const std::size_t te = sw->find(1024, AmaxAlgo::max, 0, f), mg = sw->find(1, AmaxAlgo::most_recent, 0, f);
            if (te != static_cast<std::size_t>(-1)) line(te);
            if (mg != static_cast<std::size_t>(-1)) line(mg);
        }
        for (std::size_t c = 0; c < C.size(); ++c)
            if (!C[c].grid && (!C[c].blockwise || sw->per_class(c, cls).dumped)) line(c);
    }
    std::printf("\n(margin*: smallest margin 0..4 with no overflowing step for that history/algo/format)\n");
    std::printf("\nPer tensor: the recommended recipe of its class | TE default (history 1024, max, margin 0)\n");
    std::size_t w = 6;
    for (const auto& s : S) w = std::max(w, s.tensor.size());
    std::printf("  %-*s %-10s %6s | %8s %7s %10s | %8s %7s %10s\n", static_cast<int>(w), "tensor", "class", "steps",
                "overflow", "margin*", "worst head", "overflow", "margin*", "worst head");
    for (std::size_t s = 0; s < S.size(); ++s) {
        const auto best = sw->ranked(S[s].role).front();
        const std::size_t te = sw->find(1024, AmaxAlgo::max, 0, C[best].forced);
        const auto &a = pt[best][s], &b = pt[te][s];
        std::printf("  %-*s %-10s %6zu | %8zu %7s %10.4g | %8zu %7s %10.4g\n", static_cast<int>(w), S[s].tensor.c_str(),
                    std::string(trace::class_name(S[s].role)).c_str(), S[s].steps.size(), a.overflow_steps,
                    margin_str(sw->min_safe_margin(best, static_cast<long>(s), S[s].role)).c_str(), a.worst_headroom,
                    b.overflow_steps, margin_str(sw->min_safe_margin(te, static_cast<long>(s), S[s].role)).c_str(),
                    b.worst_headroom);
    }
    for (const auto& n : L.notes) std::printf("note: %s\n", n.c_str());
    if (L.notes.empty()) return;
}

Register reg([](CLI::App& root) {
    auto o = std::make_shared<SweepOpts>();
    auto* cmd = root.add_subcommand(
        "sweep",
        "Sweep delayed-scaling recipes (history 1..1024, max/most_recent, margin 0..4) and reference presets over\n"
        "amax traces and tensor dumps (HDF5/safetensors): overflows, headroom, and on dumped steps underflow,\n"
        "subnormal share and SQNR; a ranked recommendation per tensor class.");
    cmd->add_option("INPUT", o->inputs, "Amax traces (CSV, dlfw-inspect logs) and dumps (HDF5, safetensors)")->required();
    cmd->add_option("--format", o->format, "auto (hybrid: E5M2 gradients), all (E4M3 and E5M2 for every tensor), or a format")
        ->capture_default_str();
    cmd->add_option("--tensor", o->tensors, "Only tensors matching this glob (repeatable)");
    cmd->add_option("--top", o->top, "Grid rows shown per class")->capture_default_str();
    cmd->add_flag("!--no-blocks", o->blocks, "Skip the block recipes on dumps");
    cmd->add_flag("--csv", o->csv, "CSV: one row per (class or tensor, recipe)");
    cmd->add_flag("--json", o->json, "JSON: recipes, per-class and per-tensor outcomes, recommendations");
    cmd->callback([o] { run(*o); });
});

}  // namespace
}  // namespace fp8kit::cli
