// The block presets' statistics of one dumped tensor, fed chunk by chunk (sweep_input.cpp).
// Memory is bounded: a tensor of at most `budget` bytes is gathered whole and analysed with one
// compute_block_stats call per preset (as before streaming existed: identical sums); a larger one
// is cut into strips of whole tile rows (a multiple of every preset's block_rows, at most
// `budget` bytes), each analysed with compute_block_stats(..., BlockStrip) continuing the totals
// of the strips above it. Presets whose scale also depends on the whole tensor (NVFP4's global
// amax, numerics::rule_uses_global_amax) need that amax before the first strip: when
// needs_amax_pass(), the tensor is fed twice, first to add_amax() (then end_amax_pass()), then
// to add(). Every count is then the whole-tensor call's, bit for bit, and so are the sums except
// with TE's column-wise RHT copy (BlockStrip says why and how close). One fill-value run
// covering the whole tensor (dump::Chunk::repeat) is n copies of one block's statistics
// (times()), in O(1).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace fp8kit::sweep {

class DumpedBlocks {
public:
    // recipes: one per block preset, already resolved for this tensor (block_recipe()).
    // skip: one flag per recipe (empty: none); a skipped recipe is not evaluated and its entry of
    // finish() is empty.
    DumpedBlocks(const dump::TensorInfo& t, std::vector<BlockRecipe> recipes, std::size_t budget,
                 std::vector<bool> skip = {});
    // Empty when the presets cannot be evaluated within the budget (why() says why).
    bool active() const { return active_; }
    const std::string& why() const { return why_; }
    // True when the tensor is cut into strips and a preset needs the tensor's global amax.
    bool needs_amax_pass() const { return amax_pass_; }
    void add_amax(const dump::Chunk& c);  // the first pass (needs_amax_pass()), every chunk in order
    void end_amax_pass();
    void add(const dump::Chunk& c);                   // the statistics pass, every chunk in order
    std::vector<std::optional<QuantStats>> finish();  // one total per recipe (empty: skipped)

private:
    bool whole_run(const dump::Chunk& c) const { return c.repeat > 1 && c.first == 0 && c.repeat == numel_; }
    void buffer(const dump::Chunk& c);  // into the strip, flushing every full one
    void flush(std::size_t rows);
    void flush_amax(std::size_t rows);
    bool uses_global(std::size_t k) const;
    std::vector<BlockRecipe> recipes_;
    std::vector<bool> skip_;
    std::vector<float> global_;  // per recipe: the tensor's block_global_amax (rules that use one)
    float plain_amax_ = 0;       // amax_of the tensor, taken chunk by chunk (no preset needs a copy)
    bool amax_pass_ = false, amax_done_ = false, rht_global_ = false;
    std::vector<QuantStats> total_;
    std::vector<unsigned char> buf_;
    Wide wide_;
    std::size_t esz_, rows_, cols_, strip_rows_ = 0, strips_ = 0;
    std::uint64_t numel_;
    bool active_ = false, constant_ = false;
    std::string why_;
};

}  // namespace fp8kit::sweep
