// The accumulation models by name, and the parameter-list syntax (docs/gemm.md).
#include <fmt/format.h>

#include <charconv>
#include <stdexcept>

#include "fp8kit/gemm/model.hpp"

namespace fp8kit::gemm {
namespace {

// Measured on an H100 (docs/gemm.md, "Experiments"): products aligned by their nominal
// exponents (ea + eb) with unit 2^(E - 13), the step's sum truncated to 14 significant bits.
AccumModel aligned(std::string name, int promote, ScaleAt at) {
    AccumModel m;
    m.name = std::move(name);
    m.kind = AccumKind::aligned;
    // Khattak & Mikaitis, arXiv 2512.07004, models/H100TC.m (north-numerical-computing/
    // MATLAB-tensor-core): FP8 fma = 32 products, neab = -10 (24 - 10 = 14 bits kept in the
    // alignment), truncation without sticky bit, FP32 result rounded toward zero.
    // DeepSeek-V3 report sec. 3.5.2: about 14 bits kept, the rest truncated.
    m.group = 32;
    m.align_bits = 14;
    m.align = AlignRound::toward_zero;
    m.sticky = false;
    m.step_round = StepRound::toward_zero;
    m.nominal_exponent = true;
    m.sum_bits = 14;
    m.promote = promote;
    m.scale_at = at;
    return m;
}

// H100TC.m as published: products aligned by their actual exponents, no truncation of the sum.
AccumModel h100tc() {
    AccumModel m = aligned("h100tc", 0, ScaleAt::epilogue);
    m.nominal_exponent = false;
    m.sum_bits = 0;
    return m;
}

int parse_int(std::string_view v, std::string_view key, int lo, int hi) {
    int x = 0;
    const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec != std::errc() || p != v.data() + v.size() || x < lo || x > hi)
        throw std::invalid_argument(
            fmt::format("accumulation model: {}='{}' is not an integer in {}..{}", key, v, lo, hi));
    return x;
}

}  // namespace

std::vector<AccumModel> named_models() {
    AccumModel exact;
    exact.name = "exact";
    AccumModel fp32;
    fp32.name = "fp32";
    fp32.kind = AccumKind::fp32;
    // sm90: cuBLASLt's default (split) accumulator, hypothesis: promotion every 4 MMAs of k=32
    // as CUTLASS's sm90 FP8 mainloop does (mma_promotion_interval) and DeepSeek's N_C = 128.
    // sm90-fast: CUBLASLT_MATMUL_DESC_FAST_ACCUM, no promotion.
    return {exact,
            fp32,
            aligned("sm90", 128, ScaleAt::epilogue),
            aligned("sm90-fast", 0, ScaleAt::epilogue),
            aligned("deepseek-128", 128, ScaleAt::promotion),
            h100tc()};
}

// The split-K kernels cuBLASLt 13.1 picks for small M x N and large K (nvjet_sm90_*_splitK_* then
// cublasLt::splitKreduce_kernel), measured on an H200 with scripts/gpu/probe_splitk.py (docs/gemm.md,
// "Split-K"): each CTA accumulates its range of k as sm90 / sm90-fast do from zero, and the
// reduction adds the float32 partials in k order before the epilogue.
AccumModel split_model(bool fast, int split_k) {
    AccumModel m =
        aligned(fmt::format("{}-splitk:{}", fast ? "sm90-fast" : "sm90", split_k), fast ? 0 : 128, ScaleAt::epilogue);
    m.split_k = split_k;
    return m;
}

std::vector<int> split_sizes(std::size_t k, int max_splits) {
    const std::size_t tiles = (k + 127) / 128;
    std::vector<int> sizes;
    for (std::size_t s = 2; s <= tiles && s <= static_cast<std::size_t>(max_splits); ++s) {
        const int size = static_cast<int>((tiles + s - 1) / s * 128);
        if (sizes.empty() || sizes.back() != size) sizes.push_back(size);
    }
    return sizes;
}

int predicted_split_k(std::size_t m, std::size_t n, std::size_t k, numerics::gemm::ScaleKind kind) {
    if (kind != numerics::gemm::ScaleKind::tensor) return 0;
    const std::size_t tiles = (k + 127) / 128, splits = tiles * 10 / 201;
    if (splits < 2) return 0;
    if (static_cast<double>(splits) * static_cast<double>(m) * static_cast<double>(n) > kSplitPredictionLimit)
        return -1;
    return static_cast<int>((tiles + splits - 1) / splits * 128);
}

AccumModel parse_model(std::string_view text) {
    for (const auto& m : named_models())
        if (m.name == text) return m;
    for (const bool fast : {false, true}) {
        const std::string_view split_prefix = fast ? "sm90-fast-splitk:" : "sm90-splitk:";
        if (text.substr(0, split_prefix.size()) == split_prefix) {
            const int n = parse_int(text.substr(split_prefix.size()), "split size", 128, 1 << 30);
            if (n % 128 != 0)
                throw std::invalid_argument(
                    fmt::format("accumulation model '{}': the split size must be a multiple of 128", text));
            return split_model(fast, n);
        }
    }
    constexpr std::string_view prefix = "aligned:";
    if (text.substr(0, prefix.size()) != prefix)
        throw std::invalid_argument(
            fmt::format("accumulation model '{}': choose exact, fp32, sm90, sm90-fast, sm90-splitk:N, "
                        "sm90-fast-splitk:N, deepseek-128, "
                        "h100tc or aligned:key=value,...",
                        text));
    AccumModel m = aligned(std::string(text), 0, ScaleAt::epilogue);
    std::string_view rest = text.substr(prefix.size());
    while (!rest.empty()) {
        const auto comma = rest.find(',');
        const std::string_view item = rest.substr(0, comma);
        rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
        const auto eq = item.find('=');
        if (eq == std::string_view::npos)
            throw std::invalid_argument(fmt::format("accumulation model: '{}' is not key=value", item));
        const std::string_view k = item.substr(0, eq), v = item.substr(eq + 1);
        if (k == "group")
            m.group = parse_int(v, k, 1, 4096);
        else if (k == "bits")
            m.align_bits = parse_int(v, k, 2, 48);
        else if (k == "sum_bits")
            m.sum_bits = parse_int(v, k, 0, 48);
        else if (k == "exp" && (v == "nominal" || v == "actual"))
            m.nominal_exponent = v == "nominal";
        else if (k == "promote")
            m.promote = parse_int(v, k, 0, 1 << 30);
        else if (k == "splitk")
            m.split_k = parse_int(v, k, 0, 1 << 30);
        else if (k == "fma")
            m.promote_fma = parse_int(v, k, 0, 1) == 1;
        else if (k == "sticky")
            m.sticky = parse_int(v, k, 0, 1) == 1;
        else if (k == "align" && (v == "trunc" || v == "floor" || v == "rne"))
            m.align = v == "trunc"   ? AlignRound::toward_zero
                      : v == "floor" ? AlignRound::floor
                                     : AlignRound::nearest_even;
        else if (k == "step" && (v == "rz" || v == "rne"))
            m.step_round = v == "rz" ? StepRound::toward_zero : StepRound::nearest_even;
        else if (k == "scale" && (v == "epilogue" || v == "promotion"))
            m.scale_at = v == "epilogue" ? ScaleAt::epilogue : ScaleAt::promotion;
        else
            throw std::invalid_argument(
                fmt::format("accumulation model: unknown '{}' (keys: group, bits, exp=nominal|actual, sum_bits, "
                            "promote, align=trunc|floor|rne, sticky=0|1, "
                            "step=rz|rne, scale=epilogue|promotion, splitk, fma=0|1)",
                            item));
    }
    if (m.promote % m.group != 0)
        throw std::invalid_argument(
            fmt::format("accumulation model: promote={} is not a multiple of group={}", m.promote, m.group));
    if (m.split_k % 128 != 0 || (m.promote > 0 && m.split_k % m.promote != 0))
        throw std::invalid_argument(
            fmt::format("accumulation model: splitk={} is not a multiple of 128 k (a tile) and of promote={}",
                        m.split_k, m.promote));
    return m;
}

std::string describe(const AccumModel& m) {
    if (m.kind != AccumKind::aligned) return m.name;
    return fmt::format(
        "aligned:group={},bits={},exp={},sum_bits={},promote={},align={},sticky={},step={},scale={},splitk={},fma={}",
        m.group, m.align_bits, m.nominal_exponent ? "nominal" : "actual", m.sum_bits, m.promote,
        m.align == AlignRound::toward_zero ? "trunc"
        : m.align == AlignRound::floor     ? "floor"
                                           : "rne",
        m.sticky ? 1 : 0, m.step_round == StepRound::toward_zero ? "rz" : "rne",
        m.scale_at == ScaleAt::epilogue ? "epilogue" : "promotion", m.split_k, m.promote_fma ? 1 : 0);
}

numerics::gemm::ModelParams params_of(const AccumModel& m) {
    numerics::gemm::ModelParams p;
    p.kind = m.kind;
    p.group = m.group;
    p.align_bits = m.align_bits;
    p.nominal_exponent = m.nominal_exponent;
    p.sum_bits = m.sum_bits;
    p.align = m.align;
    p.sticky = m.sticky;
    p.step_round = m.step_round;
    p.promote = m.promote;
    p.scale_at = m.scale_at;
    p.split_k = m.split_k;
    p.promote_fma = m.promote_fma;
    return p;
}

}  // namespace fp8kit::gemm
