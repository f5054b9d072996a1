// quantize_blocks: the codes and per-block scales of a block recipe (stats/block_quantize.hpp).
#include "fp8kit/stats/block_quantize.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <stdexcept>

#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/numerics/block_factor.hpp"
#include "fp8kit/numerics/scale_rules.hpp"

namespace fp8kit {
namespace {

// Element i of the input as float32: exact for f32, f16 and bf16; f64 rounds once (RNE).
float element_f32(const void* data, Wide type, std::size_t i) {
    const auto* p = static_cast<const unsigned char*>(data);
    switch (type) {
        case Wide::f64: {
            double d;
            std::memcpy(&d, p + 8 * i, 8);
            return static_cast<float>(d);
        }
        case Wide::f16: {
            std::uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            return numerics::float_of(emu::convert<emu::Binary16, emu::Binary32>(
                h, {emu::Rounding::nearest_even, emu::Overflow::no_saturate, emu::NanEncoding::signed_quiet_payload}));
        }
        case Wide::bf16: {
            std::uint16_t h;
            std::memcpy(&h, p + 2 * i, 2);
            return numerics::float_of(static_cast<std::uint32_t>(h) << 16);
        }
        case Wide::f32: break;
    }
    float f;
    std::memcpy(&f, p + 4 * i, 4);
    return f;
}

}  // namespace

BlockQuantized quantize_blocks(const void* data, Wide type, std::size_t rows, std::size_t cols, const BlockRecipe& br,
                               std::uint64_t seed) {
    if (br.columnwise_rht) {  // the column-wise copy (TE's RHT): its codes, scales and amax
        const ColumnwiseCopy c = columnwise_rht_copy(data, type, rows, cols);
        BlockRecipe plain = br;
        plain.columnwise_rht = false;
        BlockQuantized q = quantize_blocks(c.bytes.data(), c.type, c.rows, c.cols, plain, seed);
        q.columnwise_rht = true;
        return q;
    }
    if (br.block_rows < 0 || br.block_cols < 0 || (br.block_rows == 0) != (br.block_cols == 0))
        throw std::invalid_argument("quantize_blocks: block shape must be >= 1 x 1 (or 0 x 0 for the whole tensor)");
    BlockQuantized out;
    out.rows = rows;
    out.cols = cols;
    out.tile_rows = br.block_rows == 0 ? std::max<std::size_t>(rows, 1) : static_cast<std::size_t>(br.block_rows);
    out.tile_cols = br.block_cols == 0 ? std::max<std::size_t>(cols, 1) : static_cast<std::size_t>(br.block_cols);
    out.grid_rows = (rows + out.tile_rows - 1) / out.tile_rows;
    out.grid_cols = (cols + out.tile_cols - 1) / out.tile_cols;
    const std::size_t blocks = out.grid_rows * out.grid_cols;
    out.codes.assign(rows * cols, 0);
    out.scale_codes.assign(blocks, 0);
    out.scale.assign(blocks, 0.0f);
    out.scale_inv.assign(blocks, 0.0f);
    // 1. The rule, resolved once; NVFP4 also needs the tensor's amax (TE's amax reduction: NaN
    //    ignored, Inf kept), the same amax_of compute_block_stats uses.
    numerics::ScaleParams rule =
        numerics::make_scale_params(br.rule, br.format, br.epsilon, br.pow2, br.value_for_inf, 0);
    out.global_amax = amax_of(data, type, rows * cols);
    if (numerics::rule_uses_global_amax(br.rule)) numerics::set_global_amax(rule, out.global_amax);
    const bool sr = br.policy.rounding == Rounding::stochastic;
#pragma omp parallel for schedule(dynamic, 16) if (rows * cols > (1u << 16))
    for (std::ptrdiff_t t = 0; t < static_cast<std::ptrdiff_t>(blocks); ++t) {
        const std::size_t bi = static_cast<std::size_t>(t) / out.grid_cols,
                          bj = static_cast<std::size_t>(t) % out.grid_cols;
        const std::size_t r0 = bi * out.tile_rows, r1 = std::min(rows, r0 + out.tile_rows);
        const std::size_t c0 = bj * out.tile_cols, c1 = std::min(cols, c0 + out.tile_cols);
        // 2. Block amax as the framework kernels reduce it (fmaxf: NaN ignored; NaN for a block
        //    holding one under the rules whose amax keeps NaN).
        float am = 0.0f;
        for (std::size_t r = r0; r < r1; ++r)
            am = std::max(am, amax_of(static_cast<const unsigned char*>(data) + wide_size(type) * (r * cols + c0), type,
                                      c1 - c0));
        // 3. The block's scale from the rule, then 4. each element: fl32(x * scale), encoded.
        bool nan = false;  // rules whose block amax keeps NaN (torchao's torch.amax)
        if (numerics::rule_amax_keeps_nan(br.rule))
            for (std::size_t r = r0; r < r1 && !nan; ++r) nan = any_nan(data, type, r * cols + c0, c1 - c0);
        const numerics::BlockScale s = numerics::rule_scale(rule, numerics::rule_block_amax(br.rule, am, nan));
        out.scale_codes[static_cast<std::size_t>(t)] = s.code;
        out.scale[static_cast<std::size_t>(t)] = s.scale;
        out.scale_inv[static_cast<std::size_t>(t)] = s.scale_inv;
        for (std::size_t r = r0; r < r1; ++r)
            for (std::size_t c = c0; c < c1; ++c) {
                const std::size_t i = r * cols + c;
                const float y = numerics::mul_rn(element_f32(data, type, i), s.scale);
                const std::uint32_t rnd = sr ? emu::stochastic_bits(seed, i) : 0u;
                out.codes[i] = emu::encode(br.format, Wide::f32, numerics::bits_of(y), br.policy, rnd);
            }
    }
    return out;
}

std::vector<std::uint8_t> dequantize_blocks(const BlockQuantized& q, const BlockRecipe& br, Wide to, bool block_part) {
    if (to == Wide::f64) throw std::invalid_argument("dequantize_blocks: the output is float32, float16 or bfloat16");
    const std::size_t es = wide_size(to);
    std::vector<std::uint8_t> out(q.rows * q.cols * es);
    for (std::size_t r = 0; r < q.rows; ++r)
        for (std::size_t c = 0; c < q.cols; ++c) {
            const std::size_t i = r * q.cols + c, b = (r / q.tile_rows) * q.grid_cols + c / q.tile_cols;
            const std::uint8_t code = q.codes[i];
            const auto v = static_cast<std::uint32_t>(emu::decode(br.format, Wide::f32, code));
            std::uint64_t y;
            if (std::isnan(numerics::float_of(v))) {
                y = emu::decode(br.format, to, code);
            } else {
                const float f = block_part ? numerics::rule_block_factor(
                                                 br.rule, numerics::BlockScale{0.0f, q.scale_inv[b], q.scale_codes[b]})
                                           : q.scale_inv[b];
                const float p = numerics::mul_rn(numerics::float_of(v), f);
                const std::uint32_t pb = p != p ? 0x7FC00000u : numerics::bits_of(p);
                y = emu::with_wide(to, [&](auto dst) {
                    return static_cast<std::uint64_t>(
                        emu::convert<emu::Binary32, decltype(dst)>(pb, emu::kDecodePolicy));
                });
            }
            std::memcpy(out.data() + i * es, &y, es);  // little-endian: the low bytes
        }
    return out;
}

float tensor_factor(const BlockQuantized& q, const BlockRecipe& br) {
    return numerics::rule_tensor_factor(br.rule, q.global_amax);
}

}  // namespace fp8kit
