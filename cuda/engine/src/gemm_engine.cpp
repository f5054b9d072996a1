// The GEMM models on the GPU for lib's types (engine.hpp; lib's gemm/device.hpp): host operands
// copied to the device, fp8kit::cuda's gemm_model and gemm_binary64_sums, host results back.
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "fp8kit/cuda/engine.hpp"
#include "fp8kit/cuda/gemm.hpp"
#include "fp8kit/cuda/kernels.hpp"

namespace fp8kit::cuda {
namespace {

// One device copy of a host range (or an uninitialised buffer), freed on every way out.
struct Buffer {
    void* p;
    Buffer(const void* src, std::size_t bytes) : p(device_alloc(bytes > 0 ? bytes : 1)) {
        if (src && bytes > 0) copy_to_device(p, src, bytes);
    }
    ~Buffer() { device_free(p); }
    Buffer(const Buffer&) = delete;
    Buffer& operator=(const Buffer&) = delete;
};

// The request's operands on the device.
struct DeviceOperands {
    Buffer a, b, sa, sb;
    explicit DeviceOperands(const gemm::GemmRequest& rq)
        : a(rq.a.codes, rq.a.rows * rq.k),
          b(rq.b.codes, rq.b.rows * rq.k),
          sa(rq.a.scales, rq.a.scale_count * sizeof(float)),
          sb(rq.b.scales, rq.b.scale_count * sizeof(float)) {}
    GemmOperand operand(const gemm::Operand& op, const Buffer& codes, const Buffer& scales) const {
        return {static_cast<const std::uint8_t*>(codes.p), op.rows, op.format, op.scale_kind,
                static_cast<const float*>(scales.p)};
    }
};

bool handles(const gemm::AccumModel& m, std::string* why) { return gemm_model_supported(gemm::params_of(m), why); }

const gemm::GemmEngine kGemmEngine{"cuda", handles, gemm_on_gpu, gemm_sums_on_gpu};

}  // namespace

std::vector<std::uint32_t> gemm_on_gpu(const gemm::GemmRequest& rq, const gemm::AccumModel& m) {
    gemm::check_request(rq, m);  // lib's messages for the operands
    std::string why;
    if (!handles(m, &why)) throw std::invalid_argument(why);
    const std::size_t n = rq.a.rows * rq.b.rows;
    const DeviceOperands d(rq);
    Buffer out(nullptr, n * sizeof(std::uint32_t));
    gemm_model(d.operand(rq.a, d.a, d.sa), d.operand(rq.b, d.b, d.sb), rq.k, gemm::params_of(m), rq.out,
               static_cast<std::uint32_t*>(out.p));
    std::vector<std::uint32_t> bits(n);
    if (n > 0) copy_to_host(bits.data(), out.p, n * sizeof(std::uint32_t));
    return bits;
}

gemm::Binary64Sums gemm_sums_on_gpu(const gemm::GemmRequest& rq) {
    gemm::check_request(rq, gemm::parse_model("fp32"));  // the operands' checks, as binary64_sums
    const std::size_t n = rq.a.rows * rq.b.rows;
    const DeviceOperands d(rq);
    Buffer sum(nullptr, n * sizeof(double)), magnitude(nullptr, n * sizeof(double));
    gemm_binary64_sums(d.operand(rq.a, d.a, d.sa), d.operand(rq.b, d.b, d.sb), rq.k, static_cast<double*>(sum.p),
                       static_cast<double*>(magnitude.p));
    gemm::Binary64Sums s;
    s.sum.resize(n);
    s.magnitude.resize(n);
    if (n > 0) {
        copy_to_host(s.sum.data(), sum.p, n * sizeof(double));
        copy_to_host(s.magnitude.data(), magnitude.p, n * sizeof(double));
    }
    return s;
}

void register_gemm_engine() { gemm::register_gemm_engine(&kGemmEngine); }

}  // namespace fp8kit::cuda
