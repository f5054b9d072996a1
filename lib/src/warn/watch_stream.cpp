// watch_stream: a trace file fed to a Watcher row by row as it is read, memory bounded by the
// tensors (the watcher's windows, one index entry and one last step per tensor, one batch of rows)
// rather than by the steps (docs/early-warning.md, "Streaming").
#include <future>
#include <unordered_map>

#include "fp8kit/numerics/roles.hpp"
#include "fp8kit/parallel/pool.hpp"
#include "fp8kit/warn/trend.hpp"

namespace fp8kit::warn {
namespace {

struct Row {
    std::uint32_t id;
    float amax;
    std::int64_t step;
};

// A batch is grouped by tensor (a stable counting sort: each tensor's rows keep their file order)
// and each tensor's run fed at once: its state stays in cache for the run instead of being
// fetched again for every row of a step-major file. Tensors are independent, so the state is the
// same for any thread count.
void feed(Watcher& w, const std::vector<Row>& rows, std::vector<std::size_t>& start, std::vector<Row>& sorted) {
    auto& trends = w.trends();
    start.assign(trends.size() + 1, 0);
    for (const Row& r : rows) ++start[r.id + 1];
    for (std::size_t i = 0; i < trends.size(); ++i) start[i + 1] += start[i];
    sorted.resize(rows.size());
    {
        std::vector<std::size_t> at(start.begin(), start.end() - 1);
        for (const Row& r : rows) sorted[at[r.id]++] = r;
    }
    const auto n = static_cast<std::ptrdiff_t>(trends.size());
    // The thread count set for the process (parallel::threads(), --threads): this runs on a thread
    // of its own, whose OpenMP default would be every core.
    const int team = static_cast<int>(parallel::threads());
#pragma omp parallel for schedule(dynamic, 256) num_threads(team)
    for (std::ptrdiff_t t = 0; t < n; ++t)
        for (std::size_t k = start[static_cast<std::size_t>(t)]; k < start[static_cast<std::size_t>(t) + 1]; ++k)
            trends[static_cast<std::size_t>(t)].observe(sorted[k].step, sorted[k].amax);
}

}  // namespace

bool watch_stream(Watcher& w, const std::string& path, const std::vector<std::string>& patterns) {
    constexpr std::size_t kBatch = 1 << 21;  // rows per batch: 3 x 32 MiB (read, being fed, its sorted copy)
    std::unordered_map<std::string, std::int64_t> index;  // name -> watcher id, -1: filtered out
    std::vector<std::int64_t> last;                       // per watcher id: its last step
    for (const auto& t : w.trends()) last.push_back(t.points() ? t.last_step() : -1);
    std::vector<Row> batch, inflight, sorted;
    std::vector<std::size_t> start;
    batch.reserve(kBatch);
    // The batch before is fed on another thread while this one is read (parsing and feeding cost
    // about the same): `pending` is waited for before the next hand-over and before a new tensor
    // joins the watcher (its trends may move), and on the way out (the future's destructor).
    std::future<void> pending;
    auto wait = [&] {
        if (pending.valid()) pending.get();
    };
    auto flush = [&] {
        wait();
        std::swap(batch, inflight);
        batch.clear();
        pending = std::async(std::launch::async, [&] { feed(w, inflight, start, sorted); });
    };
    bool in_order = true;
    struct OutOfOrder {};
    try {
        std::size_t prev = 0;
        trace::stream_rows(path, [&](const std::string& tensor, std::int64_t step, float amax, std::size_t) {
            // A training script writes the tensors of every step in the same order: the tensor
            // after the previous row's is tried first, the name index only when that fails.
            auto& trends = w.trends();
            std::size_t guess = prev + 1 < trends.size() ? prev + 1 : 0;
            if (guess < trends.size() && trends[guess].tensor() == tensor) {
                if (step <= last[guess]) throw OutOfOrder{};
                last[guess] = step;
                prev = guess;
                batch.push_back({static_cast<std::uint32_t>(guess), amax, step});
                if (batch.size() == kBatch) flush();
                return;
            }
            auto it = index.find(tensor);
            if (it == index.end()) {
                bool keep = patterns.empty();
                for (const auto& p : patterns) keep = keep || trace::matches(p, tensor);
                if (keep) wait();
                const std::int64_t id =
                    keep ? static_cast<std::int64_t>(w.id(tensor, recipe_slot(guess_role(tensor)))) : -1;
                it = index.emplace(tensor, id).first;
                if (id >= 0) last.resize(w.trends().size(), -1);
            }
            if (it->second < 0) return;
            const auto id = static_cast<std::size_t>(it->second);
            prev = id;
            // A step that does not increase needs the series sorted (or is an error the whole-file
            // reader reports with both lines): the caller reads the file whole instead.
            if (step <= last[id]) throw OutOfOrder{};
            last[id] = step;
            batch.push_back({static_cast<std::uint32_t>(id), amax, step});
            if (batch.size() == kBatch) flush();
        });
    } catch (const OutOfOrder&) {
        in_order = false;
    }
    wait();
    if (!in_order) return false;
    feed(w, batch, start, sorted);
    // No tensor matched: the whole-file reader's message names the patterns.
    return !w.trends().empty();
}

}  // namespace fp8kit::warn
