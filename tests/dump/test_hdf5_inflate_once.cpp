// Issue 25: "large gzip chunks are inflated again for every slab". Where the reader leaves a
// chunked dataset to libhdf5's H5Dread (filters it does not decode itself, a type conversion, a
// row of chunks over 64 MiB), it reads slabs smaller than a chunk and sizes the dataset's chunk
// cache so that each chunk is decompressed once (dump_hdf5.cpp, `revisits`). This counts the
// decompressions: the fixtures are compressed by a zlib filter registered here under an id of the
// range HDF5 sets aside for testing filters (256-511, H5Zpublic.h), which counts its
// H5Z_FLAG_REVERSE calls. libhdf5 treats every filter's chunks alike in its chunk cache
// (H5Dchunk.c), and its own deflate filter cannot be replaced (H5Zregister refuses ids < 256).
// The chunks are 2 MiB, over libhdf5's default 1 MiB chunk cache, so without the reader's cache
// setting every slab would inflate its chunk again and the counts below would be the slab counts.
#include <zlib.h>

#include <cstring>

#include "dump_test_util.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;
using namespace fp8kit::dump::test;

namespace {

constexpr H5Z_filter_t kCountedZlib = 300;
int g_inflates = 0;

// Forward: an 8-byte length, then the zlib stream. Reverse: inflate (counted). 0 on failure.
size_t counted_zlib(unsigned flags, size_t, const unsigned[], size_t nbytes, size_t* buf_size, void** buf) {
    const auto* in = static_cast<const unsigned char*>(*buf);
    std::uint64_t len = 0;
    void* out = nullptr;
    size_t out_size = 0;
    if ((flags & H5Z_FLAG_REVERSE) != 0) {
        ++g_inflates;
        if (nbytes < 8) return 0;
        std::memcpy(&len, in, 8);
        out = H5allocate_memory(len, false);
        uLongf n = static_cast<uLongf>(len);
        if (out == nullptr || uncompress(static_cast<Bytef*>(out), &n, in + 8, nbytes - 8) != Z_OK || n != len) {
            H5free_memory(out);
            return 0;
        }
        out_size = len;
    } else {
        len = nbytes;
        uLongf n = compressBound(nbytes);
        out = H5allocate_memory(n + 8, false);
        std::memcpy(out, &len, 8);
        if (compress2(static_cast<Bytef*>(out) + 8, &n, in, nbytes, 6) != Z_OK) {
            H5free_memory(out);
            return 0;
        }
        out_size = n + 8;
    }
    H5free_memory(*buf);
    *buf = out;
    *buf_size = out_size;
    return out_size;
}

void register_counted_zlib() {
    static const H5Z_class2_t cls = {
        H5Z_CLASS_T_VERS, kCountedZlib, 1,           1, "zlib, counted by test_hdf5_inflate_once",
        nullptr,          nullptr,      counted_zlib};
    REQUIRE(H5Zregister(&cls) >= 0);
}

// A float32 dataset of `dims`, chunked by `chunk`, compressed by the counted zlib filter (which
// the reader does not decode itself, so the dataset goes to H5Dread).
std::string write_fixture(const std::string& file, const std::vector<hsize_t>& dims,
                          const std::vector<hsize_t>& chunk) {
    register_counted_zlib();
    const std::string path = scratch(file);
    std::size_t n = 1;
    for (hsize_t d : dims) n *= static_cast<std::size_t>(d);
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i % 4096) * 0.25f;
    const hid_t f = h5_create(path);
    const hid_t dcpl = h5_chunked(chunk, false, -1);
    REQUIRE(H5Pset_filter(dcpl, kCountedZlib, H5Z_FLAG_MANDATORY, 0, nullptr) >= 0);
    H5Dclose(h5_write(f, "x", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, dims, v.data(), dcpl));
    H5Pclose(dcpl);
    H5Fclose(f);
    return path;
}

// Reads "x" through the reader in slabs of `chunk_bytes`; returns {inflates, slabs}.
std::pair<int, std::size_t> read_counting(const std::string& path, std::size_t chunk_bytes) {
    const auto expect = h5_raw_bits(path, "x");
    ReadOptions opts;
    opts.chunk_bytes = chunk_bytes;
    opts.hdf5_listing_timeout_ms = 0;  // everything in this process
    const auto src = open_source(path, opts);
    const auto* t = find(src->tensors(), "x");
    REQUIRE(t);
    g_inflates = 0;
    const Collected got = collect([&](const ChunkFn& fn) { src->read(*t, fn); }, *t, chunk_bytes);
    CHECK(got.bits == expect);
    return {g_inflates, got.chunks};
}

}  // namespace

TEST_CASE("HDF5 chunks: H5Dread's fallback inflates each large chunk once and not once per slab", "[dump]") {
    SECTION("one 2 MiB chunk read in 8 slabs") {
        const auto [inflates, slabs] = read_counting(write_fixture("inflate_1d.h5", {1 << 19}, {1 << 19}), 256 << 10);
        CHECK(slabs == 8);
        CHECK(inflates == 1);
    }
    SECTION("two 2 MiB chunks along dim 0, read row by row in quarter rows") {
        // (16, 65536) in chunks of (8, 65536): each row is 4 slabs, 64 slabs in all.
        const auto [inflates, slabs] = read_counting(write_fixture("inflate_2d.h5", {16, 65536}, {8, 65536}), 64 << 10);
        CHECK(slabs == 64);
        CHECK(inflates == 2);
    }
}
