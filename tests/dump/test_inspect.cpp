// inspect::analyse against the statistics library called directly on the same arrays, read here
// through a plain whole-dataset H5Dread (not through the readers).
#include <cmath>

#include "dump_test_util.hpp"
#include "fp8kit/emu/emu.hpp"
#include "fp8kit/analysis/inspect.hpp"

using namespace fp8kit;
using namespace fp8kit::dump::test;
namespace dp = fp8kit::dump;

namespace {

const std::string kInspectDump = std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_dump.h5";

// The dataset as the readers must deliver it, built independently: raw stored bytes, FP8 codes
// decoded with emu::decode.
std::vector<unsigned char> raw_delivered(const dp::TensorInfo& t) {
    const hid_t f = H5Fopen(kInspectDump.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    const hid_t d = H5Dopen2(f, t.name.c_str(), H5P_DEFAULT);
    REQUIRE(d >= 0);
    const hid_t type = H5Dget_type(d);
    const std::size_t size = H5Tget_size(type);
    std::vector<unsigned char> raw(t.numel * size);
    REQUIRE(H5Dread(d, type, H5S_ALL, H5S_ALL, H5P_DEFAULT, raw.data()) >= 0);
    H5Tclose(type);
    H5Dclose(d);
    H5Fclose(f);
    const auto fmt = dp::fp8_format(t.dtype);
    if (!fmt) return raw;
    std::vector<unsigned char> out(t.numel * 4);
    for (std::size_t i = 0; i < t.numel; ++i) {
        const auto b = static_cast<std::uint32_t>(emu::decode(*fmt, Wide::f32, raw[i]));
        std::memcpy(&out[i * 4], &b, 4);
    }
    return out;
}

void check_same(const QuantStats& a, const QuantStats& b, bool exact_sums) {
    CHECK(a.numel == b.numel);
    CHECK(a.zeros == b.zeros);
    CHECK(a.nan == b.nan);
    CHECK(a.inf == b.inf);
    CHECK(a.underflow == b.underflow);
    CHECK(a.subnormal == b.subnormal);
    CHECK(a.overflow == b.overflow);
    CHECK(a.te_underflow == b.te_underflow);
    CHECK(a.te_overflow == b.te_overflow);
    CHECK(f64_bits(a.amax) == f64_bits(b.amax));
    CHECK(f64_bits(a.min_nonzero) == f64_bits(b.min_nonzero));
    CHECK(a.exp_hist == b.exp_hist);
    if (exact_sums) {
        CHECK(f64_bits(a.sum_x2) == f64_bits(b.sum_x2));
        CHECK(f64_bits(a.sum_err2) == f64_bits(b.sum_err2));
    } else {
        // Streamed: the same binary64 terms added in a different grouping (per read chunk, then
        // across chunks), so only rounding of the sums may differ.
        CHECK(a.sum_x2 == Approx(b.sum_x2).epsilon(1e-12));
        CHECK(a.sum_err2 == Approx(b.sum_err2).epsilon(1e-12));
    }
}

}  // namespace

TEST_CASE("inspect: statistics equal compute_stats on the same arrays", "[dump]") {
    dp::Dump dump({kInspectDump});
    inspect::Options opts;
    opts.recipe = parse_recipe("te-current");
    const RecipeSpec& r = opts.recipe;
    std::size_t checked = 0;
    std::vector<unsigned char> reused;                            // the Python module's way: one buffer across tensors
    for (std::size_t i = 0; i < dump.tensors().size(); i += 7) {  // a spread of every kind
        const auto& t = dump.tensors()[i];
        INFO(t.name);
        const auto res = inspect::analyse(dump, i, opts);
        CHECK_FALSE(res.streamed);
        check_same(res.stats, inspect::analyse(dump, i, opts, reused).stats, true);
        // The hybrid convention: gradients E5M2, everything else E4M3.
        CHECK(res.format == (t.role == dp::Role::gradient ? Format::e5m2 : Format::e4m3));
        const auto data = raw_delivered(t);
        const float amax = amax_of(data.data(), t.wide, t.numel);
        CHECK(f32_bits(res.amax) == f32_bits(amax));
        // te-current: scale = fl32(fmax / amax), written out here for amax > 0.
        const float want_scale = fp8_max(res.format) / amax;
        CHECK(f32_bits(res.scale.scale) == f32_bits(want_scale));
        QuantConfig cfg{};
        cfg.format = res.format;
        cfg.scale = want_scale;
        cfg.scale_inv = res.scale.scale_inv;
        cfg.policy = r.policy;
        check_same(res.stats, compute_stats(data.data(), t.wide, t.numel, cfg), true);
        ++checked;
    }
    CHECK(checked == 39);
}

TEST_CASE("inspect: tensors larger than the memory budget are streamed", "[dump]") {
    dp::ReadOptions ro;
    ro.chunk_bytes = 1 << 12;
    dp::Selection sel;
    sel.include = {"step_000299/model.layers.0.mlp.*"};
    dp::Dump dump({kInspectDump}, sel, ro);
    REQUIRE(dump.tensors().size() == 18);
    inspect::Options small;
    small.recipe = parse_recipe("te-current");
    small.memory_bytes = 1 << 10;
    inspect::Options whole = small;
    whole.memory_bytes = std::size_t(1) << 28;
    for (std::size_t i = 0; i < dump.tensors().size(); ++i) {
        INFO(dump.tensors()[i].name);
        const auto s = inspect::analyse(dump, i, small);
        const auto w = inspect::analyse(dump, i, whole);
        CHECK(s.streamed);
        CHECK_FALSE(w.streamed);
        CHECK(f32_bits(s.amax) == f32_bits(w.amax));
        CHECK(f32_bits(s.scale.scale) == f32_bits(w.scale.scale));
        check_same(s.stats, w.stats, false);
    }
    // Block recipes need the tensor whole.
    small.recipe = parse_recipe("mxfp8");
    CHECK_THROWS_WITH(inspect::analyse(dump, 0, small), Catch::Contains("may hold in memory"));
}

TEST_CASE("inspect: format override, block recipes, and recipes a dump cannot replay", "[dump]") {
    dp::Selection sel;
    sel.include = {"step_000000/lm_head/*"};
    dp::Dump dump({kInspectDump}, sel);
    REQUIRE(dump.tensors().size() == 7);
    inspect::Options o;
    o.recipe = parse_recipe("te-current");
    o.format = Format::e4m3;
    for (std::size_t i = 0; i < dump.tensors().size(); ++i) CHECK(inspect::analyse(dump, i, o).format == Format::e4m3);

    // MXFP8: 1 x 32 blocks along the last dimension, statistics merged over the blocks.
    o.format.reset();
    o.recipe = parse_recipe("mxfp8");
    const auto res = inspect::analyse(dump, 0, o);
    const auto& t = dump.tensors()[0];
    REQUIRE(res.blocks);
    CHECK(res.blocks->tile_rows == 1);
    CHECK(res.blocks->tile_cols == 32);
    CHECK(res.blocks->blocks == t.numel / 32);
    CHECK(res.stats.numel == t.numel);

    o.recipe = parse_recipe("te-delayed");
    CHECK_THROWS_WITH(inspect::analyse(dump, 0, o), Catch::Contains("earlier steps"));
    CHECK(recipe_slot(dp::Role::gradient) == Role::gradient);
    CHECK(recipe_slot(dp::Role::optimizer_state) == Role::activation);
}

namespace {

void check_same_result(const inspect::Result& a, const inspect::Result& b) {
    CHECK(a.format == b.format);
    CHECK(a.role == b.role);
    CHECK(a.granularity == b.granularity);
    CHECK(a.streamed == b.streamed);
    CHECK(f32_bits(a.amax) == f32_bits(b.amax));
    CHECK(f32_bits(a.scale.scale) == f32_bits(b.scale.scale));
    CHECK(f32_bits(a.scale.scale_inv) == f32_bits(b.scale.scale_inv));
    check_same(a.stats, b.stats, true);
    CHECK(static_cast<bool>(a.blocks) == static_cast<bool>(b.blocks));
    if (a.blocks && b.blocks) CHECK(a.blocks->scale_inv == b.blocks->scale_inv);
}

// analyse_all against analyse called tensor by tensor, with the callback's order checked.
void check_all_against_one_by_one(dp::Dump& dump, const inspect::Options& opts) {
    std::vector<inspect::Result> one;
    std::vector<std::string> one_errors;
    for (std::size_t i = 0; i < dump.tensors().size(); ++i) {
        try {
            one.push_back(inspect::analyse(dump, i, opts));
            one_errors.emplace_back();
        } catch (const std::exception& e) {
            one.emplace_back();
            one_errors.emplace_back(e.what());
        }
    }
    std::size_t next = 0;
    inspect::analyse_all(dump, opts, [&](std::size_t i, const inspect::Result* r, std::exception_ptr err) {
        REQUIRE(i == next);
        ++next;
        INFO(dump.tensors()[i].name);
        CHECK((r == nullptr) == (err != nullptr));
        if (r) {
            CHECK(one_errors[i].empty());
            check_same_result(*r, one[i]);
        } else {
            try {
                std::rethrow_exception(err);
            } catch (const std::exception& e) {
                CHECK(std::string(e.what()) == one_errors[i]);
            }
        }
    });
    CHECK(next == dump.tensors().size());
}

}  // namespace

TEST_CASE("inspect: analyse_all (next tensor read ahead) equals analyse one by one", "[dump]") {
    dp::Dump dump({kInspectDump});
    inspect::Options opts;
    opts.recipe = parse_recipe("te-current");
    SECTION("every tensor of the example dump, in memory") { check_all_against_one_by_one(dump, opts); }
    SECTION("a budget where some tensors stream and some pairs do not fit together") {
        opts.memory_bytes = 40000;  // the example's tensors are 16 to 64 KiB as delivered
        check_all_against_one_by_one(dump, opts);
    }
    SECTION("a block recipe: tensors over the budget are errors, the others analysed") {
        opts.recipe = parse_recipe("mxfp8");
        opts.memory_bytes = 40000;
        check_all_against_one_by_one(dump, opts);
    }
}

TEST_CASE("inspect: analyse_all reports an unreadable tensor in its place and goes on", "[dump]") {
    const std::string path = scratch("analyse_all_bad_middle.h5");
    {
        const hid_t f = h5_create(path);
        std::vector<float> v(64);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 20.5f;
        H5Dclose(h5_write(f, "a_good", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {64}, v.data()));
        const hid_t dcpl = h5_chunked({32}, false, 1);
        const hid_t d = h5_write(f, "b_corrupt", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {64}, v.data(), dcpl);
        const hsize_t off = 32;
        const char garbage[16] = "not deflate!!!!";
        REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, &off, sizeof garbage, garbage) >= 0);
        H5Dclose(d);
        H5Pclose(dcpl);
        H5Dclose(h5_write(f, "c_good", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {64}, v.data()));
        H5Fclose(f);
    }
    dp::Dump dump({path});
    REQUIRE(dump.tensors().size() == 3);
    inspect::Options opts;
    opts.recipe = parse_recipe("te-current");
    std::vector<std::string> seen;
    inspect::analyse_all(dump, opts, [&](std::size_t i, const inspect::Result* r, std::exception_ptr err) {
        if (r) {
            seen.push_back(dump.tensors()[i].name + " ok");
            CHECK(r->stats.numel == 64);
            return;
        }
        try {
            std::rethrow_exception(err);
        } catch (const dp::DumpError& e) {
            seen.push_back(dump.tensors()[i].name + " error");
            CHECK(e.file == path);
            CHECK(e.name == "b_corrupt");
            CHECK_THAT(e.message, Catch::Contains("chunk at [32]: its deflate stream is corrupt"));
        }
    });
    CHECK(seen == std::vector<std::string>{"a_good ok", "b_corrupt error", "c_good ok"});
    check_all_against_one_by_one(dump, opts);
}
