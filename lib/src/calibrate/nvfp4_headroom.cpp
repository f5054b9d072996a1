// NVFP4 activation headroom: what a calibrated amax leaves for NVFP4's two-level scale.
// ModelOpt (modelopt/torch/quantization/qtensor/nvfp4_tensor.py, export/quant_utils.py): the
// activation's global scale s2 = amax / (6 * 448) (the exported input_scale of an NVFP4 layer);
// each block of 16 along the last dimension gets the scale block_amax / (6 * s2), cast to E4M3,
// which holds it only within [2^-9, 448]: a block whose amax exceeds 448 * 6 * s2 = amax clamps
// at 448 and its largest elements saturate; a block below 2^-9 * 6 * s2 = amax * 2^-9 / 448 has a
// block scale at E4M3's smallest subnormal and loses its elements to zero.
#include <algorithm>
#include <cmath>

#include "fp8kit/calibrate.hpp"
#include "producers/modelopt_nvfp4.hpp"

namespace fp8kit::calibrate {

Nvfp4Headroom nvfp4_headroom(const std::vector<Batch>& batches, float amax, std::size_t width) {
    Nvfp4Headroom h;
    h.global_scale = producers::modelopt_nvfp4_scale_2(amax);
    const double hi = 448.0 * 6.0 * h.global_scale, lo = std::ldexp(1.0, -9) * 6.0 * h.global_scale;
    float data_amax = 0;
    if (width == 0) width = 1;
    for (const auto& b : batches)
        for (std::size_t row = 0; row < b.size(); row += width)
            for (std::size_t b0 = row; b0 < std::min(b.size(), row + width); b0 += 16) {
                float m = 0;
                for (std::size_t i = b0; i < std::min({b.size(), row + width, b0 + 16}); ++i)
                    m = std::max(m, std::fabs(b[i]));
                data_amax = std::max(data_amax, m);
                ++h.blocks;
                if (m == 0) continue;
                h.blocks_over += m > hi;
                h.blocks_under += m < lo;
            }
    h.data_amax = data_amax;
    h.headroom_binades = data_amax == 0 || amax == 0 ? HUGE_VAL : std::log2(static_cast<double>(amax) / data_amax);
    return h;
}

}  // namespace fp8kit::calibrate
