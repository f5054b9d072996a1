// `fp8kit kv DUMPS`: find the captured Q, K, V of each attention layer (names `<layer>.q`, `.k`,
// `.v`, as fp8kit.torch.Monitor(attention=True) writes them; each dump step one batch, in step
// order), cast them under every format and policy, and run FP8 attention where all three exist.
#include <iterator>
#include <algorithm>
#include <cmath>
#include <optional>
#include <cstring>
#include <map>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/kv.hpp"

namespace fp8kit::kv {
namespace {

// "step_000100/model.layers.0.self_attn.k" -> ("model.layers.0.self_attn", 'k'); not a Q/K/V name: nullopt.
std::optional<std::pair<std::string, char>> split_name(const std::string& full) {
    std::string n = full;
    const auto slash = n.find('/');
    if (slash != std::string::npos && dump::guess_step(n.substr(0, slash))) n = n.substr(slash + 1);
    if (n.size() < 3 || n[n.size() - 2] != '.') return std::nullopt;
    const char t = n.back();
    if (t != 'q' && t != 'k' && t != 'v') return std::nullopt;
    return std::make_pair(n.substr(0, n.size() - 2), t);
}

Tensor4 read_tensor(dump::Dump& d, std::size_t i) {
    const auto& info = d.tensors()[i];
    if (info.shape.size() != 4)
        throw KvError(info.file + ": " + info.name + ": shape of " + std::to_string(info.shape.size()) +
                      " dimensions; kv reads [batch, heads, positions, head_dim] (the attention kernel's input)");
    if (info.dtype != dump::DType::bf16 && info.dtype != dump::DType::f32)
        throw KvError(info.file + ": " + info.name + ": stored as " + std::string(dump::name(info.dtype)) +
                      "; kv reads bfloat16 or float32 (the values the cache is filled from)");
    Tensor4 t;
    t.batch = info.shape[0], t.heads = info.shape[1], t.positions = info.shape[2], t.dim = info.shape[3];
    t.data.resize(info.numel);
    d.read(i, [&](const dump::Chunk& c) {
        for (std::size_t k = 0; k < c.count; ++k) {
            std::uint32_t w;
            if (c.wide == Wide::f32) {
                std::memcpy(&w, static_cast<const char*>(c.bits) + 4 * k, 4);
            } else {  // bfloat16: the high half of a float32, exactly
                std::uint16_t h;
                std::memcpy(&h, static_cast<const char*>(c.bits) + 2 * k, 2);
                w = static_cast<std::uint32_t>(h) << 16;
            }
            std::memcpy(&t.data[c.first + k], &w, 4);
        }
    });
    for (float x : t.data)
        if (!std::isfinite(x)) throw KvError(info.file + ": " + info.name + ": holds a NaN or Inf value");
    return t;
}

// One layer's captured tensors, by kind, each in step order.
struct Layer {
    std::map<char, std::vector<std::pair<std::int64_t, std::size_t>>> steps;  // kind -> (step, index)
};

void check_same_shapes(const std::string& layer, char kind, const std::vector<Tensor4>& v) {
    for (const auto& t : v)
        if (t.batch != v[0].batch || t.heads != v[0].heads || t.positions != v[0].positions || t.dim != v[0].dim)
            throw KvError(layer + "." + kind + ": steps of different shapes");
}

void add_layer(Report& r, const Options& o, const std::string& name, std::map<char, std::vector<Tensor4>>& data) {
    r.layers.push_back(name);
    for (auto& [kind, steps] : data) {
        check_same_shapes(name, kind, steps);
        for (CacheFormat f : o.formats)
            for (ScalePolicy p : o.policies) {
                const CastResult c = cast_cache(steps, kind, f, p, o.bucket);
                for (std::size_t h = 0; h < c.per_head.size(); ++h)
                    r.rows.push_back({name, kind, h, f, p,
                                      c.scales.empty() ? 0.0f : c.scales[c.scales.size() == 1 ? 0 : h], c.per_head[h]});
                for (std::size_t b = 0; b < c.per_bucket.size(); ++b)
                    r.buckets.push_back({name, kind, f, p, b * o.bucket,
                                         std::min((b + 1) * o.bucket, steps[0].positions) - 1, c.per_bucket[b]});
            }
    }
    if (!o.attention) return;
    if (data.size() != 3) {
        r.notes.push_back(name + ": FP8 attention needs q, k and v: skipped");
        return;
    }
    const auto &q = data['q'], &k = data['k'], &v = data['v'];
    if (q.size() != k.size() || k.size() != v.size() || q[0].positions != k[0].positions || q[0].dim != k[0].dim ||
        q[0].batch != k[0].batch || v[0].positions != k[0].positions || v[0].heads != k[0].heads) {
        r.notes.push_back(
            name +
            ": q, k and v differ in steps or shape (a KV cache longer than the queries?): FP8 attention skipped");
        return;
    }
    for (ScalePolicy p : o.policies) {
        if (p == ScalePolicy::token_head) continue;
        auto rows = fp8_attention(name, q, k, v, p);
        r.attention.insert(r.attention.end(), rows.begin(), rows.end());
    }
}

}  // namespace

Report run(const Options& opt) {
    Options o = opt;
    if (o.formats.empty()) o.formats = all_formats();
    if (o.policies.empty()) o.policies = all_policies();
    if (o.bucket == 0) throw KvError("kv: --bucket must be at least 1 position");
    std::vector<dump::Problem> problems;
    const auto files = dump::expand_inputs(o.files, problems);
    if (!problems.empty()) throw KvError(problems.front().describe());
    if (files.empty()) throw KvError("kv: no dump file given");
    dump::Dump d(files);
    if (!d.errors().empty()) throw KvError(d.errors().front().describe());
    std::map<std::string, Layer> layers;
    for (std::size_t i = 0; i < d.tensors().size(); ++i) {
        const auto& t = d.tensors()[i];
        const auto s = split_name(t.name);
        if (!s) continue;
        auto& st = layers[s->first].steps[s->second];
        st.emplace_back(t.step ? *t.step : static_cast<std::int64_t>(st.size()), i);
    }
    if (layers.empty())
        throw KvError(
            files.front() +
            ": no Q/K/V tensor (names ending in .q, .k, .v, as fp8kit.torch.Monitor(attention=True) dumps them)");
    Report r;
    r.skipped = dump::skipped(d.notes());
    for (auto& [name, layer] : layers) {
        std::map<char, std::vector<Tensor4>> data;
        for (auto& [kind, list] : layer.steps) {
            std::stable_sort(list.begin(), list.end());
            for (const auto& e : list) {
                try {
                    data[kind].push_back(read_tensor(d, e.second));
                } catch (const dump::DumpError& err) {  // a broken dataset: bad input, named
                    throw KvError(err.what());
                }
            }
        }
        const auto& any = data.count('k') ? data['k'] : data.begin()->second;
        r.steps = any.size(), r.batch = any[0].batch, r.positions = any[0].positions, r.dim = any[0].dim;
        add_layer(r, o, name, data);
    }
    return r;
}

}  // namespace fp8kit::kv
