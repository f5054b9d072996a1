// Watcher: many tensors' trends by name, and the per-interval poll a monitor calls.
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {

Watcher::Watcher(TrendConfig cfg, std::string file)
    : cfg_(std::make_unique<TrendConfig>(std::move(cfg))), file_(std::move(file)) {
    check(*cfg_);
}

std::size_t Watcher::id(std::string_view tensor, std::optional<Role> role) {
    const std::string key(tensor);
    const auto it = index_.find(key);
    if (it != index_.end()) return it->second;
    const Role r = role ? *role : recipe_slot(guess_role(tensor));
    trends_.emplace_back(key, r, cfg_.get());
    index_.emplace(key, trends_.size() - 1);
    return trends_.size() - 1;
}

void Watcher::observe_step(std::int64_t step, const std::vector<std::string>& tensors, const std::vector<float>& amax) {
    if (tensors.size() != amax.size())
        throw std::invalid_argument(
            fmt::format("observe_step: {} tensor names but {} amaxes", tensors.size(), amax.size()));
    for (std::size_t i = 0; i < tensors.size(); ++i) observe(id(tensors[i]), step, amax[i]);
}

std::vector<Warning> Watcher::warnings() const {
    std::vector<Warning> out;
    for (const auto& t : trends_)
        for (auto& w : t.warnings(file_)) out.push_back(std::move(w));
    if (auto w = grad_norm_.warning(file_)) out.push_back(std::move(*w));
    group_overflows(out);
    rank(out);
    return out;
}

std::vector<Warning> Watcher::poll() {
    std::vector<Warning> fresh;
    for (auto& w : warnings()) {
        // Each (tensor, signal) once; a growth episode is its own warning (new growth is raised
        // again), and a top-level overflow, overflow group or spike is raised again when a later
        // step adds to it.
        std::string key = w.tensor + '\0' + w.signal;
        if (w.signal == "growth")
            key += '\0' + std::to_string(w.step);
        else if (w.level == "warning" &&
                 (w.signal == "overflow" || w.signal == "overflow-group" || w.signal == "spike"))
            key += '\0' + w.numbers.value("count", nlohmann::json(0)).dump();
        if (polled_.emplace(key, w.step).second) fresh.push_back(std::move(w));
    }
    return fresh;
}

void watch_trace(Watcher& w, const trace::Trace& t) {
    std::vector<std::size_t> ids;
    ids.reserve(t.series.size());
    for (const auto& s : t.series) {
        // observe throws on a step that does not increase; nothing may throw inside the parallel
        // loop below (an exception leaving an OpenMP region terminates), so the steps are checked
        // here, including against what the tensor has already seen.
        const std::size_t id = w.id(s.tensor, s.role);
        const auto& tr = w.trends()[id];
        for (std::size_t k = 0; k < s.steps.size(); ++k)
            if ((k > 0 && s.steps[k] <= s.steps[k - 1]) || (k == 0 && tr.points() > 0 && s.steps[0] <= tr.last_step()))
                throw std::invalid_argument(
                    fmt::format("tensor '{}': step {} does not follow the steps before it (steps must increase)",
                                s.tensor, s.steps[k]));
        ids.push_back(id);
    }
    // The same tensor twice would be fed from two threads at once (the readers never give it).
    std::vector<char> seen(w.trends().size(), 0);
    for (std::size_t i = 0; i < ids.size(); ++i)
        if (seen[ids[i]]++)
            throw std::invalid_argument(fmt::format("tensor '{}' appears twice in the trace", t.series[i].tensor));
    auto& trends = w.trends();
    const auto n = static_cast<std::ptrdiff_t>(t.series.size());
    // Each series touches only its own state: the result is the same for any thread count.
#pragma omp parallel for schedule(dynamic, 64)
    for (std::ptrdiff_t i = 0; i < n; ++i) {
        const auto& s = t.series[static_cast<std::size_t>(i)];
        auto& tr = trends[ids[static_cast<std::size_t>(i)]];
        for (std::size_t k = 0; k < s.steps.size(); ++k) tr.observe(s.steps[k], s.amax[k]);
    }
}

}  // namespace fp8kit::warn
