// gemm(): the reference FP8 GEMM and validate_gemm() (thin: lib/src/gemm does the work).
#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/gemm.hpp"
#include "fp8kit/stats/device.hpp"

#ifdef FP8KIT_PY_CUDA
#include "fp8kit/cuda/gemm.hpp"
#endif

namespace fp8kit::py {
namespace {

struct Operands {
    gemm::GemmRequest rq;
    std::vector<float> sa, sb;
};

std::vector<std::size_t> dims(const pyb::array& a) {
    std::vector<std::size_t> d;
    for (pyb::ssize_t i = 0; i < a.ndim(); ++i) d.push_back(static_cast<std::size_t>(a.shape(i)));
    return d;
}

// a, b: 2-D uint8 codes; scales: float32 arrays (scalar, rowwise, block by shape).
Operands operands(const pyb::array& a, const pyb::array& b, const std::string& fa, const std::string& fb,
                  const pyb::array& sa, const pyb::array& sb, const std::string& out) {
    if (a.ndim() != 2 || b.ndim() != 2)
        throw std::invalid_argument("a and b must be 2-D uint8 code arrays (M x K, N x K)");
    if (a.shape(1) != b.shape(1))
        throw std::invalid_argument(
            fmt::format("b: K = {} differs from a's K = {} (b must be N x K)", b.shape(1), a.shape(1)));
    Operands o;
    auto& rq = o.rq;
    rq.k = static_cast<std::size_t>(a.shape(1));
    rq.a = {static_cast<const std::uint8_t*>(contiguous_data(a, 1, "a")), static_cast<std::size_t>(a.shape(0)),
            require_format(fa, "a_format")};
    rq.b = {static_cast<const std::uint8_t*>(contiguous_data(b, 1, "b")), static_cast<std::size_t>(b.shape(0)),
            require_format(fb, "b_format")};
    if (out != "f32" && out != "bf16")
        throw std::invalid_argument(fmt::format("out_dtype: '{}' (choose f32 or bf16)", out));
    rq.out = out == "f32" ? gemm::OutType::f32 : gemm::OutType::bf16;
    for (int w = 0; w < 2; ++w) {
        const pyb::array& s = w ? sb : sa;
        auto& op = w ? rq.b : rq.a;
        auto& v = w ? o.sb : o.sa;
        op.scale_kind = gemm::scale_kind_for_shape(dims(s), w == 1, op.rows, rq.k, w ? "scale_b" : "scale_a");
        v.resize(static_cast<std::size_t>(s.size()));
        std::memcpy(v.data(), contiguous_data(s, 4, w ? "scale_b" : "scale_a"), v.size() * 4);
        op.scales = v.data();
        op.scale_count = v.size();
    }
    return o;
}

// device='cuda': the CUDA model (fp8kit::cuda::gemm_model, the same bits as gemm::gemm; tests/gpu)
// on copies of the host arrays.
std::vector<std::uint32_t> gemm_on_cuda(const gemm::GemmRequest& rq, const gemm::AccumModel& m) {
#ifdef FP8KIT_PY_CUDA
    gemm::check_request(rq, m);
    std::string why;
    if (cuda::device_count(&why) == 0) throw std::invalid_argument("device='cuda': no CUDA device: " + why);
    if (!cuda::gemm_model_supported(gemm::params_of(m), &why)) throw std::invalid_argument("device='cuda': " + why);
    struct Buffer {  // freed on every path
        void* p;
        Buffer(const void* src, std::size_t bytes) : p(cuda::device_alloc(bytes > 0 ? bytes : 1)) {
            if (src && bytes > 0) cuda::copy_to_device(p, src, bytes);
        }
        ~Buffer() { cuda::device_free(p); }
    };
    const std::size_t n = rq.a.rows * rq.b.rows;
    Buffer da(rq.a.codes, rq.a.rows * rq.k), db(rq.b.codes, rq.b.rows * rq.k);
    Buffer dsa(rq.a.scales, rq.a.scale_count * 4), dsb(rq.b.scales, rq.b.scale_count * 4), dd(nullptr, n * 4);
    const cuda::GemmOperand ga{static_cast<const std::uint8_t*>(da.p), rq.a.rows, rq.a.format, rq.a.scale_kind,
                               static_cast<const float*>(dsa.p)};
    const cuda::GemmOperand gb{static_cast<const std::uint8_t*>(db.p), rq.b.rows, rq.b.format, rq.b.scale_kind,
                               static_cast<const float*>(dsb.p)};
    cuda::gemm_model(ga, gb, rq.k, gemm::params_of(m), rq.out, static_cast<std::uint32_t*>(dd.p));
    std::vector<std::uint32_t> d(n);
    if (n > 0) cuda::copy_to_host(d.data(), dd.p, n * 4);
    return d;
#else
    (void)rq;
    (void)m;
    throw std::invalid_argument("device='cuda': " + fp8kit::built_without_cuda());
#endif
}

pyb::array_t<std::uint32_t> gemm_bits(const pyb::array& a, const pyb::array& b, const std::string& fa,
                                      const std::string& fb, const pyb::array& sa, const pyb::array& sb,
                                      const std::string& accum, const std::string& out, const std::string& device) {
    if (device != "cpu" && device != "cuda")
        throw std::invalid_argument(fmt::format("device: '{}' (choose cpu or cuda)", device));
    Operands o = operands(a, b, fa, fb, sa, sb, out);
    const gemm::AccumModel m = gemm::parse_model(accum);
    std::vector<std::uint32_t> d;
    {
        pyb::gil_scoped_release nogil;
        d = device == "cuda" ? gemm_on_cuda(o.rq, m) : gemm::gemm(o.rq, m);
    }
    pyb::array_t<std::uint32_t> r({o.rq.a.rows, o.rq.b.rows});
    std::memcpy(r.mutable_data(), d.data(), d.size() * 4);
    return r;
}

// (report JSON, summary text)
pyb::tuple validate_gemm_bits(const pyb::array& d, const pyb::array& a, const pyb::array& b, const std::string& fa,
                              const std::string& fb, const pyb::array& sa, const pyb::array& sb,
                              const std::string& out) {
    Operands o = operands(a, b, fa, fb, sa, sb, out);
    const std::size_t n = o.rq.a.rows * o.rq.b.rows;
    if (static_cast<std::size_t>(d.size()) != n)
        throw std::invalid_argument(
            fmt::format("d: {} elements for a {} x {} GEMM", d.size(), o.rq.a.rows, o.rq.b.rows));
    const auto* p = static_cast<const std::uint32_t*>(contiguous_data(d, 4, "d"));
    const std::vector<std::uint32_t> user(p, p + n);
    gemm::GemmComparison c;
    {
        pyb::gil_scoped_release nogil;
        c = gemm::compare(o.rq, user);
    }
    return pyb::make_tuple(c.json(), c.summary());
}

}  // namespace

void bind_gemm(pyb::module_& m) {
    m.def("gemm_bits", &gemm_bits);
    m.def("validate_gemm_bits", &validate_gemm_bits);
}

}  // namespace fp8kit::py
