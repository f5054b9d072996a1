// gemm(): the reference FP8 GEMM and validate_gemm() (thin: lib/src/gemm does the work).
#include <fmt/format.h>

#include <cstring>
#include <stdexcept>

#include "bindings.hpp"
#include "fp8kit/gemm.hpp"
#include "fp8kit/stats/device.hpp"

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

// device='cuda': lib's GEMM device (gemm/device.hpp), whose GPU engine cuda/engine registers when
// the module is imported (bind_cuda); the CLI's --device reaches the same one.
gemm::GemmDevice gemm_device(const std::string& device) {
    const auto d = parse_device(device);  // the CLI's --device names (auto is the CPU)
    if (!d) throw std::invalid_argument(fmt::format("device: '{}' (choose auto, cpu or cuda)", device));
    try {
        return gemm::select_gemm_device(*d);
    } catch (const DeviceError& e) {
        throw std::invalid_argument(fmt::format("device='cuda': {}", e.what()));
    }
}

pyb::array_t<std::uint32_t> gemm_bits(const pyb::array& a, const pyb::array& b, const std::string& fa,
                                      const std::string& fb, const pyb::array& sa, const pyb::array& sb,
                                      const std::string& accum, const std::string& out, const std::string& device) {
    const gemm::GemmDevice dev = gemm_device(device);
    Operands o = operands(a, b, fa, fb, sa, sb, out);
    const gemm::AccumModel m = gemm::parse_model(accum);
    try {
        dev.require(m);
    } catch (const std::invalid_argument& e) {
        throw std::invalid_argument(fmt::format("device='cuda': {}", e.what()));
    }
    std::vector<std::uint32_t> d;
    {
        pyb::gil_scoped_release nogil;
        d = dev.run(o.rq, m);
    }
    pyb::array_t<std::uint32_t> r({o.rq.a.rows, o.rq.b.rows});
    std::memcpy(r.mutable_data(), d.data(), d.size() * 4);
    return r;
}

// (report JSON, summary text)
pyb::tuple validate_gemm_bits(const pyb::array& d, const pyb::array& a, const pyb::array& b, const std::string& fa,
                              const std::string& fb, const pyb::array& sa, const pyb::array& sb, const std::string& out,
                              const std::string& device) {
    const gemm::GemmDevice dev = gemm_device(device);
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
        c = gemm::compare(o.rq, user, dev);
    }
    return pyb::make_tuple(c.json(), c.summary());
}

}  // namespace

void bind_gemm(pyb::module_& m) {
    m.def("gemm_bits", &gemm_bits);
    m.attr("split_prediction_limit") = gemm::kSplitPredictionLimit;
    m.def("predicted_split_k", [](std::size_t m_, std::size_t n, std::size_t k, const std::string& scales) {
        if (scales != "tensor" && scales != "row" && scales != "block")
            throw std::invalid_argument(fmt::format("scales: '{}' (choose tensor, row or block)", scales));
        const auto kind = scales == "tensor" ? gemm::ScaleKind::tensor
                          : scales == "row"  ? gemm::ScaleKind::row
                                             : gemm::ScaleKind::block;
        return gemm::predicted_split_k(m_, n, k, kind);
    });
    m.def("validate_gemm_bits", &validate_gemm_bits);
}

}  // namespace fp8kit::py
