// The sweep's fast path (one histogram per dumped tensor) against brute force: for every
// recipe of the grid, the scale it used at the dumped step, then compute_stats on the data.
#include <catch2/catch.hpp>

#include <array>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>

#include <fmt/format.h>

#include "fp8kit/analysis/sweep.hpp"

using namespace fp8kit;

namespace {

bool pow2(float s) {
    std::uint32_t u;
    std::memcpy(&u, &s, 4);
    return (u & 0x7FFFFFu) == 0 && (u >> 23) != 0;
}

struct Synthetic {
    trace::Series series;
    std::vector<float> data;  // the tensor dumped at `dump_step`
    std::int64_t dump_step;
};

// A random amax walk with spikes; the dumped tensor's amax is the trace's at that step.
Synthetic make(const std::string& name, double base, std::uint64_t seed) {
    std::mt19937_64 g(seed);
    std::normal_distribution<double> n01(0.0, 1.0);
    Synthetic s;
    s.series.tensor = name;
    s.series.role = recipe_slot(guess_role(name));
    const int steps = 60;
    s.dump_step = 45;
    for (int t = 0; t < steps; ++t) {
        double a = base * std::exp(0.3 * n01(g));
        if (g() % 10 == 0) a *= 6;  // spikes
        s.series.steps.push_back(t);
        s.series.amax.push_back(static_cast<float>(a));
        s.series.lines.push_back(0);
    }
    for (int i = 0; i < 40000; ++i) s.data.push_back(static_cast<float>(base * 0.25 * n01(g) * std::exp(n01(g))));
    float m = 0;
    for (float x : s.data) m = std::max(m, std::fabs(x));
    s.series.amax[s.dump_step] = m;
    return s;
}

}  // namespace

TEST_CASE("sweep: histogram evaluation equals compute_stats per recipe", "[replay][sweep]") {
    std::vector<Synthetic> syn = {make("l0.fc1.input", 3.0, 1), make("l0.fc1.grad_output", 2e-5, 2),
                                  make("l0.fc1.weight", 0.08, 3)};
    std::vector<trace::Series> series;
    for (const auto& s : syn) series.push_back(s.series);
    auto cands = sweep::default_candidates({std::nullopt, Format::e4m3, Format::e5m2});
    sweep::Sweep sw(cands, series);
    std::vector<sweep::Dumped> dumped;
    for (std::size_t i = 0; i < syn.size(); ++i) {
        auto h = std::make_shared<MagnitudeHistogram>();
        h->add(syn[i].data.data(), Wide::f32, syn[i].data.size());
        h->finish();
        dumped.push_back(sweep::Dumped{i, syn[i].dump_step, h, h->te_amax(), {}});
    }
    std::vector<std::string> notes;
    sw.run(dumped, notes);
    REQUIRE(notes.empty());
    std::size_t exact_checked = 0, bounded_checked = 0;
    std::vector<std::vector<sweep::Outcome>> per_tensor;  // [series][candidate], recomputed on demand
    for (std::size_t i = 0; i < syn.size(); ++i) per_tensor.push_back(sw.tensor_outcomes(i));
    for (std::size_t c = 0; c < cands.size(); ++c)
        for (std::size_t i = 0; i < syn.size(); ++i) {
            const auto& cand = cands[c];
            const auto r = replay::replay_series(cand.recipe, syn[i].series, cand.forced);
            const float scale = r.scale[static_cast<std::size_t>(syn[i].dump_step)];
            const auto ref = compute_stats(syn[i].data.data(), Wide::f32, syn[i].data.size(),
                                           QuantConfig{r.format, scale, cand.recipe.policy, 1.0f / scale, 0});
            const auto& o = per_tensor[i][c];
            INFO(cand.label << " on " << syn[i].series.tensor << " scale " << scale);
            REQUIRE(o.dumped == 1);
            REQUIRE(o.steps == r.steps.size());
            REQUIRE(o.overflow_steps == r.overflow_steps);
            REQUIRE(o.nonzero == ref.finite() - ref.zeros);
            const double db = ref.sqnr_db();
            if (pow2(scale)) {
                ++exact_checked;
                REQUIRE(o.ambiguous == 0);
                REQUIRE(o.underflow == ref.underflow);
                REQUIRE(o.subnormal == ref.subnormal);
                REQUIRE(o.overflow_elems == ref.overflow);
                // Same error sum up to binary64 summation order (both sides add 40000 terms).
                REQUIRE(o.mean_sqnr_db() == Approx(db).margin(1e-9));
            } else {
                ++bounded_checked;
                const auto diff = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : b - a; };
                REQUIRE(diff(o.underflow, ref.underflow) <= o.underflow_uncertain);
                REQUIRE(diff(o.subnormal, ref.subnormal) <= o.subnormal_uncertain);
                // The bounds come from exact per-element extremes; 1e-9 dB covers summation order.
                REQUIRE(db >= o.mean_sqnr_db_lo() - 1e-9);
                REQUIRE(db <= o.mean_sqnr_db_hi() + 1e-9);
            }
        }
    // Both paths were exercised (te-current/msamp/torchao... give powers of two or not).
    CHECK(exact_checked > 0);
    CHECK(bounded_checked > 0);
}

TEST_CASE("sweep: grid, margins and recommendation on a hand-made series", "[replay][sweep]") {
    // One activation: amax 1 every step but a spike of 1.5 at step 5. history 1: the spike step
    // overflows at margin 0 (1.5 * 448 = 672 > 464) and not at margin 1 (336).
    trace::Series s;
    s.tensor = "blk.input";
    s.role = Role::activation;
    for (int t = 0; t < 20; ++t) {
        s.steps.push_back(t);
        s.amax.push_back(t == 5 ? 1.5f : 1.0f);
    }
    sweep::Sweep sw(sweep::default_candidates({std::nullopt}), {s});
    std::vector<std::string> notes;
    sw.run({}, notes);
    const auto h1m0 = sw.find(1, AmaxAlgo::max, 0, std::nullopt);
    const auto h1m1 = sw.find(1, AmaxAlgo::max, 1, std::nullopt);
    REQUIRE(sw.tensor_outcomes(0)[h1m0].overflow_steps == 1);
    REQUIRE(sw.tensor_outcomes(0)[h1m1].overflow_steps == 0);
    REQUIRE(sw.per_class(h1m0, Role::activation).overflow_steps == 1);  // the class total is the one series
    REQUIRE(sw.min_safe_margin(h1m0, 0, Role::activation) == 1);
    // Every max-history recipe sees the spike first at step 5 with the scale of amax 1.
    REQUIRE(sw.min_safe_margin(sw.find(1024, AmaxAlgo::max, 0, std::nullopt), -1, Role::activation) == 1);
    // Ranked: no overflow first; then the most headroom used: margin 1 with the shortest
    // history (it forgets the spike soonest) beats longer ones.
    const auto best = sw.ranked(Role::activation).front();
    REQUIRE(sw.candidates()[best].recipe.margin == 1);
    REQUIRE(sw.per_class(best, Role::activation).overflow_steps == 0);
    const auto text = sw.recommendation(Role::activation);
    REQUIRE(text.rfind("activations: ", 0) == 0);
    REQUIRE(text.find("no overflow") != std::string::npos);
    REQUIRE(sw.recommendation(Role::gradient) == "gradients: no tensors of this class");
}

TEST_CASE("sweep: dump names map onto trace names", "[replay][sweep]") {
    REQUIRE(sweep::series_name_of_dump("step_000100/model.layers.0.mlp.up_proj/input") ==
            "model.layers.0.mlp.up_proj.input");
    REQUIRE(sweep::series_name_of_dump("lm_head/weight_fp8") == "lm_head.weight_fp8");
}

namespace {

// Bitwise equality for doubles that may be NaN or infinite.
bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

// Series of 1 to 40 steps, amax from 2^-20 to 2^20 with zeros, NaN and Inf mixed in, so that
// delayed histories both shorter and longer than a series are replayed.
std::vector<trace::Series> ragged_series() {
    std::mt19937_64 g(7);
    std::vector<trace::Series> out;
    const char* names[] = {"a.input", "b.weight", "c.grad_output"};
    for (int n : {1, 2, 3, 7, 10, 15, 16, 17, 33, 40}) {
        for (int k = 0; k < 3; ++k) {
            trace::Series s;
            s.tensor = fmt::format("l{}.{}", n, names[k]);
            s.role = recipe_slot(guess_role(s.tensor));
            for (int t = 0; t < n; ++t) {
                const auto u = g() % 100;
                const float a = u < 4    ? 0.0f
                                : u < 6  ? NAN
                                : u == 6 ? INFINITY
                                         : std::ldexp(1.0f + static_cast<float>(g() % 1000) / 1000.0f,
                                                      static_cast<int>(g() % 41) - 20);
                s.steps.push_back(3 * t);
                s.amax.push_back(a);
                s.lines.push_back(0);
            }
            out.push_back(std::move(s));
        }
    }
    return out;
}

void require_same_trace_outcome(const sweep::Outcome& a, const sweep::Outcome& b) {
    REQUIRE(a.tensors == b.tensors);
    REQUIRE(a.steps == b.steps);
    REQUIRE(a.overflow_steps == b.overflow_steps);
    REQUIRE(a.first_step_overflows == b.first_step_overflows);
    REQUIRE(same_bits(a.worst_headroom, b.worst_headroom));
    REQUIRE(a.worst_step == b.worst_step);
    REQUIRE(a.worst_tensor == b.worst_tensor);
    REQUIRE(a.min_series_steps == b.min_series_steps);
    REQUIRE(a.max_series_steps == b.max_series_steps);
    REQUIRE(same_bits(a.sum_log2_headroom, b.sum_log2_headroom));
    REQUIRE(a.headroom_steps == b.headroom_steps);
}

}  // namespace

// Sweep::evaluate replays a delayed max recipe whose history covers the whole series once per
// (format, margin) and copies it to the longer histories; the text table replays only the
// candidates it reads. Both against replay_series of each candidate on its own.
TEST_CASE("sweep: per-series outcomes equal each candidate replayed alone", "[replay][sweep]") {
    const auto series = ragged_series();
    const auto cands = sweep::default_candidates({std::nullopt, Format::e4m3, Format::e5m2});
    sweep::Sweep sw(cands, series);
    std::vector<std::string> notes;
    sw.run({}, notes);
    std::mt19937_64 g(11);
    std::array<std::vector<sweep::Outcome>, 3> cls(std::array<std::vector<sweep::Outcome>, 3>{});
    for (auto& v : cls) v.assign(cands.size(), sweep::Outcome{});
    for (std::size_t s = 0; s < series.size(); ++s) {
        const auto all = sw.tensor_outcomes(s);
        std::vector<bool> wanted(cands.size());
        for (std::size_t c = 0; c < cands.size(); ++c) wanted[c] = g() % 3 == 0;
        const auto some = sw.tensor_outcomes(s, wanted);
        for (std::size_t c = 0; c < cands.size(); ++c) {
            INFO(cands[c].label << " on " << series[s].tensor << " (" << series[s].amax.size() << " steps)");
            sweep::Outcome ref;
            ref.add_trace(replay::replay_series(cands[c].recipe, series[s], cands[c].forced));
            require_same_trace_outcome(all[c], ref);
            if (wanted[c])
                require_same_trace_outcome(some[c], ref);
            else
                REQUIRE(some[c].tensors == 0);
            const std::size_t k = series[s].role == Role::weight ? 1 : series[s].role == Role::gradient ? 2 : 0;
            cls[k][c].merge(ref);
        }
    }
    for (std::size_t c = 0; c < cands.size(); ++c)
        for (std::size_t k = 0; k < 3; ++k) {
            const Role r = k == 0 ? Role::activation : k == 1 ? Role::weight : Role::gradient;
            INFO(cands[c].label << " class " << k);
            require_same_trace_outcome(sw.per_class(c, r), cls[k][c]);
        }
}

// replay::overflows decides by a magnitude limit per format and sign, found once by bisection;
// the definition encodes the float32 product. Both on every format: a stride over all float32
// magnitudes, the bit patterns around each format's largest finite value and the rounding
// midpoint above it (2^k patterns above it for every k, +-3), and random (amax, scale) pairs.
TEST_CASE("replay::overflows: the magnitude limit decides as emu::encode does", "[replay]") {
    std::mt19937_64 g(5);
    for (const Format f : emu::kAllFormats) {
        INFO(name(f));
        auto check = [&](std::uint32_t bits) {
            float v;
            std::memcpy(&v, &bits, sizeof v);
            REQUIRE(replay::overflows(v, 1.0f, f) == replay::overflows_by_encode(v, 1.0f, f));
        };
        for (const std::uint32_t sign : {0u, 0x80000000u}) {
            for (std::uint32_t b = 0; b < 0x7F800000u; b += 40009u) check(sign | b);
            check(sign | 0x7F7FFFFFu);
            const float m = fp8_max(f);
            std::uint32_t mb;
            std::memcpy(&mb, &m, sizeof mb);
            for (int k = 0; k < 24; ++k)
                for (int d = -3; d <= 3; ++d)
                    check(sign | static_cast<std::uint32_t>(static_cast<std::int64_t>(mb) + (1 << k) + d));
        }
        for (int i = 0; i < 20000; ++i) {
            const float a = std::ldexp(static_cast<float>(g() % 100000) / 50000.0f, static_cast<int>(g() % 60) - 30);
            const float s = std::ldexp(static_cast<float>(g() % 100000) / 50000.0f, static_cast<int>(g() % 60) - 30);
            REQUIRE(replay::overflows(a, s, f) == replay::overflows_by_encode(a, s, f));
        }
    }
}
