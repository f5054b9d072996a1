// Chunked HDF5 datasets decoded by fp8kit itself (deflate, shuffle: lib/src/hdf5_filters.cpp):
// bit for bit what libhdf5's own H5Dread gives on good files, and a named error, never an
// over-read, on chunks that decode to the wrong size (libhdf5 1.10 reads past its buffer there).
#include <zlib.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <mutex>

#include "dump_test_util.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;
using namespace fp8kit::dump::test;

namespace {

std::vector<std::uint64_t> read_with_reader(const std::string& path, const std::string& name,
                                            std::size_t chunk_bytes = std::size_t(1) << 20) {
    ReadOptions opts;
    opts.chunk_bytes = chunk_bytes;
    const auto src = open_source(path, opts);
    const auto* t = find(src->tensors(), name);
    REQUIRE(t);
    return collect([&](const ChunkFn& fn) { src->read(*t, fn); }, *t, chunk_bytes).bits;
}

// Source::read_into: the tensor decoded by the pool's workers straight into one buffer; every
// element placed exactly once.
std::vector<std::uint64_t> read_into_with_reader(const std::string& path, const std::string& name) {
    const auto src = open_source(path);
    const auto* t = find(src->tensors(), name);
    REQUIRE(t);
    const std::size_t es = wide_size(t->wide);
    std::vector<unsigned char> dest(static_cast<std::size_t>(t->numel) * es, 0xA5);
    std::vector<int> placed(static_cast<std::size_t>(t->numel), 0);
    std::mutex m;
    src->read_into(*t, dest.data(), [&](std::uint64_t first, std::size_t count) {
        const std::lock_guard<std::mutex> g(m);
        for (std::size_t k = 0; k < count; ++k) ++placed.at(static_cast<std::size_t>(first + k));
    });
    CHECK(std::all_of(placed.begin(), placed.end(), [](int n) { return n == 1; }));
    std::vector<std::uint64_t> bits(static_cast<std::size_t>(t->numel), 0);
    for (std::size_t i = 0; i < bits.size(); ++i) std::memcpy(&bits[i], &dest[i * es], es);
    return bits;
}

std::vector<unsigned char> deflate(const void* data, std::size_t n) {
    uLongf out = compressBound(n);
    std::vector<unsigned char> z(out);
    REQUIRE(compress2(z.data(), &out, static_cast<const Bytef*>(data), n, 6) == Z_OK);
    z.resize(out);
    return z;
}

// A (64) float32 dataset, chunks of 32, deflate only; chunk 1 replaced by `bytes` with `mask`.
std::string with_second_chunk(const std::string& file, const std::vector<unsigned char>& bytes, unsigned mask) {
    const std::string path = scratch(file);
    const hid_t f = h5_create(path);
    std::vector<float> v(64);
    for (std::size_t i = 0; i < v.size(); ++i) v[i] = 0.5f * static_cast<float>(i);
    const hid_t dcpl = h5_chunked({32}, false, 6);
    const hid_t d = h5_write(f, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {64}, v.data(), dcpl);
    const hsize_t off = 32;
    REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, mask, &off, bytes.size(), bytes.data()) >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Fclose(f);
    return path;
}

std::string read_error(const std::string& path) {
    const auto src = open_source(path);
    const auto* t = find(src->tensors(), "x");
    REQUIRE(t);
    try {
        src->read(*t, [](const Chunk&) {});
    } catch (const DumpError& e) {
        CHECK(e.file == path);
        CHECK(e.name == "x");
        return e.what();
    }
    FAIL("a bad chunk was read without an error");
    return "";
}

}  // namespace

TEST_CASE("HDF5 chunks: a chunk that decodes to the wrong size is a named error", "[dump]") {
    std::vector<float> full(32, 1.0f), part(25, 1.0f), more(40, 1.0f);
    SECTION("deflate stream holding fewer bytes than the chunk") {
        const auto p = with_second_chunk("short.h5", deflate(part.data(), 100), 0);
        CHECK_THAT(read_error(p),
                   Catch::Contains("x: chunk at [32]: its deflate stream holds 100 bytes, the chunk 128"));
    }
    SECTION("deflate stream holding more bytes than the chunk") {
        const auto p = with_second_chunk("long.h5", deflate(more.data(), 160), 0);
        CHECK_THAT(read_error(p),
                   Catch::Contains("chunk at [32]: its deflate stream holds more than the chunk's 128 bytes"));
    }
    SECTION("deflate stream cut short") {
        auto z = deflate(full.data(), 128);
        z.resize(z.size() / 2);
        const auto p = with_second_chunk("cut.h5", z, 0);
        CHECK_THAT(read_error(p), Catch::Contains("chunk at [32]: its deflate stream ends early"));
    }
    SECTION("compressed bytes whose filter mask says 'not compressed'") {
        const auto p = with_second_chunk("masked.h5", deflate(full.data(), 128), 1u);
        CHECK_THAT(read_error(p), Catch::Contains("chunk at [32]: it stores"));
        CHECK_THAT(read_error(p), Catch::Contains("the chunk holds 128: corrupt file"));
    }
    SECTION("not a deflate stream") {
        const std::vector<unsigned char> junk = {'n', 'o', 't', ' ', 'z', 'l', 'i', 'b'};
        const auto p = with_second_chunk("junk.h5", junk, 0);
        CHECK_THAT(read_error(p), Catch::Contains("chunk at [32]: its deflate stream is corrupt"));
    }
    SECTION("a chunk stored raw with its filter skipped, at the right size, reads as stored") {
        std::vector<float> raw(32);
        for (std::size_t i = 0; i < raw.size(); ++i) raw[i] = -3.0f * static_cast<float>(i);
        std::vector<unsigned char> bytes(128);
        std::memcpy(bytes.data(), raw.data(), 128);
        const auto p = with_second_chunk("raw_ok.h5", bytes, 1u);
        const auto got = read_with_reader(p, "x");
        CHECK(got == h5_raw_bits(p, "x"));
        CHECK(got[40] == f32_bits(-24.0f));
    }
}

TEST_CASE("HDF5 chunks: decoded chunks equal libhdf5's H5Dread bit for bit", "[dump]") {
    const std::string path = scratch("chunks_vs_h5dread.h5");
    const hid_t f = h5_create(path);
    // 3-D float32, shuffle + deflate, edge chunks in every dimension, a fill value and chunks
    // never written (they read as the fill value).
    {
        const hid_t dcpl = h5_chunked({3, 4, 50}, true, 4);
        const float fill = 7.5f;
        REQUIRE(H5Pset_fill_value(dcpl, H5T_NATIVE_FLOAT, &fill) >= 0);
        const hid_t d = h5_write(f, "f32_3d", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {7, 9, 130}, nullptr, dcpl);
        // Write only the first 4 planes: chunks of planes 6 (the last chunk row) stay unwritten.
        std::vector<float> v(4 * 9 * 130);
        for (std::size_t i = 0; i < v.size(); ++i) v[i] = std::sin(static_cast<float>(i)) * 1000.0f;
        const hid_t fs = H5Dget_space(d);
        const hsize_t start[3] = {0, 0, 0}, count[3] = {4, 9, 130};
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, nullptr, count, nullptr);
        const hid_t ms = H5Screate_simple(3, count, nullptr);
        REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, ms, fs, H5P_DEFAULT, v.data()) >= 0);
        H5Sclose(ms);
        H5Sclose(fs);
        H5Dclose(d);
        H5Pclose(dcpl);
    }
    // bfloat16 bits as uint16, shuffle (element size 2) + deflate, 2-D.
    {
        const hid_t dcpl = h5_chunked({16, 16}, true, 1);
        std::vector<std::uint16_t> b(33 * 47);
        for (std::size_t i = 0; i < b.size(); ++i) b[i] = static_cast<std::uint16_t>(i * 2654435761u >> 7);
        const hid_t d = h5_write(f, "bf16_2d", H5T_STD_U16LE, H5T_NATIVE_UINT16, {33, 47}, b.data(), dcpl);
        h5_attr_str(d, "dtype", "bfloat16");
        H5Dclose(d);
        H5Pclose(dcpl);
    }
    // Shuffle alone, 1-D float64.
    {
        const hid_t dcpl = h5_chunked({100}, true, -1);
        std::vector<double> x(1001);
        for (std::size_t i = 0; i < x.size(); ++i) x[i] = std::exp(static_cast<double>(i) * 0.01) - 3.0;
        H5Dclose(h5_write(f, "f64_shuffle", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {1001}, x.data(), dcpl));
        H5Pclose(dcpl);
    }
    H5Fclose(f);
    for (const char* name : {"f32_3d", "bf16_2d", "f64_shuffle"}) {
        for (std::size_t budget : {std::size_t(64), std::size_t(1) << 20}) {
            INFO(name << ", pieces of " << budget << " bytes");
            const auto want = h5_raw_bits(path, name);
            CHECK(read_with_reader(path, name, budget) == want);
        }
        INFO(name << ", read_into");
        CHECK(read_into_with_reader(path, name) == h5_raw_bits(path, name));
    }
    const auto f3 = read_with_reader(path, "f32_3d");
    CHECK(f3.back() == f32_bits(7.5f));  // an unwritten chunk: the fill value
}
