// Block presets' statistics of a dumped tensor with bounded memory (dumped_blocks.hpp).
#include "dumped_blocks.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <stdexcept>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit::sweep {

DumpedBlocks::DumpedBlocks(const dump::TensorInfo& t, std::vector<BlockRecipe> recipes, std::size_t budget,
                           std::vector<bool> skip)
    : recipes_(std::move(recipes)),
      skip_(std::move(skip)),
      total_(recipes_.size()),
      wide_(t.wide),
      esz_(t.wide == Wide::f32 ? 4 : 2),
      cols_(t.shape.back()),
      numel_(t.numel) {
    rows_ = cols_ ? static_cast<std::size_t>(t.numel / cols_) : 0;
    skip_.resize(recipes_.size(), false);
    const std::uint64_t row_bytes = std::uint64_t(cols_) * esz_;
    // 1. Small enough: gathered whole, one call per preset.
    if (t.numel * esz_ <= budget) {
        strip_rows_ = rows_;
        active_ = true;
        buf_.reserve(t.numel * esz_);
        return;
    }
    // 2. Strips of whole tiles: a multiple of every preset's tile height.
    std::size_t unit = 1;
    for (std::size_t k = 0; k < recipes_.size(); ++k) {
        const BlockRecipe& r = recipes_[k];
        if (skip_[k]) continue;
        if (r.block_rows <= 0) {  // one block over the whole tensor: needs it all at once
            unit = rows_;
            break;
        }
        unit = std::lcm(unit, static_cast<std::size_t>(r.block_rows));
        // The column-wise copy's blocks (TE's RHT) run down 16 rows of one column: a strip of a
        // multiple of 16 rows holds whole blocks of the copy.
        if (r.columnwise_rht) unit = std::lcm(unit, std::size_t{16});
    }
    unit = std::max<std::size_t>(1, std::min(unit, rows_));
    if (row_bytes * unit > budget) {
        why_ = fmt::format(
            "a strip of {} row(s) of {} elements exceeds the {} MiB the block presets may hold "
            "(unless the tensor is one fill value)",
            unit, cols_, budget >> 20);
        // A whole-tensor fill-value run is still evaluated (add() sees it first).
        strip_rows_ = 0;
        return;
    }
    strip_rows_ = static_cast<std::size_t>(budget / (row_bytes * unit)) * unit;
    active_ = true;
    buf_.reserve(strip_rows_ * cols_ * esz_);
    // 3. A preset with a second-level scale (NVFP4) needs the whole tensor's amax in every strip:
    //    a first pass takes it (TE's column-wise copy: the copy's amax, strip by strip).
    if (strip_rows_ >= rows_) return;
    global_.assign(recipes_.size(), 0.0f);
    for (std::size_t k = 0; k < recipes_.size(); ++k)
        if (uses_global(k)) {
            amax_pass_ = true;
            rht_global_ |= recipes_[k].columnwise_rht;
        }
}

bool DumpedBlocks::uses_global(std::size_t k) const {
    return !skip_[k] && numerics::rule_uses_global_amax(recipes_[k].rule);
}

void DumpedBlocks::add_amax(const dump::Chunk& c) {
    if (!amax_pass_ || amax_done_ || whole_run(c)) return;  // a whole-tensor run: add() needs no amax
    // amax_of is a maximum: taken chunk by chunk it is the tensor's, exactly.
    plain_amax_ = std::max(plain_amax_, amax_of(c.bits, c.wide, c.count));
    if (rht_global_) buffer(c);  // the column-wise copy needs whole strips (16-row groups)
}

void DumpedBlocks::end_amax_pass() {
    if (!amax_pass_ || amax_done_) return;
    if (rht_global_ && !buf_.empty()) flush_amax(buf_.size() / (cols_ * esz_));
    buf_.clear();
    for (std::size_t k = 0; k < recipes_.size(); ++k)
        if (uses_global(k) && !recipes_[k].columnwise_rht) global_[k] = plain_amax_;
    amax_done_ = true;
}

void DumpedBlocks::flush_amax(std::size_t rows) {
    for (std::size_t k = 0; k < recipes_.size(); ++k)
        if (uses_global(k) && recipes_[k].columnwise_rht)
            global_[k] = std::max(global_[k], block_global_amax(buf_.data(), wide_, rows, cols_, recipes_[k]));
    buf_.clear();
}

void DumpedBlocks::add(const dump::Chunk& c) {
    // 1. One run over the whole tensor: every tile holds one value, so its scale (a function of
    //    the tile's amax) and every element's cast are those of a 1 x 1 tensor of that value.
    if (whole_run(c)) {
        for (std::size_t k = 0; k < recipes_.size(); ++k) {
            if (skip_[k]) continue;
            if (!recipes_[k].columnwise_rht) {
                total_[k] = times(compute_block_stats(c.bits, c.wide, 1, 1, recipes_[k]).total, numel_);
                continue;
            }
            // With TE's RHT the copy is not constant: every column's groups of 16 equal values
            // become the same 16 values, so the tensor is numel / 16 copies of one 16 x 1 column.
            const std::size_t es = wide_size(c.wide);
            std::vector<unsigned char> col(16 * es);
            for (std::size_t i = 0; i < 16; ++i) std::memcpy(&col[i * es], c.bits, es);
            total_[k] = times(compute_block_stats(col.data(), c.wide, 16, 1, recipes_[k]).total, numel_ / 16);
        }
        constant_ = active_ = true;
        why_.clear();
        return;
    }
    if (!active_ || constant_) return;
    if (amax_pass_ && !amax_done_) throw std::logic_error("DumpedBlocks: add() before the amax pass ended");
    buffer(c);
}

// The elements go into the strip, runs expanded (memory stays within the strip); each full strip
// is flushed (the amax pass's flush until it ends, then the statistics').
void DumpedBlocks::buffer(const dump::Chunk& c) {
    const bool amax = amax_pass_ && !amax_done_;
    auto full = [&] {
        if (amax)
            flush_amax(strip_rows_);
        else
            flush(strip_rows_);
    };
    const auto* p = static_cast<const unsigned char*>(c.bits);
    const std::size_t strip_bytes = strip_rows_ * cols_ * esz_;
    if (c.repeat > 1) {  // a run (count 1): as many copies as the strip has room for at a time
        for (std::uint64_t left = c.repeat; left > 0;) {
            const std::size_t room = (strip_bytes - buf_.size()) / esz_;
            if (room == 0) throw std::logic_error("DumpedBlocks: more elements than the tensor holds");
            const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(left, room));
            const std::size_t old = buf_.size();
            buf_.resize(old + take * esz_);
            for (std::size_t i = 0; i < take; ++i) std::memcpy(&buf_[old + i * esz_], p, esz_);
            left -= take;
            if (buf_.size() == strip_bytes && strip_rows_ < rows_) full();
        }
        return;
    }
    {
        std::size_t off = 0, left = c.count * esz_;
        while (left) {
            const std::size_t take = std::min(left, strip_bytes - buf_.size());
            if (take == 0) throw std::logic_error("DumpedBlocks: more elements than the tensor holds");
            buf_.insert(buf_.end(), p + off, p + off + take);
            off += take;
            left -= take;
            if (buf_.size() == strip_bytes && strip_rows_ < rows_) full();
        }
    }
}

void DumpedBlocks::flush(std::size_t rows) {
    for (std::size_t k = 0; k < recipes_.size(); ++k) {
        if (skip_[k]) continue;
        if (strip_rows_ >= rows_) {  // gathered whole: one call, as before strips existed
            total_[k] = compute_block_stats(buf_.data(), wide_, rows, cols_, recipes_[k]).total;
            continue;
        }
        // A strip: the tensor's global amax, and the totals of the strips above continued.
        BlockStrip strip;
        strip.global_amax = uses_global(k) ? global_[k] : 0.0f;
        strip.before = strips_ ? &total_[k] : nullptr;
        strip.first_row = strips_ * strip_rows_;  // every strip but the last has strip_rows_ rows
        strip.total_rows = rows_;
        QuantStats s = compute_block_stats(buf_.data(), wide_, rows, cols_, recipes_[k], strip).total;
        total_[k] = std::move(s);
    }
    ++strips_;
    buf_.clear();
}

std::vector<std::optional<QuantStats>> DumpedBlocks::finish() {
    if (!active_) return {};
    if (!constant_) {
        if (strip_rows_ == rows_)
            flush(rows_);  // gathered whole (also 0 x 0)
        else if (!buf_.empty())
            flush(buf_.size() / (cols_ * esz_));
    }
    std::vector<std::optional<QuantStats>> out(recipes_.size());
    for (std::size_t k = 0; k < recipes_.size(); ++k)
        if (!skip_[k]) out[k] = std::move(total_[k]);
    return out;
}

}  // namespace fp8kit::sweep
