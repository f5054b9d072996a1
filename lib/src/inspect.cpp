// Per-tensor analysis for `fp8kit inspect`: dump readers in, statistics.hpp out.
#include "fp8kit/inspect.hpp"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "fp8kit/quantize.hpp"

namespace fp8kit::inspect {

void check_recipe(const RecipeSpec& r) {
    if (r.kind != RecipeKind::current)
        throw std::invalid_argument(fmt::format(
            "recipe '{}' is {} scaling: its scale depends on the amaxes of earlier steps, which a "
            "dump does not hold; use a current-scaling recipe (te-current, te-block, mxfp8, ...)",
            r.name, name(r.kind)));
}

Role recipe_role(dump::Role r) {
    switch (r) {
        case dump::Role::gradient: return Role::grad;
        case dump::Role::weight: return Role::weight;
        default: return Role::input;
    }
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

Result analyse(dump::Dump& d, std::size_t i, const Options& opts) {
    check_recipe(opts.recipe);
    const dump::TensorInfo& t = d.tensors().at(i);
    const RecipeSpec r = with_format(opts.recipe, opts.format);
    Result res;
    res.role = recipe_role(t.role);
    res.format = r.role(res.role).format;
    res.granularity = r.role(res.role).granularity;
    const std::size_t esize = wide_size(t.wide);
    const bool fits = t.numel <= opts.memory_bytes / esize;

    if (fits) {
        std::vector<unsigned char> whole(static_cast<std::size_t>(t.numel) * esize);
        d.read(i, [&](const dump::Chunk& c) {
            std::memcpy(whole.data() + c.first * esize, c.bits, c.count * esize);
        });
        const std::size_t n = static_cast<std::size_t>(t.numel);
        res.amax = amax_of(whole.data(), t.wide, n);
        if (res.granularity == Granularity::tensor) {
            res.scale = recipe_scale(r, res.role, res.amax);
            res.stats = compute_stats(whole.data(), t.wide, n, config(r, res.format, res.scale));
        } else {
            // Block scales tile a 2-D view: rows of the last dimension.
            const std::size_t cols = t.shape.empty() ? 1 : static_cast<std::size_t>(t.shape.back());
            const BlockRecipe br = block_recipe(r, res.role, cols);
            res.blocks = compute_block_stats(whole.data(), t.wide, n / cols, cols, br);
            res.stats = res.blocks->total;
        }
        return res;
    }
    if (res.granularity != Granularity::tensor)
        throw std::invalid_argument(fmt::format(
            "{} MiB is more than the {} MiB a {}-scaled recipe may hold in memory",
            (t.numel * esize) >> 20, opts.memory_bytes >> 20, name(res.granularity)));
    if (r.policy.rounding == Rounding::stochastic)
        throw std::invalid_argument(fmt::format(
            "{} MiB is more than the {} MiB stochastic rounding may hold in memory (its random bits "
            "follow the element index across the whole tensor)",
            (t.numel * esize) >> 20, opts.memory_bytes >> 20));
    // Streamed: the amax of every chunk, then statistics chunk by chunk. amax_of is a maximum,
    // so combining chunks is exact; the binary64 sums are merged in chunk order (fixed chunk
    // size, so the same for any thread count).
    res.streamed = true;
    float amax = 0;
    d.read(i, [&](const dump::Chunk& c) { amax = std::max(amax, amax_of(c.bits, c.wide, c.count)); });
    res.amax = amax;
    res.scale = recipe_scale(r, res.role, amax);
    const QuantConfig cfg = config(r, res.format, res.scale);
    d.read(i, [&](const dump::Chunk& c) { res.stats.merge(compute_stats(c.bits, c.wide, c.count, cfg)); });
    return res;
}

}  // namespace fp8kit::inspect
