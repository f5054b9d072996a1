// Per-tensor analysis for `fp8kit inspect`: dump readers in, statistics.hpp out.
#include "fp8kit/analysis/inspect.hpp"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::inspect {

void check_recipe(const RecipeSpec& r) {
    if (r.kind != RecipeKind::current)
        throw std::invalid_argument(
            fmt::format("recipe '{}' is {} scaling: its scale depends on the amaxes of earlier steps, which a "
                        "dump does not hold; use a current-scaling recipe (te-current, te-block, mxfp8, ...)",
                        r.name, name(r.kind)));
}

namespace {

RecipeSpec with_format(RecipeSpec r, std::optional<Format> f) {
    if (f) r.input.format = r.weight.format = r.grad.format = *f;
    return r;
}

QuantConfig config(const RecipeSpec& r, Role role, Format f, const ScalePair& sp) {
    QuantConfig c{};
    c.format = f;
    c.scale = sp.scale;
    c.scale_inv = sp.scale_inv;
    c.policy = r.policy_for(role);
    return c;
}

}  // namespace

namespace {

// What analyse needs before reading: recipe, role, format and granularity of tensor t.
Result plan(const dump::TensorInfo& t, const RecipeSpec& r) {
    Result res;
    res.role = recipe_slot(t.role);
    res.format = r.role(res.role).format;
    res.granularity = r.role(res.role).granularity;
    return res;
}

std::size_t bytes_of(const dump::TensorInfo& t) { return static_cast<std::size_t>(t.numel) * wide_size(t.wide); }

bool fits(const dump::TensorInfo& t, const Options& opts) { return t.numel <= opts.memory_bytes / wide_size(t.wide); }

// Reads tensor i whole into buf and returns its amax_of. A buffer is reused while it is large
// enough and, with `other` bytes held elsewhere, within `limit` (reuse saves the page faults of a
// fresh allocation); otherwise it is replaced by one of exactly the tensor's size. The maximum is
// taken piece by piece as the pieces land (read_into: on the pool's workers while later chunks
// are read and decoded); a maximum combines exactly in any order, so it is the same for any
// thread count.
float load_whole(dump::Dump& d, std::size_t i, std::vector<unsigned char>& buf, std::size_t other = 0,
                 std::size_t limit = SIZE_MAX) {
    const dump::TensorInfo& t = d.tensors().at(i);
    const std::size_t esize = wide_size(t.wide);
    if (buf.size() < bytes_of(t) || buf.size() + other > limit) {
        std::vector<unsigned char>().swap(buf);  // free before allocating
        buf.resize(bytes_of(t));
    }
    // amax_of is >= 0 (never NaN): its bits order as its values do.
    std::atomic<std::uint32_t> amax{0};
    d.read_into(i, buf.data(), [&](std::uint64_t first, std::size_t count) {
        const float a = amax_of_here(buf.data() + first * esize, t.wide, count);
        std::uint32_t bits = 0;
        std::memcpy(&bits, &a, sizeof bits);
        std::uint32_t seen = amax.load(std::memory_order_relaxed);
        while (bits > seen && !amax.compare_exchange_weak(seen, bits, std::memory_order_relaxed)) {}
    });
    const std::uint32_t bits = amax.load();
    float a = 0;
    std::memcpy(&a, &bits, sizeof a);
    return a;
}

Result analyse_whole(const dump::TensorInfo& t, const unsigned char* data, float amax, const Options& opts) {
    const RecipeSpec r = with_format(opts.recipe, opts.format);
    Result res = plan(t, r);
    const std::size_t n = static_cast<std::size_t>(t.numel);
    res.amax = amax;
    if (res.granularity == Granularity::tensor) {
        res.scale = recipe_scale(r, res.role, res.amax);
        res.stats = opts.device.compute(data, t.wide, n, config(r, res.role, res.format, res.scale));
    } else {
        // Block scales tile a 2-D view: rows of the last dimension.
        const std::size_t cols = t.shape.empty() ? 1 : static_cast<std::size_t>(t.shape.back());
        const BlockRecipe br = block_recipe(r, res.role, cols);
        res.blocks = std::make_shared<const BlockStats>(opts.device.compute_blocks(data, t.wide, n / cols, cols, br));
        res.stats = res.blocks->total;
    }
    return res;
}

// A tensor mapped from the file (Dump::map): no copy; amax and statistics read the page cache,
// each pass over all threads (OpenMP) in fixed element chunks.
Result analyse_mapped(const dump::TensorInfo& t, const void* data, const Options& opts) {
    const auto* bytes = static_cast<const unsigned char*>(data);
    return analyse_whole(t, bytes, amax_of(bytes, t.wide, static_cast<std::size_t>(t.numel)), opts);
}

Result analyse_streamed(dump::Dump& d, std::size_t i, const Options& opts) {
    const dump::TensorInfo& t = d.tensors().at(i);
    const RecipeSpec r = with_format(opts.recipe, opts.format);
    Result res = plan(t, r);
    if (res.granularity != Granularity::tensor)
        throw std::invalid_argument(fmt::format("{} MiB is more than the {} MiB a {}-scaled recipe may hold in memory",
                                                bytes_of(t) >> 20, opts.memory_bytes >> 20, name(res.granularity)));
    if (r.policy_for(res.role).rounding == Rounding::stochastic)
        throw std::invalid_argument(
            fmt::format("{} MiB is more than the {} MiB stochastic rounding may hold in memory (its random bits "
                        "follow the element index across the whole tensor)",
                        bytes_of(t) >> 20, opts.memory_bytes >> 20));
    // Streamed: the amax of every chunk, then statistics chunk by chunk. amax_of is a maximum,
    // so combining chunks is exact; the binary64 sums are merged in chunk order (fixed chunk
    // size, so the same for any thread count).
    res.streamed = true;
    float amax = 0;
    // A fill-value run (read_runs: c.repeat copies of one value) is that value's statistics
    // times c.repeat, in O(1) (times(): counts exact, sums one rounding).
    d.read_runs(i, [&](const dump::Chunk& c) { amax = std::max(amax, amax_of(c.bits, c.wide, c.count)); });
    res.amax = amax;
    res.scale = recipe_scale(r, res.role, amax);
    const QuantConfig cfg = config(r, res.role, res.format, res.scale);
    d.read_runs(i, [&](const dump::Chunk& c) {
        const QuantStats s = opts.device.compute(c.bits, c.wide, c.count, cfg);
        res.stats.merge(c.repeat > 1 ? times(s, c.repeat) : s);
    });
    return res;
}

}  // namespace

Result analyse(dump::Dump& d, std::size_t i, const Options& opts) {
    std::vector<unsigned char> whole;
    return analyse(d, i, opts, whole);
}

Result analyse(dump::Dump& d, std::size_t i, const Options& opts, std::vector<unsigned char>& buf) {
    check_recipe(opts.recipe);
    const dump::TensorInfo& t = d.tensors().at(i);
    if (!fits(t, opts)) return analyse_streamed(d, i, opts);
    if (const auto view = d.map(i)) return analyse_mapped(t, view.get(), opts);
    const float amax = load_whole(d, i, buf, 0, opts.memory_bytes);
    return analyse_whole(t, buf.data(), amax, opts);
}

void analyse_all(dump::Dump& d, const Options& opts, const Done& done) {
    analyse_range(d, opts, 0, d.tensors().size(), done);
}

void analyse_range(dump::Dump& d, const Options& opts, std::size_t first, std::size_t last, const Done& done) {
    check_recipe(opts.recipe);
    // One tensor at a time: its chunks are read and decoded by the thread pool (parallel/pool.hpp)
    // inside Dump::read, and its statistics by OpenMP over fixed element chunks, both in a fixed
    // order. No thread is started per tensor (a dump of 10^5 tiny tensors paid for one each), and
    // one buffer, reused while large enough, holds the tensor.
    std::vector<unsigned char> buf;
    last = std::min(last, d.tensors().size());
    for (std::size_t i = first; i < last; ++i) {
        const dump::TensorInfo& t = d.tensors()[i];
        std::exception_ptr failed;
        std::optional<Result> res;
        try {
            if (const auto view = fits(t, opts) ? d.map(i) : nullptr) {
                res = analyse_mapped(t, view.get(), opts);
            } else if (fits(t, opts)) {
                const float amax = load_whole(d, i, buf, 0, opts.memory_bytes);
                res = analyse_whole(t, buf.data(), amax, opts);
            } else {
                std::vector<unsigned char>().swap(buf);
                res = analyse_streamed(d, i, opts);
            }
        } catch (...) {
            failed = std::current_exception();
        }
        done(i, res ? &*res : nullptr, failed);
    }
}

}  // namespace fp8kit::inspect
