// Block scales and FP4 codes as kernels store them, read into what validate() compares
// (validate.hpp: StoredScales, block_scale_values, unpack_fp4_codes; docs/validate.md).
#include <cstring>
#include <stdexcept>

#include <fmt/format.h>

#include "fp8kit/emu/emu.hpp"
#include "fp8kit/emu/pack.hpp"
#include "fp8kit/numerics/scale_rules.hpp"
#include "fp8kit/validate.hpp"

namespace fp8kit {

namespace {

// The row-major grid of scales: rows x blocks across (the MX and 1x16 layouts only for the
// padded and swizzled orders, which tile a grid of 1-row blocks).
void grid(BlockLayout layout, std::size_t rows, std::size_t cols, ScaleOrder order, std::size_t& grid_rows,
          std::size_t& grid_cols) {
    if (order != ScaleOrder::row_major && layout != BlockLayout::mx32 && layout != BlockLayout::nv16)
        throw std::invalid_argument(
            fmt::format("scales in the {} order: only the mx32 and 1x16 layouts are stored that "
                        "way, not {}",
                        name(order), name(layout)));
    grid_rows = rows;
    grid_cols = numerics::blocks_per_row(layout, cols ? cols : 1);
}

}  // namespace

std::size_t stored_scale_count(BlockLayout layout, std::size_t rows, std::size_t cols, ScaleOrder order) {
    if (order == ScaleOrder::row_major) return block_scale_count(layout, rows, cols);
    std::size_t gr = 0, gc = 0;
    grid(layout, rows, cols, order, gr, gc);
    return numerics::swizzled_scale_count(gr, gc);  // padded: the same 128 x 4 multiples
}

std::vector<float> block_scale_values(const StoredScales& s, BlockLayout layout, std::size_t rows, std::size_t cols,
                                      ScaleMode mode) {
    const std::size_t want = stored_scale_count(layout, rows, cols, s.order);
    if (s.count != want)
        throw std::invalid_argument(
            fmt::format("scales: {} {} scales of {} blocks over a {} x {} input in the {} order "
                        "are {}, got {}",
                        name(s.type), name(layout), name(layout), rows, cols, name(s.order), want, s.count));
    if (s.count > 0 && s.data == nullptr) throw std::invalid_argument("scales: null data");
    if (s.type == ScaleType::e4m3 && !(s.global > 0.0f && numerics::is_finite(s.global)))
        throw std::invalid_argument(fmt::format("global scale: {} is not a finite positive float32", s.global));
    // Entry e of the stored array as float32.
    const auto* bytes = static_cast<const std::uint8_t*>(s.data);
    const float g_inv = numerics::div_rn(1.0f, s.global);
    auto value = [&](std::size_t e) -> float {
        switch (s.type) {
            case ScaleType::f32: {
                float f;
                std::memcpy(&f, bytes + 4 * e, 4);
                return f;
            }
            case ScaleType::e8m0:  // 2^(b - 127), NaN for 0xFF: exact in float32
                return numerics::float_of(static_cast<std::uint32_t>(emu::decode(Format::e8m0, Wide::f32, bytes[e])));
            case ScaleType::e4m3: {
                const float v = numerics::e4m3_value(bytes[e]);
                return mode == ScaleMode::scale ? numerics::div_rn(g_inv, v) : numerics::mul_rn(v, s.global);
            }
        }
        return 0.0f;
    };
    const std::size_t n = block_scale_count(layout, rows, cols);
    std::vector<float> out(n);
    if (s.order == ScaleOrder::row_major) {
        for (std::size_t e = 0; e < n; ++e) out[e] = value(e);
        return out;
    }
    std::size_t gr = 0, gc = 0;
    grid(layout, rows, cols, s.order, gr, gc);
    const std::size_t padded_cols = (gc + 3) / 4 * 4;
    for (std::size_t r = 0; r < gr; ++r)
        for (std::size_t c = 0; c < gc; ++c)
            out[r * gc + c] =
                value(s.order == ScaleOrder::padded ? r * padded_cols + c : numerics::swizzled_scale_offset(r, c, gc));
    return out;
}

std::vector<std::uint8_t> unpack_fp4_codes(const std::uint8_t* packed, std::size_t bytes, std::size_t rows,
                                           std::size_t cols) {
    if (cols % 2 != 0)
        throw std::invalid_argument(
            fmt::format("packed FP4 codes: rows of {} elements cannot be packed two per byte", cols));
    if (bytes != rows * cols / 2)
        throw std::invalid_argument(fmt::format("packed FP4 codes: a {} x {} input needs {} bytes, got {}", rows, cols,
                                                rows * cols / 2, bytes));
    if (bytes > 0 && packed == nullptr) throw std::invalid_argument("packed FP4 codes: null data");
    std::vector<std::uint8_t> codes(rows * cols);
    emu::unpack_fp4_array(packed, codes.data(), codes.size(), emu::NibbleOrder::low_first);
    return codes;
}

}  // namespace fp8kit
