// Per-tensor analysis for `fp8kit inspect`: dump readers in, statistics.hpp out.
#include "fp8kit/analysis/inspect.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <exception>
#include <future>
#include <optional>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::inspect {

void check_recipe(const RecipeSpec& r) {
    if (r.kind != RecipeKind::current)
        throw std::invalid_argument(fmt::format(
            "recipe '{}' is {} scaling: its scale depends on the amaxes of earlier steps, which a "
            "dump does not hold; use a current-scaling recipe (te-current, te-block, mxfp8, ...)",
            r.name, name(r.kind)));
}

namespace {

RecipeSpec with_format(RecipeSpec r, std::optional<Format> f) {
    if (f) r.input.format = r.weight.format = r.grad.format = *f;
    return r;
}

QuantConfig config(const RecipeSpec& r, Format f, const ScalePair& sp) {
    QuantConfig c{};
    c.format = f;
    c.scale = sp.scale;
    c.scale_inv = sp.scale_inv;
    c.policy = r.policy;
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

std::size_t bytes_of(const dump::TensorInfo& t) {
    return static_cast<std::size_t>(t.numel) * wide_size(t.wide);
}

bool fits(const dump::TensorInfo& t, const Options& opts) {
    return t.numel <= opts.memory_bytes / wide_size(t.wide);
}

// Reads tensor i whole into buf. A buffer is reused while it is large enough and, with `other`
// bytes held elsewhere, within `limit` (reuse saves the page faults of a fresh allocation);
// otherwise it is replaced by one of exactly the tensor's size.
void load_whole(dump::Dump& d, std::size_t i, std::vector<unsigned char>& buf, std::size_t other = 0,
                std::size_t limit = SIZE_MAX) {
    const dump::TensorInfo& t = d.tensors().at(i);
    const std::size_t esize = wide_size(t.wide);
    if (buf.size() < bytes_of(t) || buf.size() + other > limit) {
        std::vector<unsigned char>().swap(buf);  // free before allocating
        buf.resize(bytes_of(t));
    }
    d.read(i, [&](const dump::Chunk& c) { std::memcpy(buf.data() + c.first * esize, c.bits, c.count * esize); });
}

Result analyse_whole(const dump::TensorInfo& t, const unsigned char* data, const Options& opts) {
    const RecipeSpec r = with_format(opts.recipe, opts.format);
    Result res = plan(t, r);
    const std::size_t n = static_cast<std::size_t>(t.numel);
    res.amax = amax_of(data, t.wide, n);
    if (res.granularity == Granularity::tensor) {
        res.scale = recipe_scale(r, res.role, res.amax);
        res.stats = compute_stats(data, t.wide, n, config(r, res.format, res.scale));
    } else {
        // Block scales tile a 2-D view: rows of the last dimension.
        const std::size_t cols = t.shape.empty() ? 1 : static_cast<std::size_t>(t.shape.back());
        const BlockRecipe br = block_recipe(r, res.role, cols);
        res.blocks = compute_block_stats(data, t.wide, n / cols, cols, br);
        res.stats = res.blocks->total;
    }
    return res;
}

Result analyse_streamed(dump::Dump& d, std::size_t i, const Options& opts) {
    const dump::TensorInfo& t = d.tensors().at(i);
    const RecipeSpec r = with_format(opts.recipe, opts.format);
    Result res = plan(t, r);
    if (res.granularity != Granularity::tensor)
        throw std::invalid_argument(fmt::format(
            "{} MiB is more than the {} MiB a {}-scaled recipe may hold in memory", bytes_of(t) >> 20,
            opts.memory_bytes >> 20, name(res.granularity)));
    if (r.policy.rounding == Rounding::stochastic)
        throw std::invalid_argument(fmt::format(
            "{} MiB is more than the {} MiB stochastic rounding may hold in memory (its random bits "
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
    const QuantConfig cfg = config(r, res.format, res.scale);
    d.read_runs(i, [&](const dump::Chunk& c) {
        const QuantStats s = compute_stats(c.bits, c.wide, c.count, cfg);
        res.stats.merge(c.repeat > 1 ? times(s, c.repeat) : s);
    });
    return res;
}

}  // namespace

Result analyse(dump::Dump& d, std::size_t i, const Options& opts) {
    check_recipe(opts.recipe);
    const dump::TensorInfo& t = d.tensors().at(i);
    if (!fits(t, opts)) return analyse_streamed(d, i, opts);
    std::vector<unsigned char> whole;
    load_whole(d, i, whole);
    return analyse_whole(t, whole.data(), opts);
}

void analyse_all(dump::Dump& d, const Options& opts, const Done& done) {
    check_recipe(opts.recipe);
    const std::size_t n = d.tensors().size();
    // Two buffers: tensor i is analysed from one while tensor i + 1 is read into the other by a
    // second thread (decompression in libhdf5 is single-threaded, so it would otherwise leave the
    // statistics threads idle, and they it). Only that thread touches `d` while a read is in
    // flight. Both buffers together stay within opts.memory_bytes.
    std::vector<unsigned char> buf[2];
    int slot = 0;             // buf[slot] holds tensor i
    std::future<void> next;   // valid while tensor i + 1 is being read into buf[1 - slot]
    for (std::size_t i = 0; i < n; ++i) {
        const dump::TensorInfo& t = d.tensors()[i];
        std::exception_ptr failed;
        std::optional<Result> res;
        try {
            if (next.valid()) {
                slot = 1 - slot;
                next.get();  // rethrows the reader's DumpError
            } else if (fits(t, opts)) {
                std::vector<unsigned char>().swap(buf[1 - slot]);  // nothing in flight: not needed
                load_whole(d, i, buf[slot]);
            }
        } catch (...) {
            failed = std::current_exception();
        }
        // Start reading the next tensor before the statistics of this one, when both fit.
        if (i + 1 < n && fits(t, opts) && fits(d.tensors()[i + 1], opts) &&
            buf[slot].size() + bytes_of(d.tensors()[i + 1]) <= opts.memory_bytes) {
            std::vector<unsigned char>& into = buf[1 - slot];
            const std::size_t held = buf[slot].size(), limit = opts.memory_bytes;
            next = std::async(std::launch::async,
                              [&d, &into, i, held, limit] { load_whole(d, i + 1, into, held, limit); });
        }
        if (!failed) {
            try {
                res = fits(t, opts) ? analyse_whole(t, buf[slot].data(), opts) : analyse_streamed(d, i, opts);
            } catch (...) {
                failed = std::current_exception();
            }
        }
        done(i, res ? &*res : nullptr, failed);
    }
}

}  // namespace fp8kit::inspect
