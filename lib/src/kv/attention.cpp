// FP8 attention's numerics on captured Q, K, V, through the reference GEMM (fp8kit/gemm.hpp):
//   S = (Qc . Kc^T) * q_scale * k_scale           (Qc = e4m3(Q / q_scale), Kc the E4M3 cache)
//   FlashAttention-3 (hopper/softmax.h, mainloop): P~ = exp(S / sqrt(d) - rowmax), cast to E4M3
//     with no scale (P~ lies in (0, 1]); O = (P~c . Vc) * v_scale / rowsum(P~), rowsum in float32
//     from the unrounded P~. One key tile per row is assumed (the whole causal row at once); FA3's
//     online rescaling across tiles is not modelled.
//   ModelOpt (p_bmm_quantizer, the softmax output quantised before the P V bmm): P = softmax,
//     normalised, cast to E4M3 with no scale; O = (Pc . Vc) * v_scale.
// Reference: the same attention in binary64 on the BF16 values. Causal mask (decoder).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "convert/float_bits.hpp"
#include "fp8kit/convert/names.hpp"
#include "fp8kit/emu/formats.hpp"
#include "fp8kit/gemm/gemm.hpp"
#include "fp8kit/kv.hpp"

namespace fp8kit::kv {
namespace {

std::uint8_t e4m3(float v) {
    return emu::encode(Format::e4m3, Wide::f32, fp8kit::detail::bits_of(v), emu::kRneSaturate);
}
float f32(std::uint32_t b) { return fp8kit::detail::float_of(b); }
float e4m3_value(std::uint8_t c) { return f32(static_cast<std::uint32_t>(emu::decode(Format::e4m3, Wide::f32, c))); }

struct Sums {
    double signal = 0, noise = 0;
    void add(double ref, double got) {
        signal += ref * ref;
        noise += (got - ref) * (got - ref);
    }
    double db() const { return noise == 0 ? HUGE_VAL : 10.0 * std::log10(signal / noise); }
};

// Rows [positions x dim] of head h of batch b, as E4M3 codes of x / scale (the cache cast).
std::vector<std::uint8_t> codes(const Tensor4& t, std::size_t b, std::size_t h, float scale) {
    std::vector<std::uint8_t> c(t.positions * t.dim);
    for (std::size_t p = 0; p < t.positions; ++p)
        for (std::size_t d = 0; d < t.dim; ++d) c[p * t.dim + d] = e4m3(t.at(b, h, p, d) / scale);
    return c;
}

std::vector<float> scaled_gemm(const std::vector<std::uint8_t>& a, std::size_t m, const std::vector<std::uint8_t>& bt,
                               std::size_t n, std::size_t k, float sa, float sb) {
    gemm::GemmRequest rq;
    rq.a = {a.data(), m, Format::e4m3, gemm::ScaleKind::tensor, &sa, 1};
    rq.b = {bt.data(), n, Format::e4m3, gemm::ScaleKind::tensor, &sb, 1};
    rq.k = k;
    const auto bits = gemm::gemm(rq, gemm::AccumModel{});  // exact: one rounding to float32
    std::vector<float> out(bits.size());
    for (std::size_t i = 0; i < bits.size(); ++i) out[i] = f32(bits[i]);
    return out;
}

// The policy's E4M3 scale of head h of one tensor (q_scale, k_scale or v_scale).
float e4m3_scale(ScalePolicy p, const std::vector<Tensor4>& steps, std::size_t h, char which) {
    float first = 0, all = 0, head = 0;
    for (std::size_t s = 0; s < steps.size(); ++s) {
        const Tensor4& t = steps[s];
        for (std::size_t i = 0; i < t.data.size(); ++i) {
            const float a = std::fabs(t.data[i]);
            all = std::max(all, a);
            if (s == 0) first = std::max(first, a);
            if ((i / (t.positions * t.dim)) % t.heads == h) head = std::max(head, a);
        }
    }
    switch (p) {
        case ScalePolicy::vllm_first_batch: return vllm_first_batch_scale(first, which);
        case ScalePolicy::tensor: return calibrated_scale(all, CacheFormat::e4m3);
        case ScalePolicy::modelopt_trtllm:
            return which == 'q' ? calibrated_scale(all, CacheFormat::e4m3) : modelopt_kv_scale(all, CacheFormat::e4m3);
        case ScalePolicy::modelopt_hf: return calibrated_scale(all, CacheFormat::e4m3);
        case ScalePolicy::llmc_minmax: return llmc_minmax_scale(steps, CacheFormat::e4m3);
        case ScalePolicy::head: return calibrated_scale(head, CacheFormat::e4m3);
        default: return 1.0f;
    }
}

}  // namespace

namespace {

// The sums of one head over one batch element of one step: scores, FA3's P, O (FA3), O (normalised).
struct HeadSums {
    Sums s, p, o, on;
};

void attend_one(const Tensor4& q, const Tensor4& k, const Tensor4& v, std::size_t b, AttentionRow& row, HeadSums& hs) {
    const std::size_t n = q.positions, d = q.dim, h = row.head, kh = row.kv_head;
    const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(d));
    const auto qc = codes(q, b, h, row.q_scale), kc = codes(k, b, kh, row.k_scale), vc = codes(v, b, kh, row.v_scale);
    std::vector<std::uint8_t> vt(d * n);  // V^T: the B operand of P V is dim x positions
    for (std::size_t j = 0; j < n; ++j)
        for (std::size_t e = 0; e < d; ++e) vt[e * n + j] = vc[j * d + e];
    const auto scores = scaled_gemm(qc, n, kc, n, d, row.q_scale, row.k_scale);
    std::vector<std::uint8_t> pc(n * n, 0), pn(n * n, 0);
    std::vector<float> rowsum(n);
    std::vector<std::vector<double>> pref(n);
    for (std::size_t i = 0; i < n; ++i) {
        std::vector<double> sref(i + 1);  // binary64 reference scores of the causal row
        double mref = -HUGE_VAL, m = -HUGE_VAL;
        for (std::size_t j = 0; j <= i; ++j) {
            double acc = 0;
            for (std::size_t e = 0; e < d; ++e) acc += static_cast<double>(q.at(b, h, i, e)) * k.at(b, kh, j, e);
            sref[j] = acc * inv_sqrt_d;
            mref = std::max(mref, sref[j]);
            m = std::max(m, scores[i * n + j] * inv_sqrt_d);
            hs.s.add(sref[j], scores[i * n + j] * inv_sqrt_d);
        }
        double zref = 0, z = 0;  // z: the float32 P~ summed in binary64, rounded to float32 below
        for (std::size_t j = 0; j <= i; ++j) {
            zref += std::exp(sref[j] - mref);
            z += static_cast<float>(std::exp(scores[i * n + j] * inv_sqrt_d - m));
        }
        rowsum[i] = static_cast<float>(z);
        pref[i].resize(i + 1);
        for (std::size_t j = 0; j <= i; ++j) {
            pref[i][j] = std::exp(sref[j] - mref) / zref;
            const float pt = static_cast<float>(std::exp(scores[i * n + j] * inv_sqrt_d - m));
            pc[i * n + j] = e4m3(pt);                          // P~ in (0, 1]: no descale (FA3)
            pn[i * n + j] = e4m3(static_cast<float>(pt / z));  // softmax, then cast (ModelOpt)
            hs.p.add(pref[i][j], e4m3_value(pc[i * n + j]) / z);
            ++row.p_nonzero;
            row.p_underflow += e4m3_value(pc[i * n + j]) == 0.0f;
        }
    }
    const auto o = scaled_gemm(pc, n, vt, d, n, 1.0f, row.v_scale);
    const auto on = scaled_gemm(pn, n, vt, d, n, 1.0f, row.v_scale);
    for (std::size_t i = 0; i < n; ++i)
        for (std::size_t e = 0; e < d; ++e) {
            double ref = 0;
            for (std::size_t j = 0; j <= i; ++j) ref += pref[i][j] * v.at(b, kh, j, e);
            hs.o.add(ref, o[i * d + e] / rowsum[i]);
            hs.on.add(ref, on[i * d + e]);
        }
}

}  // namespace

std::vector<AttentionRow> fp8_attention(const std::string& layer, const std::vector<Tensor4>& q,
                                        const std::vector<Tensor4>& k, const std::vector<Tensor4>& v, ScalePolicy p) {
    if (p == ScalePolicy::token_head)
        throw KvError("kv: FP8 attention takes per-tensor or per-head scales, not token_head");
    const std::size_t hq = q.front().heads, hkv = k.front().heads;
    if (hkv == 0 || hq % hkv != 0)
        throw KvError(layer + ": " + std::to_string(hq) + " query heads for " + std::to_string(hkv) + " KV heads");
    std::vector<AttentionRow> rows;
    for (std::size_t h = 0; h < hq; ++h) {
        AttentionRow row;
        row.layer = layer;
        row.head = h;
        row.kv_head = h / (hq / hkv);
        row.policy = p;
        row.q_scale = e4m3_scale(p, q, h, 'q');
        row.k_scale = e4m3_scale(p, k, row.kv_head, 'k');
        row.v_scale = e4m3_scale(p, v, row.kv_head, 'v');
        HeadSums hs;
        for (std::size_t s = 0; s < q.size(); ++s)
            for (std::size_t b = 0; b < q[s].batch; ++b) attend_one(q[s], k[s], v[s], b, row, hs);
        row.scores_sqnr_db = hs.s.db();
        row.probs_sqnr_db = hs.p.db();
        row.out_sqnr_db = hs.o.db();
        row.out_normalized_sqnr_db = hs.on.db();
        rows.push_back(row);
    }
    return rows;
}

}  // namespace fp8kit::kv
