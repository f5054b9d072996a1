// watch_files: every input through the trend watcher (and dumps through the shape signals).
#include <algorithm>
#include <cmath>
#include "fp8kit/io/json_number.hpp"
#include <filesystem>
#include <memory>

#include <fmt/format.h>

#include "fp8kit/analysis/trace_input.hpp"
#include "fp8kit/io/printable.hpp"
#include "fp8kit/warn/watch.hpp"

namespace fp8kit::warn {
namespace {

nlohmann::json num(double v) { return io::json_number(v); }  // non-finite: io/json_number.hpp

}  // namespace

nlohmann::json WatchReport::to_json() const {
    nlohmann::json j;
    auto& w = j["warnings"] = nlohmann::json::array();
    for (const auto& x : warnings) w.push_back(warn::to_json(x));
    auto& t = j["tensors"] = nlohmann::json::array();
    for (const auto& x : tensors)
        t.push_back({{"file", x.file},
                     {"tensor", x.tensor},
                     {"points", x.points},
                     {"spikes", x.spikes},
                     {"spikes_after_warmup", x.spikes_after_warmup},
                     {"steps_after_warmup", x.steps_after_warmup},
                     {"run_slope_log2_per_1000", num(x.run_slope_per_k)},
                     {"recent_slope_log2_per_1000", num(x.recent_slope_per_k)}});
    j["skipped"] = skipped;
    auto& s = j["shapes"] = nlohmann::json::array();
    for (const auto& x : shapes) s.push_back(x.to_json());
    auto& g = j["swiglu"] = nlohmann::json::array();
    for (const auto& x : swiglu) {
        double top = 0;
        for (double c : x.cos) top = std::max(top, std::fabs(c));
        g.push_back({{"file", x.file},
                     {"gate", x.gate},
                     {"up", x.up},
                     {"step", x.step},
                     {"aligned", x.aligned},
                     {"max_abs_cos", top},
                     {"cos", x.cos}});
    }
    auto& gr = j["gradients"] = nlohmann::json::array();
    for (const auto& x : gradients) gr.push_back(x.to_json());
    auto& bf = j["bf16_layers"] = nlohmann::json::array();
    for (const auto& x : bf16) bf.push_back(x.to_json());
    auto& nw = j["norm_weights"] = nlohmann::json::array();
    for (const auto& x : norms) nw.push_back(x.to_json());
    j["risk"] = risk.to_json();
    return j;
}

void write_text(const WatchReport& rep, std::size_t most, std::FILE* out) {
    // Top-level warnings (ranked first), then the info section folded by signal and reason.
    const auto top = static_cast<std::size_t>(
        std::count_if(rep.warnings.begin(), rep.warnings.end(), [](const Warning& w) { return w.level == "warning"; }));
    fmt::print(out, "{} tensor series, {} dumped tensors, {} SwiGLU pairs: {} warning(s), {} info\n\n",
               rep.tensors.size(), rep.shapes.size(), rep.swiglu.size(), top, rep.warnings.size() - top);
    for (const auto& n : rep.skipped) fmt::print(out, "note: skipped {}\n", io::printable(n.describe()));
    for (std::size_t i = 0; i < top && (most == 0 || i < most); ++i)
        fmt::print(out, "{}. {}\n", i + 1, to_text(rep.warnings[i]));
    if (most && top > most) fmt::print(out, "... {} more warning(s) (--top 0 lists all, --json has all)\n", top - most);
    if (top < rep.warnings.size())
        fmt::print(out, "info ({} item(s), each with its evidence in --json and --csv):\n{}", rep.warnings.size() - top,
                   info_text(rep.warnings));
    for (const auto& c : rep.bf16) {
        std::string last, err;
        for (const auto& l : c.last) last += (last.empty() ? "" : ", ") + io::printable(l);
        for (const auto& l : c.by_error) err += (err.empty() ? "" : ", ") + io::printable(l);
        fmt::print(out,
                   "BF16 layers under {} ({}, step {}): {} of {} linear layers, the last: {}; by wgrad error: {}\n",
                   c.recipe, io::printable(c.file), c.step, c.keep, c.linear_layers, last, err);
    }
}

void write_json(const WatchReport& rep, const std::vector<std::string>& files, std::FILE* out) {
    nlohmann::json j = rep.to_json();
    j["files"] = files;
    fmt::print(out, "{}\n", j.dump(1, ' ', false, nlohmann::json::error_handler_t::replace));
}

void write_csv(const WatchReport& rep, std::FILE* out) {
    fmt::print(out, "{}\n", csv_header());
    for (const auto& w : rep.warnings) fmt::print(out, "{}\n", to_csv_row(w));
}

WatchReport watch_files(const WatchInputs& in) {
    check(in.trend);
    WatchReport r;
    for (const auto& f : in.files) {
        // 1. The amax series: a CSV trace or dlfw-inspect log streamed row by row (memory bounded
        //    by the tensors); else, or when its steps are out of order, the whole trace, or a dump's
        //    amax per dumped step (replay's loader).
        const bool is_dump = dump::is_dump_file(f);
        // (The error_code form: a name the system refuses, too long for one, is the reader's
        // named error below, not a filesystem_error quoting the whole path.)
        std::error_code ec;
        const bool file = !is_dump && !std::filesystem::is_directory(f, ec);
        auto w = std::make_unique<Watcher>(in.trend, f);
        if (!file || !watch_stream(*w, f, in.tensors)) {
            w = std::make_unique<Watcher>(in.trend, f);
            try {
                const trace::Trace tr = trace::load_trace(f, in.tensors, in.read);
                watch_trace(*w, tr);
                // The datasets the dump's reader skipped; with the shape signals on, their own
                // reading of the same dump names them (below).
                if (!(in.shapes && is_dump)) r.skipped.insert(r.skipped.end(), tr.skipped.begin(), tr.skipped.end());
            } catch (const trace::TraceError&) {
                // A dump whose tensors carry no step (a checkpoint) has no amax series: it gets the
                // shape signals only, whose reading reports a dump that is broken.
                if (!is_dump || !in.shapes) throw;
                w = std::make_unique<Watcher>(in.trend, f);
            }
        }
        const Watcher& wr = *w;
        for (auto& x : wr.warnings()) r.warnings.push_back(std::move(x));
        for (const auto& tr : wr.trends())
            r.tensors.push_back({f, tr.tensor(), tr.points(), tr.spike_count(), tr.run_slope_per_k(),
                                 tr.recent_slope_per_k(), tr.spikes_after_warmup(),
                                 std::max<std::int64_t>(0, tr.last_step() - tr.warmup_end())});
        // 2. Shapes of a dump's tensors.
        if (in.shapes && dump::is_dump_file(f)) {
            ShapeResult s = shape_signals({f}, in.shape, in.read);
            for (auto& x : s.warnings) r.warnings.push_back(std::move(x));
            for (auto& x : s.tensors) r.shapes.push_back(std::move(x));
            for (auto& x : s.swiglu) r.swiglu.push_back(std::move(x));
            for (auto& x : s.gradients) r.gradients.push_back(std::move(x));
            for (auto& x : s.bf16) r.bf16.push_back(std::move(x));
            for (auto& x : s.norms) r.norms.push_back(std::move(x));
            for (auto& x : s.skipped) r.skipped.push_back(std::move(x));
        }
    }
    if (!in.grad_norm.empty()) {
        GradNormVerdict v;
        read_grad_norms(in.grad_norm, v);
        if (auto w = v.warning(in.grad_norm)) r.warnings.push_back(std::move(*w));
    }
    rank(r.warnings);
    r.risk = risk(r);
    return r;
}

RiskReport risk(const WatchReport& r, const RiskConfig& c) {
    RiskReport out;
    auto add = [&](std::string signal, const std::string& file, const std::string& tensor, double v, double ref,
                   double score, std::int64_t step) {
        if (!std::isfinite(score)) return;
        out.signals.push_back({std::move(signal), file, tensor, v, ref, score, step});
        if (score > out.run_score) {
            out.run_score = score;
            out.run_signal = out.signals.back().signal;
            out.run_tensor = tensor;
        }
    };
    for (const auto& t : r.tensors)
        if (t.steps_after_warmup > 0) {
            const double d =
                1000.0 * static_cast<double>(t.spikes_after_warmup) / static_cast<double>(t.steps_after_warmup);
            add("spike-density", t.file, t.tensor, d, c.spike_density, d / c.spike_density, -1);
        }
    for (const auto& g : r.gradients) {
        double lo = INFINITY;
        for (const auto& x : g.recipes)
            if (x.skipped.empty()) lo = std::min({lo, x.ratio_rtn(), x.ratio_sr()});
        if (std::isfinite(lo) && lo > 0)
            add("grad-noise-ratio", g.file, g.layer, lo, c.grad_ratio, c.grad_ratio / lo, g.step);
    }
    // Dumped tensors by name without the step component: first and last dumped step.
    struct Span {
        const ShapeStats *first = nullptr, *last = nullptr;
    };
    std::vector<std::pair<std::string, Span>> spans;
    for (const auto& s : r.shapes) {
        std::string name = s.file + '\0' + s.tensor;
        if (s.tensor.rfind("step_", 0) == 0 && s.tensor.find('/') != std::string::npos)
            name = s.file + '\0' + s.tensor.substr(s.tensor.find('/') + 1);
        auto it = std::find_if(spans.begin(), spans.end(), [&](const auto& x) { return x.first == name; });
        if (it == spans.end()) {
            spans.push_back({name, {&s, &s}});
            continue;
        }
        if (s.step < it->second.first->step) it->second.first = &s;
        if (s.step > it->second.last->step) it->second.last = &s;
    }
    for (const auto& [key, sp] : spans) {
        const std::string tensor = key.substr(key.find('\0') + 1);
        const ShapeStats &a = *sp.first, &b = *sp.last;
        if (b.kurtosis > 0) add("kurtosis", b.file, tensor, b.kurtosis, c.kurtosis, b.kurtosis / c.kurtosis, b.step);
        if (b.step > a.step) {
            const double per_k = 1000.0 / static_cast<double>(b.step - a.step);
            if (a.kurtosis > 0 && b.kurtosis > 0) {
                const double tr = std::log2(b.kurtosis / a.kurtosis) * per_k;
                add("kurtosis-trend", b.file, tensor, tr, c.kurtosis_trend, tr / c.kurtosis_trend, b.step);
            }
            if (a.has_blocks && b.has_blocks) {
                const double rate = (b.scale_log2_std - a.scale_log2_std) * per_k;
                add("scale-spread-rate", b.file, tensor, rate, c.scale_spread_rate, rate / c.scale_spread_rate, b.step);
            }
        }
    }
    return out;
}

nlohmann::json RiskReport::to_json() const {
    nlohmann::json s = nlohmann::json::array();
    for (const auto& x : signals)
        s.push_back({{"signal", x.signal},
                     {"file", x.file},
                     {"tensor", x.tensor},
                     {"value", x.value},
                     {"reference", x.reference},
                     {"score", x.score},
                     {"step", x.step}});
    return {{"calibrated", false},      {"verdict", nullptr},       {"run_score", run_score},
            {"run_signal", run_signal}, {"run_tensor", run_tensor}, {"signals", s}};
}

}  // namespace fp8kit::warn
