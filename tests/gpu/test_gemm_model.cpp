// The CUDA GEMM model (fp8kit::cuda::gemm_model) against lib's CPU model (fp8kit::gemm::gemm),
// bit for bit: every named model but exact (fp32, sm90, sm90-fast, deepseek-128, h100tc, the
// split-K models) and parameter lists that reach every alignment, sticky, step, exponent and
// promotion option; tensorwise, rowwise and block scales; float32 and bfloat16 output; E4M3 and
// E5M2 operand pairs; normal, wide-exponent and adversarial inputs (cancelling large products,
// subnormals, zero runs, NaN/Inf codes in some rows, extreme scales); ragged shapes, K from 16
// to 8192.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fp8kit/cuda/gemm.hpp"
#include "fp8kit/cuda/kernels.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/gemm.hpp"

namespace cu = fp8kit::cuda;
namespace gm = fp8kit::gemm;
using fp8kit::Format;

namespace {

struct Dev {
    void* p;
    explicit Dev(std::size_t b) : p(cu::device_alloc(b + 16)) {}
    ~Dev() { cu::device_free(p); }
    Dev(const Dev&) = delete;
    Dev& operator=(const Dev&) = delete;
};

float value_of(Format f, int c) {
    const auto bits =
        static_cast<std::uint32_t>(fp8kit::emu::decode(f, fp8kit::Wide::f32, static_cast<std::uint8_t>(c)));
    float v;
    std::memcpy(&v, &bits, 4);
    return v;
}

// Finite codes of a format, split by magnitude; and its NaN/Inf codes.
struct Codes {
    std::vector<std::uint8_t> all, normal, small, large, special;
};

Codes codes_of(Format f) {
    Codes c;
    const int n = fp8kit::emu::code_count(f);
    float mx = 0;
    for (int i = 0; i < n; ++i)
        if (std::isfinite(value_of(f, i))) mx = std::max(mx, std::fabs(value_of(f, i)));
    for (int i = 0; i < n; ++i) {
        const float v = value_of(f, i), a = std::fabs(v);
        if (!std::isfinite(v)) {
            c.special.push_back(static_cast<std::uint8_t>(i));
            continue;
        }
        c.all.push_back(static_cast<std::uint8_t>(i));
        if (a >= 0.125f && a <= 8.0f) c.normal.push_back(static_cast<std::uint8_t>(i));
        if (a < 0.0625f) c.small.push_back(static_cast<std::uint8_t>(i));
        if (a >= mx / 16) c.large.push_back(static_cast<std::uint8_t>(i));
    }
    return c;
}

enum class Input { normal, wide, adversarial };

// rows x k codes. adversarial: small values, 10% large ones followed by their negation (the
// aligned step truncates the small ones next to them), zero runs, and in every seventh row one
// NaN or Inf code (when the format has one).
std::vector<std::uint8_t> make_codes(Format f, Input kind, std::size_t rows, std::size_t k, std::mt19937& g) {
    const Codes c = codes_of(f);
    auto pick = [&](const std::vector<std::uint8_t>& v) { return v[g() % v.size()]; };
    std::vector<std::uint8_t> out(rows * k);
    for (std::size_t r = 0; r < rows; ++r) {
        std::uint8_t* row = out.data() + r * k;
        for (std::size_t q = 0; q < k; ++q) {
            switch (kind) {
                case Input::normal: row[q] = pick(c.normal); break;
                case Input::wide: row[q] = pick(c.all); break;
                case Input::adversarial: {
                    const unsigned u = g() % 100;
                    if (u < 10 && q + 1 < k) {
                        row[q] = pick(c.large);
                        // the negation: the code with the same magnitude and the other sign
                        for (std::uint8_t x : c.large)
                            if (value_of(f, x) == -value_of(f, row[q])) row[q + 1] = x;
                        ++q;
                    } else if (u < 20) {
                        row[q] = 0;
                    } else {
                        row[q] = pick(c.small);
                    }
                    break;
                }
            }
        }
        if (kind == Input::adversarial && r % 7 == 3 && !c.special.empty() && k > 0) row[g() % k] = pick(c.special);
    }
    return out;
}

std::vector<float> make_scales(gm::ScaleKind kind, bool is_b, std::size_t rows, std::size_t k, Input input,
                               std::mt19937& g) {
    std::vector<float> s(gm::scale_count_for(kind, is_b, rows, k));
    std::uniform_real_distribution<float> u(0.01f, 4.0f);
    for (std::size_t i = 0; i < s.size(); ++i) {
        s[i] = u(g);
        // adversarial: extreme scales (overflow to Inf and underflow in the epilogue), zero
        if (input == Input::adversarial && i % 5 == 1) s[i] = (i % 3 == 0) ? 3e30f : (i % 3 == 1 ? 1e-30f : 0.0f);
    }
    return s;
}

struct Shape {
    std::size_t m, n, k;
};

// Runs one case on both sides; returns the number of differing elements (0 expected) and the first.
std::size_t compare_case(Format fa, Format fb, const Shape& sh, Input input, gm::ScaleKind sk, gm::OutType out,
                         const gm::AccumModel& model, std::uint32_t seed, std::string& first) {
    std::mt19937 g(seed);
    const auto a = make_codes(fa, input, sh.m, sh.k, g), b = make_codes(fb, input, sh.n, sh.k, g);
    const auto sa = make_scales(sk, false, sh.m, sh.k, input, g), sb = make_scales(sk, true, sh.n, sh.k, input, g);
    gm::GemmRequest rq;
    rq.a = {a.data(), sh.m, fa, sk, sa.data(), sa.size()};
    rq.b = {b.data(), sh.n, fb, sk, sb.data(), sb.size()};
    rq.k = sh.k;
    rq.out = out;
    const std::vector<std::uint32_t> cpu = gm::gemm(rq, model);

    Dev da(a.size()), db(b.size()), dsa(sa.size() * 4), dsb(sb.size() * 4), dd(cpu.size() * 4);
    cu::copy_to_device(da.p, a.data(), a.size());
    cu::copy_to_device(db.p, b.data(), b.size());
    cu::copy_to_device(dsa.p, sa.data(), sa.size() * 4);
    cu::copy_to_device(dsb.p, sb.data(), sb.size() * 4);
    cu::device_memset(dd.p, 0xA5, cpu.size() * 4);
    cu::GemmOperand ga{static_cast<const std::uint8_t*>(da.p), sh.m, fa, sk, static_cast<const float*>(dsa.p)};
    cu::GemmOperand gb{static_cast<const std::uint8_t*>(db.p), sh.n, fb, sk, static_cast<const float*>(dsb.p)};
    cu::gemm_model(ga, gb, sh.k, gm::params_of(model), out, static_cast<std::uint32_t*>(dd.p));
    std::vector<std::uint32_t> gpu(cpu.size());
    cu::copy_to_host(gpu.data(), dd.p, gpu.size() * 4);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < cpu.size(); ++i)
        if (cpu[i] != gpu[i] && bad++ == 0)
            first = "element " + std::to_string(i / sh.n) + "," + std::to_string(i % sh.n) + ": cpu " +
                    std::to_string(cpu[i]) + " gpu " + std::to_string(gpu[i]);
    return bad;
}

const char* input_name(Input i) { return i == Input::normal ? "normal" : i == Input::wide ? "wide" : "adversarial"; }
const char* scale_name(gm::ScaleKind s) {
    return s == gm::ScaleKind::tensor ? "tensor" : s == gm::ScaleKind::row ? "row" : "block";
}

std::vector<gm::AccumModel> gpu_models() {
    std::vector<gm::AccumModel> v;
    for (const auto& m : gm::named_models())
        if (m.kind != gm::AccumKind::exact) v.push_back(m);
    for (const char* text :
         {"aligned:align=floor,sticky=1", "aligned:align=rne,step=rne,sum_bits=0",
          "aligned:exp=actual,group=16,promote=64", "aligned:bits=20,group=8,scale=promotion,fma=0",
          "aligned:bits=24,promote=96,sticky=1,step=rne", "aligned:group=1,bits=30,sum_bits=0,promote=32"})
        v.push_back(gm::parse_model(text));
    return v;
}

// FP8KIT_GPU_TEST_QUICK=1 (the compute-sanitizer runs): the first two shapes with K <= 1024 and
// three models (sm90: the 32-bit path, h100tc: the 64-bit path, fp32) or the 384-product
// split-K models (racecheck ran past 90 s on the K = 8192 shape).
bool quick() {
    const char* q = std::getenv("FP8KIT_GPU_TEST_QUICK");
    return q && *q == '1';
}

void run_cases(std::vector<Shape> shapes, std::vector<gm::AccumModel> models, std::uint32_t seed0) {
    if (quick()) {
        std::vector<Shape> small;
        for (const Shape& sh : shapes)
            if (sh.k <= 1024 && small.size() < 2) small.push_back(sh);
        shapes = small;
        std::vector<gm::AccumModel> few;
        for (const auto& m : models)
            if (m.name == "sm90" || m.name == "h100tc" || m.name == "fp32" || m.split_k == 384) few.push_back(m);
        models = few;
    }
    const std::vector<std::pair<Format, Format>> pairs = {{Format::e4m3, Format::e4m3},
                                                          {Format::e4m3, Format::e5m2},
                                                          {Format::e5m2, Format::e4m3},
                                                          {Format::e5m2, Format::e5m2}};
    std::uint32_t seed = seed0;
    std::size_t cases = 0, failed = 0;
    for (std::size_t s = 0; s < shapes.size(); ++s)
        for (Input input : {Input::normal, Input::wide, Input::adversarial})
            for (gm::ScaleKind sk : {gm::ScaleKind::tensor, gm::ScaleKind::row, gm::ScaleKind::block})
                for (gm::OutType out : {gm::OutType::f32, gm::OutType::bf16})
                    for (const auto& model : models) {
                        const auto& fp = pairs[(seed++) % pairs.size()];
                        std::string first;
                        const std::size_t bad =
                            compare_case(fp.first, fp.second, shapes[s], input, sk, out, model, seed, first);
                        ++cases;
                        // Every case runs; the first few failing ones are shown in full.
                        if (bad != 0 && ++failed <= 8)
                            FAIL_CHECK(bad << " elements differ: " << gm::describe(model) << " " << shapes[s].m << "x"
                                           << shapes[s].n << "x" << shapes[s].k << " " << fp8kit::name(fp.first) << "x"
                                           << fp8kit::name(fp.second) << " " << input_name(input) << " "
                                           << scale_name(sk) << (out == gm::OutType::f32 ? " f32 " : " bf16 ")
                                           << "seed " << seed << " " << first);
                    }
    INFO(cases << " cases compared, " << failed << " with differences");
    CHECK(failed == 0);
    CHECK(cases > 0);
}

}  // namespace

TEST_CASE("cuda gemm model equals lib's CPU model bit for bit: every model, scale kind, output, K 16..4096",
          "[gpu][gemm]") {
    const std::vector<Shape> shapes = {{1, 1, 16},   {70, 33, 16},  {33, 70, 48},   {65, 130, 128},
                                       {17, 5, 129}, {40, 72, 300}, {64, 64, 1024}, {20, 36, 4096}};
    run_cases(shapes, gpu_models(), 2611);
}

TEST_CASE("cuda gemm model equals lib's CPU model: split-K models and K = 8192", "[gpu][gemm]") {
    std::vector<gm::AccumModel> models = {gm::split_model(false, 384),  gm::split_model(true, 384),
                                          gm::split_model(false, 2816), gm::split_model(true, 2816),
                                          gm::parse_model("sm90"),      gm::parse_model("sm90-fast")};
    run_cases({{16, 24, 1000}, {9, 70, 8192}}, models, 2612);
}

TEST_CASE("cuda gemm model refuses what it does not compute", "[gpu][gemm]") {
    std::string why;
    CHECK_FALSE(cu::gemm_model_supported(gm::params_of(gm::parse_model("exact")), &why));
    CHECK(why.find("exact") != std::string::npos);
    CHECK_FALSE(cu::gemm_model_supported(gm::params_of(gm::parse_model("aligned:group=64")), &why));
    CHECK(why.find("group") != std::string::npos);
    cu::GemmOperand a, b;
    a.rows = b.rows = 1;
    CHECK_THROWS_AS(cu::gemm_model(a, b, 16, gm::params_of(gm::parse_model("exact")), gm::OutType::f32, nullptr),
                    std::invalid_argument);
    b.scale_kind = gm::ScaleKind::block;
    CHECK_THROWS_AS(cu::gemm_model(a, b, 16, gm::params_of(gm::parse_model("sm90")), gm::OutType::f32, nullptr),
                    std::invalid_argument);
}
