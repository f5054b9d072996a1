// Where the GEMM models run (gemm/device.hpp): the registered GPU engine or lib's CPU model, and
// the CPU's binary64 sums.
#include "fp8kit/gemm/device.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>

#include "operands.hpp"

namespace fp8kit::gemm {
namespace {

std::atomic<const GemmEngine*>& engine_slot() {
    static std::atomic<const GemmEngine*> slot{nullptr};
    return slot;
}

}  // namespace

void register_gemm_engine(const GemmEngine* engine) { engine_slot().store(engine); }
const GemmEngine* registered_gemm_engine() { return engine_slot().load(); }

Binary64Sums binary64_sums(const GemmRequest& rq) {
    check_request(rq, parse_model("fp32"));  // the operands' checks; fp32 has no width limit
    const auto ta = detail::decode_table(rq.a.format), tb = detail::decode_table(rq.b.format);
    const std::size_t M = rq.a.rows, N = rq.b.rows, K = rq.k, kblocks = (K + 127) / 128;
    const std::size_t run = numerics::gemm::binary64_run(rq.a.scale_kind, K);
    Binary64Sums s;
    s.sum.assign(M * N, 0.0);
    s.magnitude.assign(M * N, 0.0);
    // Each element is its own k-ordered sum: the same bits for any thread count.
#pragma omp parallel for schedule(dynamic, 1)
    for (std::ptrdiff_t i = 0; i < static_cast<std::ptrdiff_t>(M); ++i)
        for (std::size_t j = 0; j < N; ++j) {
            const std::uint8_t* a = rq.a.codes + static_cast<std::size_t>(i) * K;
            const std::uint8_t* b = rq.b.codes + j * K;
            double sum = 0, magnitude = 0;
            for (std::size_t k0 = 0; k0 < K; k0 += run) {
                double rs = 0, rm = 0;
                for (std::size_t k = k0; k < std::min(K, k0 + run); ++k)
                    numerics::gemm::binary64_add_product(rs, rm, ta.code[a[k]].value, tb.code[b[k]].value);
                numerics::gemm::binary64_add_run(
                    sum, magnitude, rs, rm,
                    rq.a.scales[detail::scale_index(rq.a, false, static_cast<std::size_t>(i), k0 / 128, kblocks)],
                    rq.b.scales[detail::scale_index(rq.b, true, j, k0 / 128, kblocks)]);
            }
            s.sum[static_cast<std::size_t>(i) * N + j] = sum;
            s.magnitude[static_cast<std::size_t>(i) * N + j] = magnitude;
        }
    return s;
}

std::vector<std::uint32_t> GemmDevice::run(const GemmRequest& rq, const AccumModel& m) const {
    if (on_gpu(m)) return gpu->run(rq, m);
    return gemm(rq, m);
}

Binary64Sums GemmDevice::sums(const GemmRequest& rq) const { return gpu ? gpu->sums(rq) : binary64_sums(rq); }

void GemmDevice::require(const AccumModel& m) const {
    std::string why;
    if (gpu && !gpu->handles(m, &why)) throw std::invalid_argument(why);
}

GemmDevice select_gemm_device(Device d) {
    GemmDevice out;
    if (d != Device::cuda) return out;
    select_device(d);  // DeviceError naming why no GPU can be used
    out.gpu = registered_gemm_engine();
    if (!out.gpu) throw DeviceError(built_without_cuda());
    return out;
}

}  // namespace fp8kit::gemm
