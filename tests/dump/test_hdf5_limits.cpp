// The work follows the data, not the header (issue: hardening round 2): sizes a header claims are
// checked before anything is read, chunks are bounded, float layouts that are not IEEE are
// refused, and validate's file.h5:/x goes through the same reader (short chunks are errors).
#include <zlib.h>

#include <chrono>

#include "dump_test_util.hpp"
#include "fp8kit/analysis/inspect.hpp"
#include "fp8kit/io/array_file.hpp"
#include "fp8kit/stats/statistics.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;
using namespace fp8kit::dump::test;

namespace {

// A chunked float32 dataset of `dims` with nothing written (fill value only).
std::string declared(const std::string& file, const std::vector<hsize_t>& dims, const std::vector<hsize_t>& chunk,
                     int deflate = -1, float fill = 0.25f) {
    const std::string path = scratch(file);
    const hid_t f = h5_create(path);
    const hid_t dcpl = h5_chunked(chunk, false, deflate);
    REQUIRE(H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill) >= 0);
    const hid_t space = H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t d = H5Dcreate2(f, "x", H5T_IEEE_F32LE, space, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(d >= 0);
    H5Dclose(d);
    H5Sclose(space);
    H5Pclose(dcpl);
    H5Fclose(f);
    return path;
}

// Writes `value` into the hyperslab start/count of dataset x of `path` (chunks allocated there).
void write_rows(const std::string& path, const std::vector<hsize_t>& start, const std::vector<hsize_t>& count,
                float value) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    const hid_t ds = H5Dopen2(f, "x", H5P_DEFAULT);
    std::size_t n = 1;
    for (hsize_t c : count) n *= static_cast<std::size_t>(c);
    std::vector<float> v(n, value);
    const hid_t fs = H5Dget_space(ds);
    H5Sselect_hyperslab(fs, H5S_SELECT_SET, start.data(), nullptr, count.data(), nullptr);
    const hid_t ms = H5Screate_simple(static_cast<int>(count.size()), count.data(), nullptr);
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, v.data()) >= 0);
    H5Sclose(ms);
    H5Sclose(fs);
    H5Dclose(ds);
    H5Fclose(f);
}

std::string error_of(const std::string& path, const ReadOptions& opts = {}) {
    const auto src = open_source(path, opts);
    CHECK(src->tensors().empty());
    const Problem* p = find(src->errors(), "x");
    REQUIRE(p);
    return p->message;
}

std::string load_error(const std::string& source) {
    try {
        (void)load_array(source, {});
    } catch (const ArrayFileError& e) {
        return e.what();
    }
    FAIL("loaded without an error: " << source);
    return "";
}

}  // namespace

TEST_CASE("HDF5 limits: a header's claimed size is refused by name before reading", "[dump]") {
    const auto t0 = std::chrono::steady_clock::now();
    SECTION("2^62 + 4 float32: the byte count wraps past 64 bits") {
        const auto p = declared("wrap.h5", {(hsize_t(1) << 62) + 4}, {hsize_t(1) << 20});
        CHECK_THAT(error_of(p),
                   Catch::Contains("shape [4611686018427387908] of 4-byte elements claims more than 2^64 bytes"));
        const auto e = load_error(p + ":/x");
        CHECK_THAT(e, Catch::Contains("wrap.h5:/x"));
        CHECK_THAT(e, Catch::Contains("more than 2^64 bytes"));
    }
    SECTION("2^40 float32 of fill value only: over the element limit, with the option named") {
        const auto p = declared("big.h5", {hsize_t(1) << 40}, {hsize_t(1) << 20});
        CHECK_THAT(error_of(p),
                   Catch::Contains("shape [1099511627776] claims 1099511627776 elements (4398046511104 bytes), "
                                   "over the limit of 17179869184 elements per tensor (--max-elements"));
        CHECK_THAT(load_error(p + ":/x"), Catch::Contains("--max-elements"));
    }
    SECTION("raising the limit reads it: unwritten chunks are the fill value") {
        const auto p = declared("fill.h5", {hsize_t(1) << 22}, {hsize_t(1) << 16});
        ReadOptions small;
        small.max_elements = hsize_t(1) << 20;
        CHECK_THAT(error_of(p, small), Catch::Contains("over the limit of 1048576 elements"));
        const auto src = open_source(p);
        REQUIRE(src->tensors().size() == 1);
        std::uint64_t n = 0, bad = 0;
        src->read(src->tensors()[0], [&](const Chunk& c) {
            for (std::size_t i = 0; i < c.count; ++i) bad += static_cast<const float*>(c.bits)[i] != 0.25f;
            n += c.count;
        });
        CHECK(n == (std::uint64_t(1) << 22));
        CHECK(bad == 0);
    }
    SECTION("a chunk over the chunk limit (decoded whole) is refused, with the option named") {
        const auto p = declared("bigchunk.h5", {hsize_t(1) << 26}, {hsize_t(1) << 25}, 6);
        CHECK_THAT(error_of(p),
                   Catch::Contains("chunks of shape [33554432] hold 134217728 bytes each, over the limit of "
                                   "64 MiB (--max-chunk-mib"));
        ReadOptions big;
        big.max_chunk_bytes = std::uint64_t(256) << 20;
        CHECK(open_source(p, big)->tensors().size() == 1);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
}

TEST_CASE("HDF5 limits: small chunks are gathered, not delivered one element at a time", "[dump]") {
    const std::string path = scratch("tiny_chunks.h5");
    const hid_t f = h5_create(path);
    std::vector<float> v(1 << 14);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 100.0f;
    const hid_t dcpl = h5_chunked({1}, true, 1);
    H5Dclose(h5_write(f, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {v.size()}, v.data(), dcpl));
    H5Pclose(dcpl);
    H5Fclose(f);
    const auto src = open_source(path);
    REQUIRE(src->tensors().size() == 1);
    const auto got = collect([&](const ChunkFn& fn) { src->read(src->tensors()[0], fn); }, src->tensors()[0],
                             ReadOptions{}.chunk_bytes);
    CHECK(got.bits == h5_raw_bits(path, "x"));
    CHECK(got.chunks == 1);  // 2^14 one-element chunks, one delivery
}

TEST_CASE("HDF5 limits: float layouts other than IEEE and bfloat16 are refused", "[dump]") {
    const std::string path = scratch("floats.h5");
    const hid_t f = h5_create(path);
    const std::vector<float> v(4, 1.5f);
    auto with = [&](const char* name, auto&& change) {
        const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
        change(t);
        H5Dclose(h5_write(f, name, t, H5T_NATIVE_FLOAT, {4}, v.data()));
        H5Tclose(t);
    };
    with("norm_none", [](hid_t t) { REQUIRE(H5Tset_norm(t, H5T_NORM_NONE) >= 0); });
    with("bias", [](hid_t t) { REQUIRE(H5Tset_ebias(t, 100) >= 0); });
    with("ok", [](hid_t) {});
    H5Fclose(f);
    const auto src = open_source(path);
    REQUIRE(src->tensors().size() == 1);
    CHECK(src->tensors()[0].name == "ok");
    const Problem* norm = find(src->errors(), "norm_none");
    REQUIRE(norm);
    CHECK_THAT(norm->message, Catch::Contains("no normalisation"));
    CHECK_THAT(norm->message, Catch::Contains("not an IEEE or bfloat16 layout"));
    const Problem* bias = find(src->errors(), "bias");
    REQUIRE(bias);
    CHECK_THAT(bias->message, Catch::Contains("bias 100"));
    CHECK_THAT(load_error(path + ":/norm_none"), Catch::Contains("no normalisation"));
}

TEST_CASE("HDF5 limits: validate's file.h5:/x reads through the hardened reader", "[dump]") {
    const std::string path = scratch("short_for_validate.h5");
    const hid_t f = h5_create(path);
    std::vector<float> v(64, 1.0f), part(25, 1.0f);
    const hid_t dcpl = h5_chunked({32}, false, 6);
    const hid_t d = h5_write(f, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {64}, v.data(), dcpl);
    uLongf zn = compressBound(100);
    std::vector<unsigned char> z(zn);
    REQUIRE(compress2(z.data(), &zn, reinterpret_cast<const Bytef*>(part.data()), 100, 6) == Z_OK);
    const hsize_t off = 32;
    REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, &off, zn, z.data()) >= 0);
    std::vector<std::uint8_t> codes(64, 0x38);
    H5Dclose(h5_write(f, "codes", H5T_STD_U8LE, H5T_NATIVE_UINT8, {64}, codes.data()));
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Fclose(f);
    CHECK_THAT(load_error(path + ":/x"),
               Catch::Contains("chunk at [32]: its deflate stream holds 100 bytes, the chunk 128"));
    const ArrayFile a = load_array(path + ":/codes", {});
    CHECK(a.type == ElementType::u8);
    CHECK(a.data == std::vector<unsigned char>(64, 0x38));
}

TEST_CASE("HDF5 limits: a deep chain of groups is listed in linear time", "[dump]") {
    // H5Ovisit2 took 280 s for 2,000 nested groups (it looks each object up by its full path).
    const std::string path = scratch("nested.h5");
    const hid_t f = h5_create(path);
    hid_t g = H5Gopen2(f, "/", H5P_DEFAULT);
    std::string name;
    for (int i = 0; i < 2000; ++i) {
        const hid_t next = H5Gcreate2(g, "g", H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        REQUIRE(next >= 0);
        H5Gclose(g);
        g = next;
        name += name.empty() ? "g" : "/g";
    }
    const std::vector<float> v(4, 1.0f);
    H5Dclose(h5_write(g, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4}, v.data()));
    H5Gclose(g);
    H5Fclose(f);
    const auto t0 = std::chrono::steady_clock::now();
    const auto src = open_source(path);
    REQUIRE(src->tensors().size() == 1);
    CHECK(src->tensors()[0].name == name + "/x");
    CHECK(src->errors().empty());
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(15));
}

TEST_CASE("HDF5 limits: what no chunk holds is fill-value runs counted in O(1)", "[dump]") {
    const auto t0 = std::chrono::steady_clock::now();
    ReadOptions raised;
    raised.max_elements = std::uint64_t(1) << 41;
    SECTION("2^40 float32 within a raised --max-elements: one run through read_runs and inspect") {
        const auto p = declared("huge.h5", {hsize_t(1) << 40}, {hsize_t(1) << 20});
        Dump d({p}, {}, raised);
        REQUIRE(d.tensors().size() == 1);
        std::vector<Chunk> got;
        float value = 0;
        d.read_runs(0, [&](const Chunk& c) {
            got.push_back(c);
            value = *static_cast<const float*>(c.bits);
        });
        REQUIRE(got.size() == 1);
        CHECK(got[0].count == 1);
        CHECK(got[0].first == 0);
        CHECK(got[0].repeat == (std::uint64_t(1) << 40));
        CHECK(value == 0.25f);
        inspect::Options o;
        o.recipe = parse_recipe("te-current");
        const inspect::Result r = inspect::analyse(d, 0, o);
        CHECK(r.streamed);
        CHECK(r.amax == 0.25f);
        CHECK(r.stats.numel == (std::uint64_t(1) << 40));
        CHECK(r.stats.zeros == 0);
        std::uint64_t in_hist = 0;
        for (auto b : r.stats.exp_hist) in_hist += b;
        CHECK(in_hist == (std::uint64_t(1) << 40));
        CHECK(r.stats.sum_x2 == 0.0625 * 1099511627776.0);  // exact: powers of two
    }
    SECTION("the run's statistics equal those of the elements read one by one") {
        // 0.3 is not a power of two and does not cast exactly: the sums round. Counts and the
        // histogram must be equal; the sums agree to n * 2^-53 relative (statistics.hpp, times()).
        const std::uint64_t n = std::uint64_t(1) << 22;
        const auto p = declared("third.h5", {hsize_t(n)}, {hsize_t(1) << 16}, -1, 0.3f);
        ReadOptions pieces = raised;
        pieces.chunk_bytes = std::size_t(1) << 18;  // the loop sees 16 chunks, merged in order
        Dump d({p}, {}, pieces);
        inspect::Options o;
        o.recipe = parse_recipe("te-current");
        o.memory_bytes = 1 << 20;  // streamed: the path that takes runs
        const inspect::Result r = inspect::analyse(d, 0, o);
        REQUIRE(r.streamed);
        QuantConfig cfg{r.format, r.scale.scale, o.recipe.policy, r.scale.scale_inv};
        QuantStats loop;
        std::uint64_t chunks = 0;
        d.read(0, [&](const Chunk& c) {
            CHECK(c.repeat == 1);
            loop.merge(compute_stats(c.bits, c.wide, c.count, cfg));
            ++chunks;
        });
        CHECK(chunks > 1);
        CHECK(loop.numel == n);
        CHECK(r.stats.numel == loop.numel);
        CHECK(r.stats.underflow == loop.underflow);
        CHECK(r.stats.subnormal == loop.subnormal);
        CHECK(r.stats.overflow == loop.overflow);
        CHECK(r.stats.te_underflow == loop.te_underflow);
        CHECK(r.stats.te_overflow == loop.te_overflow);
        CHECK(r.stats.exp_hist == loop.exp_hist);
        CHECK(r.stats.amax == loop.amax);
        CHECK(r.stats.min_nonzero == loop.min_nonzero);
        REQUIRE(loop.sum_err2 > 0);
        CHECK(std::abs(r.stats.sum_x2 - loop.sum_x2) <= loop.sum_x2 * static_cast<double>(n) * 0x1p-53);
        CHECK(std::abs(r.stats.sum_err2 - loop.sum_err2) <= loop.sum_err2 * static_cast<double>(n) * 0x1p-53);
    }
    SECTION("chunks partly written: each unwritten stretch is one run, the written chunks read") {
        // 1-D: one chunk of 2.0 written at the start of 2^16 elements.
        const auto p = declared("part.h5", {hsize_t(1) << 16}, {hsize_t(1) << 12});
        write_rows(p, {0}, {hsize_t(1) << 12}, 2.0f);
        Dump d({p}, {}, raised);
        std::uint64_t seen = 0, twos = 0, runs = 0;
        d.read_runs(0, [&](const Chunk& c) {
            CHECK(c.first == seen);
            if (c.repeat > 1) {
                ++runs;
                CHECK(*static_cast<const float*>(c.bits) == 0.25f);
                seen += c.repeat;
                return;
            }
            for (std::size_t i = 0; i < c.count; ++i) twos += static_cast<const float*>(c.bits)[i] == 2.0f;
            seen += c.count;
        });
        CHECK(runs == 1);
        CHECK(seen == (std::uint64_t(1) << 16));
        CHECK(twos == (std::uint64_t(1) << 12));
    }
    SECTION("2-D, gzip, whole-row chunks: the runs expanded equal read() element for element") {
        const auto p = declared("rows.h5", {64, 8}, {4, 8}, 1, -1.5f);
        write_rows(p, {8, 0}, {4, 8}, 3.0f);
        write_rows(p, {60, 0}, {4, 8}, -7.0f);  // the last chunk
        write_rows(p, {20, 0}, {4, 8}, 0.5f);
        Dump d({p}, {}, raised);
        std::vector<float> whole, expanded;
        d.read(0, [&](const Chunk& c) {
            CHECK(c.repeat == 1);
            const auto* v = static_cast<const float*>(c.bits);
            whole.insert(whole.end(), v, v + c.count);
        });
        std::uint64_t runs = 0;
        d.read_runs(0, [&](const Chunk& c) {
            REQUIRE(c.first == expanded.size());
            const auto* v = static_cast<const float*>(c.bits);
            if (c.repeat > 1) ++runs;
            if (c.repeat > 1)
                expanded.insert(expanded.end(), static_cast<std::size_t>(c.repeat), v[0]);
            else
                expanded.insert(expanded.end(), v, v + c.count);
        });
        CHECK(runs == 3);  // rows 0-7, 12-19, 24-59
        REQUIRE(whole.size() == 64 * 8);
        CHECK(expanded == whole);
        CHECK(whole[8 * 8] == 3.0f);
        CHECK(whole[0] == -1.5f);
        CHECK(whole[63 * 8 + 7] == -7.0f);
    }
    SECTION("2^40 float32 with two chunks written: inspect's work follows the chunks written") {
        const auto p = declared("huge_part.h5", {hsize_t(1) << 40}, {hsize_t(1) << 20}, 1);
        write_rows(p, {hsize_t(1) << 30}, {hsize_t(1) << 20}, 8.0f);
        write_rows(p, {(hsize_t(1) << 40) - (hsize_t(1) << 20)}, {hsize_t(1) << 20}, -16.0f);
        Dump d({p}, {}, raised);
        inspect::Options o;
        o.recipe = parse_recipe("te-current");
        const inspect::Result r = inspect::analyse(d, 0, o);
        CHECK(r.streamed);
        CHECK(r.amax == 16.0f);
        CHECK(r.stats.numel == (std::uint64_t(1) << 40));
        std::uint64_t in_hist = 0;
        for (auto b : r.stats.exp_hist) in_hist += b;
        CHECK(in_hist == (std::uint64_t(1) << 40));
        // Powers of two: every square and sum is exact.
        const double n = 1099511627776.0, m = 1048576.0;
        CHECK(r.stats.sum_x2 == 0.0625 * (n - 2 * m) + 64.0 * m + 256.0 * m);
    }
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(20));
}
