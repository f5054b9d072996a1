// watch_files: every input through the trend watcher (and dumps through the shape signals).
#include <cmath>
#include "fp8kit/io/json_number.hpp"
#include <filesystem>
#include <memory>

#include "fp8kit/analysis/trace_input.hpp"
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
        t.push_back({{"file", x.file}, {"tensor", x.tensor}, {"points", x.points}, {"spikes", x.spikes},
                     {"run_slope_log2_per_1000", num(x.run_slope_per_k)}, {"recent_slope_log2_per_1000", num(x.recent_slope_per_k)}});
    auto& s = j["shapes"] = nlohmann::json::array();
    for (const auto& x : shapes) s.push_back(x.to_json());
    auto& g = j["swiglu"] = nlohmann::json::array();
    for (const auto& x : swiglu) {
        double top = 0;
        for (double c : x.cos) top = std::max(top, std::fabs(c));
        g.push_back({{"file", x.file}, {"gate", x.gate}, {"up", x.up}, {"step", x.step}, {"aligned", x.aligned}, {"max_abs_cos", top},
                     {"cos", x.cos}});
    }
    auto& gr = j["gradients"] = nlohmann::json::array();
    for (const auto& x : gradients) gr.push_back(x.to_json());
    auto& bf = j["bf16_layers"] = nlohmann::json::array();
    for (const auto& x : bf16) bf.push_back(x.to_json());
    auto& nw = j["norm_weights"] = nlohmann::json::array();
    for (const auto& x : norms) nw.push_back(x.to_json());
    return j;
}

WatchReport watch_files(const WatchInputs& in) {
    check(in.trend);
    WatchReport r;
    for (const auto& f : in.files) {
        // 1. The amax series: a CSV trace or dlfw-inspect log streamed row by row (memory bounded
        //    by the tensors); else, or when its steps are out of order, the whole trace, or a dump's
        //    amax per dumped step (replay's loader).
        const bool is_dump = dump::is_dump_file(f);
        const bool file = !is_dump && !std::filesystem::is_directory(f);
        auto w = std::make_unique<Watcher>(in.trend, f);
        if (!file || !watch_stream(*w, f, in.tensors)) {
            w = std::make_unique<Watcher>(in.trend, f);
            try {
                watch_trace(*w, trace::load_trace(f, in.tensors, in.read));
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
            r.tensors.push_back({f, tr.tensor(), tr.points(), tr.spike_count(), tr.run_slope_per_k(), tr.recent_slope_per_k()});
        // 2. Shapes of a dump's tensors.
        if (in.shapes && dump::is_dump_file(f)) {
            ShapeResult s = shape_signals({f}, in.shape, in.read);
            for (auto& x : s.warnings) r.warnings.push_back(std::move(x));
            for (auto& x : s.tensors) r.shapes.push_back(std::move(x));
            for (auto& x : s.swiglu) r.swiglu.push_back(std::move(x));
            for (auto& x : s.gradients) r.gradients.push_back(std::move(x));
            for (auto& x : s.bf16) r.bf16.push_back(std::move(x));
            for (auto& x : s.norms) r.norms.push_back(std::move(x));
        }
    }
    rank(r.warnings);
    return r;
}

}  // namespace fp8kit::warn
