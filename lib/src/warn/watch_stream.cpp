// watch_stream: a trace file fed to a Watcher row by row as it is read, memory bounded by the
// tensors (the watcher's windows, one index entry and one last step per tensor, one batch of rows)
// rather than by the steps (docs/early-warning.md, "Streaming").
#include <omp.h>

#include <unordered_map>

#include "fp8kit/numerics/roles.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {
namespace {

struct Row {
    std::uint32_t id;
    float amax;
    std::int64_t step;
};

// Rows of a batch go to the thread that owns their tensor (id % threads), in file order: each
// tensor sees its steps in order, whatever the thread count, so the state is the same for any.
void feed(Watcher& w, const std::vector<Row>& rows) {
    auto& trends = w.trends();
#pragma omp parallel
    {
        const auto k = static_cast<std::uint32_t>(omp_get_thread_num()), n = static_cast<std::uint32_t>(omp_get_num_threads());
        for (const Row& r : rows)
            if (r.id % n == k) trends[r.id].observe(r.step, r.amax);
    }
}

}  // namespace

bool watch_stream(Watcher& w, const std::string& path, const std::vector<std::string>& patterns) {
    constexpr std::size_t kBatch = 1 << 20;
    std::unordered_map<std::string, std::int64_t> index;  // name -> watcher id, -1: filtered out
    std::vector<std::int64_t> last;                      // per watcher id: its last step
    std::vector<Row> batch;
    batch.reserve(kBatch);
    bool in_order = true;
    struct OutOfOrder {};
    try {
        trace::stream_rows(path, [&](const std::string& tensor, std::int64_t step, float amax, std::size_t) {
            auto it = index.find(tensor);
            if (it == index.end()) {
                bool keep = patterns.empty();
                for (const auto& p : patterns) keep = keep || trace::matches(p, tensor);
                const std::int64_t id = keep ? static_cast<std::int64_t>(w.id(tensor, recipe_slot(guess_role(tensor)))) : -1;
                it = index.emplace(tensor, id).first;
                if (id >= 0) last.resize(w.trends().size(), -1);
            }
            if (it->second < 0) return;
            const auto id = static_cast<std::size_t>(it->second);
            // A step that does not increase needs the series sorted (or is an error the whole-file
            // reader reports with both lines): the caller reads the file whole instead.
            if (step <= last[id]) throw OutOfOrder{};
            last[id] = step;
            batch.push_back({static_cast<std::uint32_t>(id), amax, step});
            if (batch.size() == kBatch) {
                feed(w, batch);
                batch.clear();
            }
        });
    } catch (const OutOfOrder&) {
        in_order = false;
    }
    if (!in_order) return false;
    feed(w, batch);
    // No tensor matched: the whole-file reader's message names the patterns.
    return !w.trends().empty();
}

}  // namespace fp8kit::warn
