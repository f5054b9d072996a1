// The column-wise copy TE's NVFP4 recipe quantises with its random Hadamard transform
// (stats/statistics.hpp columnwise_rht_copy, check_block_input).
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/convert/hadamard.hpp"
#include "fp8kit/stats/statistics.hpp"

namespace fp8kit {

void check_block_input(const BlockRecipe& br, std::size_t rows, std::size_t /*cols*/) {
    if (br.columnwise_rht && rows % 16 != 0)
        throw std::invalid_argument(
            fmt::format("the column-wise copy with TE's random Hadamard transform needs a row count (elements / last "
                        "dimension) that is a multiple of 16, got {} (TE asserts the same); the nvfp4-rowwise preset "
                        "gives the row-wise copy, which has no transform",
                        rows));
}

ColumnwiseCopy columnwise_rht_copy(const void* data, Wide type, std::size_t rows, std::size_t cols) {
    BlockRecipe probe{};
    probe.columnwise_rht = true;
    check_block_input(probe, rows, cols);
    ColumnwiseCopy out{{}, type == Wide::f64 ? Wide::f32 : type, cols, rows};
    if (type != Wide::f64) {
        out.bytes = te_rht16_columnwise(data, type, rows, cols);
        return out;
    }
    // f64: rounded once to float32 (a C++ cast is RNE), as quantize_blocks reads f64 elements.
    std::vector<float> f(rows * cols);
    const auto* p = static_cast<const unsigned char*>(data);
    for (std::size_t i = 0; i < f.size(); ++i) {
        double d;
        std::memcpy(&d, p + 8 * i, 8);
        f[i] = static_cast<float>(d);
    }
    out.bytes = te_rht16_columnwise(f.data(), Wide::f32, rows, cols);
    return out;
}

}  // namespace fp8kit
