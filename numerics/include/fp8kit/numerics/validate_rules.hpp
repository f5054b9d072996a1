// The rules validate()'s scans share (lib/include/fp8kit/validate.hpp, docs/validate.md): how its
// scales tile an array and multiply its elements, the order of the policies its search tries
// and the values for which it tries every overflow and NaN policy (special_threshold).
// Written once for lib's CPU scan and the GPU scan (cuda/include/fp8kit/cuda/validate.hpp).
// Host and device; no std containers.
//
// The array is seen as a matrix rows x cols (cols = the last dimension, rows = the product of the
// others); scales are stored row-major over the blocks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "fp8kit/emu/convert.hpp"
#include "fp8kit/emu/format.hpp"
#include "fp8kit/emu/policy.hpp"

namespace fp8kit::numerics {

enum class ScaleMode : std::uint8_t { none, scale, scale_inv };

enum class BlockLayout : std::uint8_t {
    tensor,    // one scale for everything
    rowwise,   // one per row: rows scales
    b1x128,    // 1 x 128 blocks: rows * ceil(cols / 128) scales
    b128x128,  // 128 x 128 blocks: ceil(rows / 128) * ceil(cols / 128) scales
    mx32,      // 1 x 32 blocks (OCP MX): rows * ceil(cols / 32) scales
    nv16,      // 1 x 16 blocks (NVFP4): rows * ceil(cols / 16) scales
};

// Blocks across one row of the matrix (1x128 and 128x128: 128 columns each, MX: 32, NVFP4: 16).
FP8KIT_HD std::size_t blocks_per_row(BlockLayout b, std::size_t cols) {
    return b == BlockLayout::mx32 ? (cols + 31) / 32 : b == BlockLayout::nv16 ? (cols + 15) / 16 : (cols + 127) / 128;
}

// Number of scales a layout needs for a rows x cols matrix.
FP8KIT_HD std::size_t block_scale_count(BlockLayout b, std::size_t rows, std::size_t cols) {
    switch (b) {
        case BlockLayout::tensor: return 1;
        case BlockLayout::rowwise: return rows;
        case BlockLayout::b1x128:
        case BlockLayout::mx32:
        case BlockLayout::nv16: return rows * blocks_per_row(b, cols);
        case BlockLayout::b128x128: return (rows + 127) / 128 * blocks_per_row(b, cols);
    }
    return 1;
}

// The scale of the element at (row, col); per_row = blocks_per_row(b, cols).
FP8KIT_HD std::size_t block_at(BlockLayout b, std::size_t row, std::size_t col, std::size_t per_row) {
    switch (b) {
        case BlockLayout::tensor: return 0;
        case BlockLayout::rowwise: return row;
        case BlockLayout::b1x128: return row * per_row + (col >> 7);
        case BlockLayout::b128x128: return (row >> 7) * per_row + (col >> 7);
        case BlockLayout::mx32: return row * per_row + (col >> 5);
        case BlockLayout::nv16: return row * per_row + (col >> 4);
    }
    return 0;
}

// The scale of flat element i (row-major) of a matrix of `cols` columns (cols 0 reads as 1).
FP8KIT_HD std::size_t block_of(BlockLayout b, std::size_t i, std::size_t cols) {
    if (b == BlockLayout::tensor) return 0;
    const std::size_t c = cols ? cols : 1;
    return block_at(b, i / c, i % c, blocks_per_row(b, c));
}

// The swizzled scale-factor layout of cuBLASLt's block-scaled GEMMs ("1D Block Scaling Factors
// Layout": CUBLASLT_MATMUL_MATRIX_SCALE_VEC32_UE8M0 / VEC16_UE4M3), which TransformerEngine's
// swizzle (transformer_engine/common/swizzle/swizzle.cu) and torchao's to_blocked
// (torchao/prototype/mx_formats/utils.py) write: the row-major matrix of scales (R rows, C scales
// per row) is padded to multiples of 128 x 4 and cut into 128 x 4 tiles, stored tile after tile
// (tile row-major over the tiles: ceil(C / 4) tiles across); inside a tile, scale (r, c) lies at
// (r % 32) * 16 + (r / 32) * 4 + c. Padding entries are not read.
FP8KIT_HD std::size_t swizzled_scale_count(std::size_t scale_rows, std::size_t scale_cols) {
    return (scale_rows + 127) / 128 * 128 * ((scale_cols + 3) / 4 * 4);
}
FP8KIT_HD std::size_t swizzled_scale_offset(std::size_t r, std::size_t c, std::size_t scale_cols) {
    const std::size_t tiles_across = (scale_cols + 3) / 4;
    const std::size_t tile = (r / 128) * tiles_across + c / 4;
    const std::size_t rr = r % 128;
    return tile * 512 + (rr % 32) * 16 + (rr / 32) * 4 + c % 4;
}

// block_of walked along the array without a division per element (lib's scan).
struct BlockWalk {
    BlockLayout layout;
    std::size_t cols, row, col, per_row;
    FP8KIT_HD BlockWalk(BlockLayout l, std::size_t cols_, std::size_t first)
        : layout(l), cols(cols_ ? cols_ : 1), row(first / cols), col(first % cols), per_row(blocks_per_row(l, cols)) {}
    FP8KIT_HD std::size_t index() const { return block_at(layout, row, col, per_row); }
    FP8KIT_HD void next() {
        if (++col == cols) {
            col = 0;
            ++row;
        }
    }
};

// What multiplies an element given the stored scale S: S (scale), the float32 reciprocal
// fl32(1 / S) (scale_inv: the kernel is given the dequantisation scale), 1 (none). Computed on the
// host once per scale by lib and by the GPU scan (IEEE division; never under fast math).
inline float scale_multiplier(ScaleMode m, float s) {
    return m == ScaleMode::scale ? s : m == ScaleMode::scale_inv ? 1.0f / s : 1.0f;
}

// The deterministic policies the search tries (5 roundings x 3 overflows x 4 NaN encodings), in
// the report's order: policy s has Rounding(s / 12), Overflow(s / 4 % 3), NanEncoding(s % 4),
// the enumerators' order in emu/policy.hpp (nearest_even .. toward_negative; saturate_all,
// saturate_finite, no_saturate; canonical .. signed_quiet_payload).
inline constexpr int kValidatePolicyCount = 60;
FP8KIT_HD emu::Policy validate_policy(int s) {
    return emu::Policy{static_cast<emu::Rounding>(s / 12), static_cast<emu::Overflow>(s / 4 % 3),
                       static_cast<emu::NanEncoding>(s % 4)};
}
// The magnitude bits (in C, the type the reference rounds from) above which an element may depend
// on the overflow or NaN policy, so that the search tries every overflow and NaN encoding: F's
// largest finite value, widened exactly to binary64 and rounded toward zero into C (saturating).
// lib's Engine::special_threshold
// (lib/src/validate/validate_engine.hpp) and the GPU scan (cuda/src/validate.cu) both call it.
template <class C, class F>
FP8KIT_HD std::uint64_t special_threshold() {
    static_assert((F::max_finite_code & ~F::code_mask) == 0, "max_finite_code is a code of F");
    const std::uint64_t m =
        emu::convert<F, emu::Binary64>(static_cast<typename F::storage_t>(F::max_finite_code), emu::kDecodePolicy);
    return emu::convert<emu::Binary64, C>(
        m, emu::Policy{emu::Rounding::toward_zero, emu::Overflow::saturate_all, emu::NanEncoding::canonical});
}

static_assert(static_cast<int>(emu::Rounding::toward_negative) == 4 &&
                  static_cast<int>(emu::Overflow::no_saturate) == 2 &&
                  static_cast<int>(emu::NanEncoding::signed_quiet_payload) == 3,
              "validate_policy reads the enumerators' order");

}  // namespace fp8kit::numerics
