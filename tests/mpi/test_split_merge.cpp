// The pieces of sweep and validate that travel between ranks, without MPI: a MagnitudeHistogram
// saved and loaded evaluates bit for bit as the original; a DumpedPass record round-trips; and
// validate split into P parts (the parts run one after another here, part 0 last, gathering the
// others' bytes) writes the report of one call, for P = 1..5, with mismatches in some parts only;
// threads per rank default to the cores divided by the ranks on the node.
// The mpirun runs are tests/mpi/sweep_validate_ranks.sh.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fp8kit/cluster.hpp"
#include "fp8kit/convert/quantize.hpp"
#include "fp8kit/parallel.hpp"
#include "fp8kit/stats/magnitude_histogram.hpp"
#include "fp8kit/validate.hpp"

using namespace fp8kit;

namespace {

std::vector<float> activations(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> g(0.0f, 1.0f);
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i)
        v[i] = g(rng) * std::exp2(static_cast<float>(static_cast<int>(i / 997 % 20) - 10));
    return v;
}

bool same_bits(const MagnitudeHistogram::Result& a, const MagnitudeHistogram::Result& b) {
    return std::memcmp(&a, &b, sizeof a) == 0;  // all 8-byte fields: no padding
}

}  // namespace

TEST_CASE("MagnitudeHistogram save/load evaluates bit for bit", "[mpi]") {
    auto x = activations(50000, 7);
    x[3] = 0.0f, x[4] = INFINITY, x[5] = NAN, x[6] = -0.0f;
    MagnitudeHistogram h;
    h.add(x.data(), Wide::f32, x.size());
    h.finish();
    std::string bytes;
    h.save(bytes);
    std::size_t pos = 0;
    const MagnitudeHistogram back = MagnitudeHistogram::load(bytes, pos);
    REQUIRE(pos == bytes.size());
    REQUIRE(back.numel() == h.numel());
    REQUIRE(back.te_amax() == h.te_amax());
    std::string again;
    back.save(again);
    REQUIRE(again == bytes);
    const Policy p{Rounding::nearest_even, Overflow::saturate_finite, NanEncoding::canonical};
    for (float scale : {1.0f, 0.37f, 448.0f / 3.0f, 1e-3f})
        for (Format f : {Format::e4m3, Format::e5m2})
            REQUIRE(same_bits(back.evaluate(f, scale, 1.0f / scale, p), h.evaluate(f, scale, 1.0f / scale, p)));
    // Truncated bytes are an error, never a short histogram.
    std::size_t p2 = 0;
    REQUIRE_THROWS(MagnitudeHistogram::load(bytes.substr(0, bytes.size() - 3), p2));
    MagnitudeHistogram unfinished;
    std::string none;
    REQUIRE_THROWS(unfinished.save(none));
}

TEST_CASE("DumpedPass records round-trip", "[mpi]") {
    sweep::DumpedPass p;
    p.kind = sweep::DumpedPass::Kind::read;
    p.series = "layers.0.mlp.output";
    p.role = Role::gradient;
    p.notes = {"first note", "second"};
    auto x = activations(4000, 9);
    auto h = std::make_shared<MagnitudeHistogram>();
    h->add(x.data(), Wide::f32, x.size());
    h->finish();
    p.d.hist = h;
    p.d.step = -42;
    p.d.amax = h->te_amax();
    p.d.block.resize(4);  // preset 0 holds statistics, 3 is a preset left out of this tensor (absent)
    p.d.block[0].emplace();
    p.d.block[1].emplace().nan = 5;
    p.d.block[2].emplace().sum_x2 = 0.1;
    p.rht_skip = "f.h5: x: nvfp4: rows not in 16s";
    const std::string rec = cluster::encode_pass(17, p) + cluster::encode_pass(18, sweep::DumpedPass{});
    std::size_t pos = 0;
    sweep::DumpedPass q, r;
    REQUIRE(cluster::decode_pass(rec, pos, q) == 17);
    REQUIRE(cluster::decode_pass(rec, pos, r) == 18);
    REQUIRE(pos == rec.size());
    REQUIRE(q.kind == p.kind);
    REQUIRE(q.series == p.series);
    REQUIRE(q.role == p.role);
    REQUIRE(q.notes == p.notes);
    REQUIRE(q.rht_skip == p.rht_skip);
    REQUIRE(q.d.step == -42);
    REQUIRE(q.d.amax == p.d.amax);
    REQUIRE(q.d.block.size() == 4);
    for (int k = 0; k < 3; ++k) {
        REQUIRE(q.d.block[k].has_value());
        REQUIRE(std::memcmp(&*q.d.block[k], &*p.d.block[k], sizeof(numerics::StatsScalars)) == 0);
    }
    REQUIRE_FALSE(q.d.block[3].has_value());
    std::string a, b;
    h->save(a);
    q.d.hist->save(b);
    REQUIRE(a == b);
    REQUIRE(r.kind == sweep::DumpedPass::Kind::left_out);
    // A tensor that could not be read travels as its (file, name, message), not as an exception:
    // rank 0 reports it and the sweep goes on.
    sweep::DumpedPass f;
    f.kind = sweep::DumpedPass::Kind::failed;
    f.failure = {"bad1.h5", "step_2/x", "chunk at [16, 0]: its deflate stream is corrupt"};
    f.notes = {"a note before the failure"};
    const std::string frec = cluster::encode_pass(5, f);
    std::size_t fpos = 0;
    sweep::DumpedPass g;
    REQUIRE(cluster::decode_pass(frec, fpos, g) == 5);
    REQUIRE(fpos == frec.size());
    REQUIRE(g.kind == sweep::DumpedPass::Kind::failed);
    REQUIRE(g.failure.file == f.failure.file);
    REQUIRE(g.failure.name == f.failure.name);
    REQUIRE(g.failure.message == f.failure.message);
    REQUIRE(g.notes == f.notes);
    REQUIRE_FALSE(g.d.hist);
    std::size_t short_pos = 0;
    sweep::DumpedPass s;
    REQUIRE_THROWS(cluster::decode_pass(rec.substr(0, 40), short_pos, s));
}

TEST_CASE("validate split into parts equals one call", "[mpi]") {
    const std::size_t rows = 600, cols = 700;  // 420000 elements: 7 blocks of 2^16
    const auto x = activations(rows * cols, 11);
    const Policy policy{Rounding::nearest_even, Overflow::saturate_finite, NanEncoding::canonical};
    std::vector<std::uint8_t> exact(x.size());
    encode_array(Format::e4m3, Wide::f32, x.data(), exact.data(), x.size(), policy);
    std::vector<std::uint8_t> spread = exact, last = exact;
    std::mt19937 rng(3);
    for (int k = 0; k < 300; ++k) spread[rng() % spread.size()] ^= 1;
    last[x.size() - 5] ^= 0x80;  // one mismatch, in the last part only
    for (const auto* codes : {&exact, &spread, &last}) {
        ValidateRequest rq{Wide::f32, x.data(), codes->data(), x.size(), Format::e4m3, policy, {}};
        ValidateOptions opt;
        opt.examples = 4;
        ValidateReport one = validate(rq, opt);
        one.shape = {rows, cols};
        for (int parts = 1; parts <= 5; ++parts) {
            std::vector<std::string> sent(static_cast<std::size_t>(parts));
            for (int part = parts - 1; part >= 0; --part) {  // part 0 last: the others' bytes are ready
                ValidateSplit split;
                split.part = part;
                split.parts = parts;
                split.gather = [&](std::string mine) {
                    sent[static_cast<std::size_t>(part)] = std::move(mine);
                    return part == 0 ? sent : std::vector<std::string>{};
                };
                auto r = validate(rq, opt, split);
                REQUIRE(r.has_value() == (part == 0));
                if (!r) continue;
                r->shape = {rows, cols};
                REQUIRE(r->json() == one.json());
                REQUIRE(r->summary() == one.summary());
            }
        }
    }
}

TEST_CASE("threads per rank: the cores divided by the ranks on the node (issue 22)", "[mpi]") {
    // OMP_NUM_THREADS wins over the division (docs/mpi.md): take it away for this case.
    const char* omp = std::getenv("OMP_NUM_THREADS");
    const std::string saved = omp ? omp : "";
    ::unsetenv("OMP_NUM_THREADS");
    const unsigned cores = parallel::default_threads();  // no ranks counted yet: this process's cores
    for (unsigned ranks : {1u, 2u, 3u, 64u}) {
        parallel::set_ranks_on_node(ranks);
        // A process bound to fewer cores than the machine has keeps them (the launcher shared them).
        const bool bound = cores < std::max(1u, std::thread::hardware_concurrency());
        REQUIRE(parallel::default_threads() == (bound || ranks == 1 ? cores : std::max(1u, cores / ranks)));
    }
    ::setenv("OMP_NUM_THREADS", "5", 1);
    parallel::set_ranks_on_node(2);
    REQUIRE(parallel::default_threads() == 5u);
    parallel::set_ranks_on_node(0);
    if (omp)
        ::setenv("OMP_NUM_THREADS", saved.c_str(), 1);
    else
        ::unsetenv("OMP_NUM_THREADS");
}

namespace {

std::uint64_t bits_of(double v) {
    std::uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    return b;
}

// Every field of two outcomes, binary64 values bit for bit.
void require_same(const sweep::Outcome& a, const sweep::Outcome& b) {
    REQUIRE(a.tensors == b.tensors);
    REQUIRE(a.steps == b.steps);
    REQUIRE(a.overflow_steps == b.overflow_steps);
    REQUIRE(bits_of(a.worst_headroom) == bits_of(b.worst_headroom));
    REQUIRE(a.worst_step == b.worst_step);
    REQUIRE(a.worst_tensor == b.worst_tensor);
    REQUIRE(a.first_step_overflows == b.first_step_overflows);
    REQUIRE(a.min_series_steps == b.min_series_steps);
    REQUIRE(a.max_series_steps == b.max_series_steps);
    REQUIRE(bits_of(a.sum_log2_headroom) == bits_of(b.sum_log2_headroom));
    REQUIRE(a.headroom_steps == b.headroom_steps);
}

}  // namespace

TEST_CASE("Sweep::run's groups of series made anywhere, in any order, merge to one process's totals", "[mpi]") {
    // 200 series (4 groups of 64, the last one short), three classes, spikes that overflow.
    std::mt19937 rng(19);
    std::normal_distribution<float> z(0.0f, 0.5f);
    std::vector<trace::Series> series;
    const Role roles[] = {Role::activation, Role::weight, Role::gradient};
    for (int i = 0; i < 200; ++i) {
        trace::Series s;
        s.tensor = "layers." + std::to_string(i) + ".x";
        s.role = roles[i % 3];
        for (int t = 0; t < 30 + i % 7; ++t) {
            s.steps.push_back(t);
            s.amax.push_back(std::exp(z(rng)) * (rng() % 50 == 0 ? 40.0f : 1.0f) * (i % 3 == 2 ? 1e-3f : 4.0f));
            s.lines.push_back(0);
        }
        series.push_back(std::move(s));
    }
    const auto cands = sweep::default_candidates({std::nullopt});
    sweep::Sweep one(cands, series), split(cands, series);
    std::vector<std::string> notes_one, notes_split;
    one.run({}, notes_one);
    std::size_t groups_seen = 0;
    split.run({}, notes_split,
              [&](std::size_t groups, const std::vector<std::uint64_t>& weight, const auto& make, const auto& use) {
                  REQUIRE(groups == (series.size() + sweep::Sweep::kSeriesGroup - 1) / sweep::Sweep::kSeriesGroup);
                  REQUIRE(weight.size() == groups);
                  std::vector<std::string> made(groups);
                  for (std::size_t g = groups; g-- > 0;) made[g] = make(g);  // as other ranks would, out of order
                  for (std::size_t g = 0; g < groups; ++g) use(g, made[g]);
                  groups_seen = groups;
              });
    REQUIRE(groups_seen == 4);
    REQUIRE(notes_one == notes_split);
    for (std::size_t c = 0; c < cands.size(); ++c)
        for (Role cls : roles) require_same(one.per_class(c, cls), split.per_class(c, cls));
    for (Role cls : roles) REQUIRE(one.ranked(cls) == split.ranked(cls));
    // A malformed group is an error, never wrong totals.
    sweep::Sweep bad(cands, series);
    std::vector<std::string> n;
    REQUIRE_THROWS(bad.run({}, n, [](std::size_t groups, const auto&, const auto& make, const auto& use) {
        for (std::size_t g = 0; g < groups; ++g) use(g, make(g).substr(1));
    }));
}
