// validate(): the main pass (reference codes, bit-for-bit comparison, classification of the
// mismatches), then the search for the policies the kernel's output equals.
#include "fp8kit/validate.hpp"

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include "validate/validate_engine.hpp"

namespace fp8kit {

using namespace validate_detail;

namespace {

// Elements are processed in fixed blocks of this size; every per-block result is an integer
// count or a set of lowest indices, so merging them in any order gives the same report.
constexpr std::size_t kBlock = std::size_t{1} << 16;
constexpr std::size_t kSampleTarget = std::size_t{1} << 12;  // evenly spaced elements that prune policies

// Which scale applies to element i, walked incrementally (no division per element); the GPU
// scan computes the same index per element with numerics::block_of.
using BlockCursor = numerics::BlockWalk;

struct ThreadResult {
    std::uint64_t counts[kMaskCount] = {};
    std::vector<std::uint64_t> examples[kMaskCount];
};

void keep_lowest(std::vector<std::uint64_t>& v, std::size_t k) {
    std::sort(v.begin(), v.end());
    if (v.size() > k) v.resize(k);
}

bool same(const Policy& a, const Policy& b) {
    return a.rounding == b.rounding && a.overflow == b.overflow && a.nan == b.nan;
}

// One part's scan, as bytes (ValidateSplit): the counts per mask, each mask's examples, and one
// byte per surviving policy (1: it still holds on this part's elements).
std::string encode_scan(const ThreadResult& t, const std::vector<char>& ok) {
    std::string out;
    auto put = [&](std::uint64_t v) { out.append(reinterpret_cast<const char*>(&v), sizeof v); };
    for (int m = 0; m < kMaskCount; ++m) {
        put(t.counts[m]);
        put(t.examples[m].size());
        for (std::uint64_t i : t.examples[m]) put(i);
    }
    put(ok.size());
    out.append(ok.begin(), ok.end());
    return out;
}

// Adds a part's scan to `all` and ANDs its policies into `ok`; the examples are cut to the
// lowest k afterwards.
void merge_scan(const std::string& in, ThreadResult& all, std::vector<char>& ok) {
    std::size_t pos = 0;
    auto get = [&] {
        std::uint64_t v;
        if (in.size() - pos < sizeof v) throw std::runtime_error("validate: truncated scan from another part");
        std::memcpy(&v, in.data() + pos, sizeof v);
        pos += sizeof v;
        return v;
    };
    for (int m = 0; m < kMaskCount; ++m) {
        all.counts[m] += get();
        for (std::uint64_t j = 0, n = get(); j < n; ++j) all.examples[m].push_back(get());
    }
    const std::uint64_t ns = get();
    if (ns != ok.size() || in.size() - pos != ns)
        throw std::runtime_error("validate: malformed scan from another part");
    for (std::size_t s = 0; s < ns; ++s) ok[s] = ok[s] && in[pos + s];
}

// Engine::widen's table for float16 inputs (empty for the others).
template <class W>
std::vector<float> f16_table() {
    std::vector<float> v;
    if constexpr (std::is_same_v<W, emu::Binary16>) {
        for (u64 b = 0; b < 65536; ++b)
            v.push_back(bit_cast<float>(static_cast<std::uint32_t>(
                emu::convert<W, emu::Binary32>(static_cast<std::uint16_t>(b), emu::kDecodePolicy))));
    }
    return v;
}

// The report from a scan's results (both paths: run() below and validate_mismatches()): `all`
// holds the count of every explain() mask and each mask's lowest-index examples, `consistent`
// the policies that hold on every element (in validate_policy order), fetch(i) the input bits
// and the kernel's code of a mismatching element i.
template <class W, class C, class F, bool Scaled, class Fetch>
ValidateReport assemble(const ValidateRequest& rq, const ValidateOptions& opt, const Engine<W, C, F, Scaled>& eng,
                        const CodeTable& table, const std::vector<float>& raw, const ThreadResult& all,
                        const std::vector<Policy>& consistent, Fetch&& fetch) {
    using E = Engine<W, C, F, Scaled>;
    const BlockLayout layout = rq.scaling.mode == ScaleMode::none ? BlockLayout::tensor : rq.scaling.layout;
    const std::size_t cols = layout == BlockLayout::tensor ? 1 : rq.scaling.cols;
    const bool per_block = E::scaled && layout != BlockLayout::tensor;
    const std::size_t k = opt.examples;
    const std::size_t n = rq.n;

    ValidateReport r;
    r.to = rq.to;
    r.from = rq.from;
    r.policy = rq.policy;
    r.scale_mode = rq.scaling.mode;
    r.layout = layout;
    r.total = n;
    for (int m = 0; m < kMaskCount; ++m) r.mismatches += all.counts[m];
    r.matches = n - r.mismatches;

    // Each mismatch goes to the class, among those that explain it, that explains the most
    // mismatches overall; on equal counts the more specific class (this order) wins. So a
    // truncating kernel reads as "direction" throughout even where one element happens to
    // equal rounding through bfloat16 too.
    static const MismatchClass priority[] = {
        MismatchClass::nan_encoding,    MismatchClass::overflow, MismatchClass::flush_to_zero, MismatchClass::scale,
        MismatchClass::double_rounding, MismatchClass::tie,      MismatchClass::direction};
    std::uint64_t explains[kMismatchClassCount] = {};
    for (int m = 0; m < kMaskCount; ++m)
        for (int c = 0; c < 7; ++c)
            if (m & (1 << c)) explains[c] += all.counts[m];
    std::vector<std::pair<std::uint64_t, int>> chosen;  // (index, class) of candidate examples
    for (int m = 0; m < kMaskCount; ++m) {
        int cls = static_cast<int>(MismatchClass::other);
        std::uint64_t best = 0;
        for (MismatchClass c : priority) {
            const int ci = static_cast<int>(c);
            if ((m & (1 << ci)) && (cls == static_cast<int>(MismatchClass::other) || explains[ci] > best)) {
                cls = ci;
                best = explains[ci];
            }
        }
        r.classes[static_cast<std::size_t>(cls)].count += all.counts[m];
        for (std::uint64_t i : all.examples[m]) chosen.emplace_back(i, cls);
    }
    std::sort(chosen.begin(), chosen.end());
    for (auto [i, cls] : chosen) {
        ClassReport& cr = r.classes[static_cast<std::size_t>(cls)];
        if (cr.examples.size() >= k) continue;
        BlockCursor cur(layout, cols, i);
        const std::size_t sb = per_block ? cur.index() : 0;
        const auto [x, actual] = fetch(i);
        const u64 v = eng.scaled_bits(x, sb);
        MismatchExample ex;
        ex.index = i;
        ex.input_bits = x;
        ex.input = to_double<W>(x);
        ex.scaled = to_double<C>(v);
        ex.scale = E::scaled ? static_cast<double>(raw[sb]) : 1.0;
        ex.expected = E::round(v, rq.policy);
        ex.actual = actual;
        ex.expected_value = table.value[ex.expected];
        ex.actual_value = table.value[ex.actual];
        cr.examples.push_back(ex);
    }

    if (!opt.detect_policies) return r;
    r.consistent_policies = consistent;
    r.policies_detected = true;
    auto holds = [&](const Policy& p) {
        return std::any_of(r.consistent_policies.begin(), r.consistent_policies.end(),
                           [&](const Policy& q) { return same(p, q); });
    };
    // The type the final cast rounds from: the input, or the float32/float64 product.
    const Wide cast_from = std::is_same_v<C, emu::Binary64> ? Wide::f64 : (E::scaled ? Wide::f32 : rq.from);
    for (Profile p : emu::kAllProfiles) {
        // ml_dtypes and torch narrow float64 to float32 first: no single-rounding policy is theirs.
        if (cast_from == Wide::f64 && (p == Profile::ml_dtypes || p == Profile::torch)) continue;
        if (rq.to == Format::e8m0) {
            for (Rounding rd : {Rounding::toward_zero, Rounding::toward_positive}) {
                const auto pr = emu::profile_policy(p, rq.to, cast_from, rd);
                if (pr.ok && holds(pr.policy))
                    r.consistent_profiles.push_back(std::string(name(p)) + " (e8m0 " + std::string(name(rd)) + ")");
            }
        } else {
            const auto pr = emu::profile_policy(p, rq.to, cast_from);
            if (pr.ok && holds(pr.policy)) r.consistent_profiles.push_back(std::string(name(p)));
        }
    }
    return r;
}

template <class W, class C, class F, bool Scaled>
std::optional<ValidateReport> run(const ValidateRequest& rq, const ValidateOptions& opt, const ValidateSplit& split,
                                  const std::vector<float>& raw, const std::vector<float>& mult) {
    using E = Engine<W, C, F, Scaled>;
    const CodeTable table = code_table<F>();
    const std::vector<float> f16_values = f16_table<W>();
    const E eng{rq.input, rq.codes, rq.policy, {rq.scaling.mode, raw.data(), mult.data()}, &table, f16_values.data()};
    const BlockLayout layout = rq.scaling.mode == ScaleMode::none ? BlockLayout::tensor : rq.scaling.layout;
    const std::size_t cols = layout == BlockLayout::tensor ? 1 : rq.scaling.cols;
    const std::size_t n = rq.n;
    const std::size_t blocks = (n + kBlock - 1) / kBlock;
    // This part's blocks (all of them in one process).
    const auto parts = static_cast<std::size_t>(split.parts), part = static_cast<std::size_t>(split.part);
    const std::size_t first_block = blocks * part / parts, last_block = blocks * (part + 1) / parts;
    const std::size_t k = opt.examples;
    const std::uint8_t* const codes = rq.codes;
    const bool tables = n >= kTableMinElements;
    const FastRound<C, F> reference(rq.policy, tables);

    // Visits elements lo..hi-1 with (index, input bits, scaled bits, scale block). The scale
    // block is only tracked when it changes along the array.
    const bool per_block = E::scaled && layout != BlockLayout::tensor;
    auto visit = [&](std::size_t lo, std::size_t hi, auto&& fn) {
        if (!per_block) {
            for (std::size_t i = lo; i < hi; ++i) {
                const u64 x = eng.load(i);
                fn(i, x, eng.scaled_bits(x, 0), std::size_t{0});
            }
        } else {
            BlockCursor cur(layout, cols, lo);
            for (std::size_t i = lo; i < hi; ++i, cur.next()) {
                const std::size_t sb = cur.index();
                const u64 x = eng.load(i);
                fn(i, x, eng.scaled_bits(x, sb), sb);
            }
        }
    };
    auto value_at = [&](std::size_t i) {
        BlockCursor cur(layout, cols, i);
        return eng.scaled_bits(eng.load(i), per_block ? cur.index() : 0);
    };

    // Policy search, fused into the one pass over the data. Candidates (5 deterministic roundings
    // x 3 overflow x 4 NaN encodings) are first pruned on an evenly spaced sample; the survivors
    // are then confirmed on every element, grouped by rounding: policies with the same rounding
    // give the same code on every element whose value is neither NaN, Inf nor past the largest
    // finite code ("special"), so each group costs one table lookup per ordinary element (none
    // for the reference's own rounding, whose codes are the reference codes), and only special
    // elements are checked policy by policy.
    std::vector<Policy> survivors;
    if (opt.detect_policies) {
        std::vector<std::size_t> probe;
        const std::size_t stride = std::max<std::size_t>(1, n / kSampleTarget);
        for (std::size_t i = 0; i < n; i += stride) probe.push_back(i);
        std::vector<u64> probe_v(probe.size());
        for (std::size_t j = 0; j < probe.size(); ++j) probe_v[j] = value_at(probe[j]);
        for (int ps = 0; ps < kValidatePolicyCount; ++ps) {
            const Policy p = validate_policy(ps);
            bool ok = true;
            for (std::size_t j = 0; j < probe.size() && ok; ++j) ok = E::round(probe_v[j], p) == codes[probe[j]];
            if (ok) survivors.push_back(p);
        }
    }
    const std::size_t ns = survivors.size();
    std::vector<Rounding> group_roundings{rq.policy.rounding};
    std::vector<FastRound<C, F>> group_round;
    group_round.emplace_back(rq.policy, false);  // group 0 compares the reference codes instead
    std::vector<std::size_t> group_of(ns);
    for (std::size_t s = 0; s < ns; ++s) {
        auto it = std::find(group_roundings.begin(), group_roundings.end(), survivors[s].rounding);
        if (it == group_roundings.end()) {
            group_roundings.push_back(survivors[s].rounding);
            group_round.emplace_back(Policy{survivors[s].rounding, rq.policy.overflow, rq.policy.nan}, tables);
            it = group_roundings.end() - 1;
        }
        group_of[s] = static_cast<std::size_t>(it - group_roundings.begin());
    }
    const std::size_t ng = group_roundings.size();
    std::vector<char> group_used(ng, 0);
    for (std::size_t s = 0; s < ns; ++s) group_used[group_of[s]] = 1;
    const u64 threshold = eng.special_threshold();

    const int threads = omp_get_max_threads();
    std::vector<ThreadResult> per_thread(static_cast<std::size_t>(threads));
    struct Alive {
        std::vector<char> survivor, group;
    };
    std::vector<Alive> alive_per_thread(static_cast<std::size_t>(threads), Alive{std::vector<char>(ns, 1), group_used});

    // With tables, one 16-bit entry per index holds the reference code (low byte), bit g of the
    // high byte for each group g >= 1 whose code differs from it there, and kSpecial when the
    // index's values are special (exact: the largest finite FP8 value has at most 3 mantissa
    // bits, so the threshold falls on an index boundary). An ordinary matching element then
    // costs one lookup, and groups die by OR-ing the difference bits.
    constexpr std::uint16_t kSpecial = 0x8000;
    std::vector<std::uint16_t> fused;
    if constexpr (FastRound<C, F>::tabulable) {
        if (tables) {
            fused.resize(FastRound<C, F>::size());
            for (std::size_t idx = 0; idx < fused.size(); ++idx) {
                const u64 rep = FastRound<C, F>::representative(idx);
                const std::uint8_t e = reference.table[idx];
                std::uint16_t entry = e;
                if (E::special(rep, threshold)) entry |= kSpecial;
                for (std::size_t g = 1; g < ng; ++g)
                    if (group_round[g].table[idx] != e) entry |= static_cast<std::uint16_t>(1u << (8 + g));
                fused[idx] = entry;
            }
        }
    }

    std::atomic<std::uint64_t> blocks_done{0};  // for opt.progress, called by thread 0 (this thread)
#pragma omp parallel num_threads(threads)
    {
        const auto me = static_cast<std::size_t>(omp_get_thread_num());
        ThreadResult& mine = per_thread[me];
        Alive& alive = alive_per_thread[me];
        const bool search = ns > 0;
        bool group[8] = {};  // at most 5 roundings; per block copies of alive.group
        auto on_mismatch = [&](std::size_t i, u64 x, u64 v, std::size_t sb, std::uint8_t e) __attribute__((noinline)) {
            const unsigned m = eng.explain(x, v, sb, e, codes[i]);
            ++mine.counts[m];
            if (mine.examples[m].size() < k) mine.examples[m].push_back(i);
        };
        // Policy bookkeeping for one element whose value is special, or whose code mismatches.
        auto check_policies = [&](u64 v, std::uint8_t e, std::uint8_t a) __attribute__((noinline)) {
            if (E::special(v, threshold)) {
                for (std::size_t s = 0; s < ns; ++s)
                    if (alive.survivor[s] && E::round(v, survivors[s]) != a) alive.survivor[s] = 0;
                return;
            }
            if (e != a) group[0] = false;
            for (std::size_t g = 1; g < ng; ++g)
                if (group[g] && group_round[g](v) != a) group[g] = false;
        };
#pragma omp for schedule(static)
        for (auto b = static_cast<std::ptrdiff_t>(first_block); b < static_cast<std::ptrdiff_t>(last_block); ++b) {
            const std::size_t lo = static_cast<std::size_t>(b) * kBlock, hi = std::min(n, lo + kBlock);
            for (std::size_t g = 0; g < ng; ++g) group[g] = alive.group[g] != 0;
            if (!fused.empty()) {
                unsigned differs = 0;  // groups whose code differed from a matching reference code
                visit(lo, hi, [&](std::size_t i, u64 x, u64 v, std::size_t sb) {
                    const std::uint16_t entry = fused[FastRound<C, F>::index(v)];
                    const auto e = static_cast<std::uint8_t>(entry);
                    const std::uint8_t a = codes[i];
                    if (__builtin_expect(e != a || (entry & kSpecial), 0)) {
                        if (search) check_policies(v, e, a);
                        if (e != a) on_mismatch(i, x, v, sb, e);
                    } else {
                        differs |= entry;
                    }
                });
                for (std::size_t g = 1; g < ng; ++g)
                    if (differs & (1u << (8 + g))) group[g] = false;
            } else {
                visit(lo, hi, [&](std::size_t i, u64 x, u64 v, std::size_t sb) {
                    const std::uint8_t e = reference(v);
                    const std::uint8_t a = codes[i];
                    if (search) check_policies(v, e, a);
                    if (__builtin_expect(e != a, 0)) on_mismatch(i, x, v, sb, e);
                });
            }
            for (std::size_t g = 0; g < ng; ++g) alive.group[g] = group[g];
            const std::uint64_t done = blocks_done.fetch_add(1, std::memory_order_relaxed) + 1;
            if (me == 0 && opt.progress) opt.progress(done, last_block - first_block);
        }
    }

    // Merge (integer sums, lowest-index sets and logical ANDs: independent of the thread count).
    ThreadResult all;
    for (auto& t : per_thread) {
        for (int m = 0; m < kMaskCount; ++m) {
            all.counts[m] += t.counts[m];
            all.examples[m].insert(all.examples[m].end(), t.examples[m].begin(), t.examples[m].end());
        }
    }
    for (auto& v : all.examples) keep_lowest(v, k);
    std::vector<char> ok(ns, 1);  // the survivors that hold on every element compared here
    for (std::size_t s = 0; s < ns; ++s)
        for (auto& t : alive_per_thread) ok[s] = ok[s] && t.survivor[s] && t.group[group_of[s]];
    // Split over parts: part 0 merges every part's scan in part order (exact in any order).
    if (split.parts > 1) {
        auto scans = split.gather(encode_scan(all, ok));
        if (split.part != 0) return std::nullopt;
        if (scans.size() != parts) throw std::runtime_error("validate: a part's scan is missing");
        for (std::size_t p = 1; p < parts; ++p) merge_scan(scans[p], all, ok);
        for (auto& v : all.examples) keep_lowest(v, k);
    }

    std::vector<Policy> consistent;
    for (std::size_t s = 0; s < ns; ++s)
        if (ok[s]) consistent.push_back(survivors[s]);
    return assemble(rq, opt, eng, table, raw, all, consistent, [&](std::uint64_t i) {
        return std::pair<u64, std::uint8_t>{eng.load(i), codes[i]};
    });
}

// validate_mismatches(): each mismatch of the scan classified by the same Engine::explain, the
// masks counted and the lowest examples kept as run() does, then the same assembly.
template <class W, class C, class F, bool Scaled>
ValidateReport run_mismatches(const ValidateRequest& rq, const MismatchScan& scan, const ValidateOptions& opt,
                              const std::vector<float>& raw, const std::vector<float>& mult) {
    using E = Engine<W, C, F, Scaled>;
    const CodeTable table = code_table<F>();
    const std::vector<float> f16_values = f16_table<W>();
    const E eng{nullptr, nullptr, rq.policy, {rq.scaling.mode, raw.data(), mult.data()}, &table, f16_values.data()};
    const BlockLayout layout = rq.scaling.mode == ScaleMode::none ? BlockLayout::tensor : rq.scaling.layout;
    const std::size_t cols = layout == BlockLayout::tensor ? 1 : rq.scaling.cols;
    const bool per_block = E::scaled && layout != BlockLayout::tensor;
    ThreadResult all;
    for (std::size_t j = 0; j < scan.indices.size(); ++j) {
        const std::uint64_t i = scan.indices[j];
        const u64 x = scan.input_bits[j];
        const std::uint8_t a = scan.codes[j];
        const std::size_t sb = per_block ? numerics::block_of(layout, i, cols) : 0;
        const u64 v = eng.scaled_bits(x, sb);
        const std::uint8_t e = E::round(v, rq.policy);
        if (e == a)
            throw std::invalid_argument("validate: the scan lists element " + std::to_string(i) +
                                        ", whose code equals the reference code");
        const unsigned m = eng.explain(x, v, sb, e, a);
        ++all.counts[m];
        if (all.examples[m].size() < opt.examples) all.examples[m].push_back(i);  // ascending: the lowest
    }
    std::vector<Policy> consistent;
    for (int s = 0; s < kValidatePolicyCount; ++s)
        if ((scan.policies >> s) & 1u) consistent.push_back(validate_policy(s));
    return assemble(rq, opt, eng, table, raw, all, consistent, [&](std::uint64_t i) {
        const std::size_t j = static_cast<std::size_t>(std::lower_bound(scan.indices.begin(), scan.indices.end(), i) -
                                                       scan.indices.begin());
        return std::pair<u64, std::uint8_t>{scan.input_bits[j], scan.codes[j]};
    });
}

// The request's checks shared by both entry points; the scales S (raw) and what multiplies the
// elements (mult: numerics::scale_multiplier), one per block (one for tensor scaling).
void check_request(const ValidateRequest& rq, std::vector<float>& raw, std::vector<float>& mult) {
    if (rq.policy.rounding == Rounding::stochastic)
        throw std::invalid_argument("validate: stochastic rounding has no single reference code per element");
    const Scaling& sc = rq.scaling;
    if (sc.mode == ScaleMode::none) return;
    if (sc.layout == BlockLayout::tensor) {
        raw = {sc.value};
    } else {
        if (sc.cols == 0 || sc.rows * sc.cols != rq.n)
            throw std::invalid_argument("validate: block scales need rows x cols equal to the element count");
        const std::size_t want = block_scale_count(sc.layout, sc.rows, sc.cols);
        if (sc.blocks == nullptr || sc.block_count != want)
            throw std::invalid_argument("validate: " + std::string(name(sc.layout)) + " blocks of a " +
                                        std::to_string(sc.rows) + " x " + std::to_string(sc.cols) + " input need " +
                                        std::to_string(want) + " scales, got " + std::to_string(sc.block_count));
        raw.assign(sc.blocks, sc.blocks + sc.block_count);
    }
    for (float s : raw) mult.push_back(numerics::scale_multiplier(sc.mode, s));
}

// The engine's types as one value for with_engine_types' callable.
template <class W_, class C_, class F_, bool Scaled_>
struct EngineTypes {
    using W = W_;
    using C = C_;
    using F = F_;
    static constexpr bool scaled = Scaled_;
};

// The request checked (check_request), then fn(EngineTypes<W, C, F, Scaled>{}, raw, mult) for its
// input type, rounding type and format: both entry points' way into the engine.
template <class Fn>
decltype(auto) with_engine_types(const ValidateRequest& rq, Fn&& fn) {
    std::vector<float> raw, mult;
    check_request(rq, raw, mult);
    return emu::with_wide(rq.from, [&](auto w) {
        using W = decltype(w);
        return emu::with_format(rq.to, [&](auto f) {
            using F = decltype(f);
            if (rq.scaling.mode == ScaleMode::none) return fn(EngineTypes<W, W, F, false>{}, raw, mult);
            if constexpr (std::is_same_v<W, emu::Binary64>)
                return fn(EngineTypes<W, emu::Binary64, F, true>{}, raw, mult);
            else
                return fn(EngineTypes<W, emu::Binary32, F, true>{}, raw, mult);
        });
    });
}

}  // namespace

ValidateReport validate(const ValidateRequest& rq, const ValidateOptions& opt) {
    return *validate(rq, opt, ValidateSplit{});
}

std::optional<ValidateReport> validate(const ValidateRequest& rq, const ValidateOptions& opt,
                                       const ValidateSplit& split) {
    if (split.parts < 1 || split.part < 0 || split.part >= split.parts || (split.parts > 1 && !split.gather))
        throw std::invalid_argument("validate: a split needs 0 <= part < parts and a gather");
    if (rq.n > 0 && (rq.input == nullptr || rq.codes == nullptr))
        throw std::invalid_argument("validate: input or codes is null");
    return with_engine_types(rq, [&](auto t, const auto& raw, const auto& mult) {
        using T = decltype(t);
        return run<typename T::W, typename T::C, typename T::F, T::scaled>(rq, opt, split, raw, mult);
    });
}

ValidateReport validate_mismatches(const ValidateRequest& rq, const MismatchScan& scan, const ValidateOptions& opt) {
    if (scan.n != rq.n)
        throw std::invalid_argument("validate: a scan of " + std::to_string(scan.n) + " elements for a request of " +
                                    std::to_string(rq.n));
    const std::size_t m = scan.indices.size();
    if (scan.input_bits.size() != m || scan.codes.size() != m)
        throw std::invalid_argument("validate: the scan's indices, input bits and codes differ in length");
    for (std::size_t j = 0; j < m; ++j)
        if (scan.indices[j] >= scan.n || (j > 0 && scan.indices[j] <= scan.indices[j - 1]))
            throw std::invalid_argument("validate: the scan's indices are not ascending below n");
    return with_engine_types(rq, [&](auto t, const auto& raw, const auto& mult) {
        using T = decltype(t);
        return run_mismatches<typename T::W, typename T::C, typename T::F, T::scaled>(rq, scan, opt, raw, mult);
    });
}

}  // namespace fp8kit
