// The block presets' statistics of one dumped tensor, fed chunk by chunk (sweep_input.cpp).
// Memory is bounded: a tensor of at most `budget` bytes is gathered whole and analysed with one
// compute_block_stats call per preset (as before streaming existed: identical sums); a larger one
// is cut into strips of whole tile rows (a multiple of every preset's block_rows, at most
// `budget` bytes), each analysed alone and merged in order. One fill-value run covering the whole
// tensor (dump::Chunk::repeat) is n copies of one block's statistics (times()), in O(1).
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
    void add(const dump::Chunk& c);
    std::vector<std::optional<QuantStats>> finish();  // one total per recipe (empty: skipped)

private:
    void flush(std::size_t rows);
    std::vector<BlockRecipe> recipes_;
    std::vector<bool> skip_;
    std::vector<QuantStats> total_;
    std::vector<unsigned char> buf_;
    Wide wide_;
    std::size_t esz_, rows_, cols_, strip_rows_ = 0, strips_ = 0;
    std::uint64_t numel_;
    bool active_ = false, constant_ = false;
    std::string why_;
};

}  // namespace fp8kit::sweep
