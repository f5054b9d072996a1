// Helpers for the reader tests: a scratch directory, collecting a tensor's chunks, and writing
// HDF5 fixtures through the HDF5 C API directly (independent of the reader code).
#pragma once

#include <hdf5.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "scratch_dir.hpp"

#include "fp8kit/io/dump.hpp"
#include "fp8kit/convert/quantize.hpp"

namespace fp8kit::dump::test {

// One temporary directory per test process, removed at exit (tests/scratch_dir.hpp).
inline const std::string& scratch_dir() {
    struct Tag {};
    return fp8kit::test::process_scratch<Tag>("fp8kit_dump_test").path();
}
inline std::string scratch(const std::string& name) { return scratch_dir() + "/" + name; }

inline void write_bytes(const std::string& path, const std::string& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    REQUIRE(out.good());
}

inline std::string read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

// The tensor as one array of bit patterns (widened to 64 bits), checking that chunks arrive in
// order, without gaps, in the tensor's delivered type and within the chunk budget.
struct Collected {
    std::vector<std::uint64_t> bits;
    std::size_t chunks = 0;
};
template <class Reader>
Collected collect(Reader&& read, const TensorInfo& t, std::size_t chunk_bytes) {
    Collected c;
    read([&](const Chunk& ch) {
        REQUIRE(ch.wide == t.wide);
        REQUIRE(ch.first == c.bits.size());
        REQUIRE(ch.count >= 1);
        REQUIRE(ch.count * wide_size(ch.wide) <= std::max(chunk_bytes, wide_size(ch.wide)));
        for (std::size_t i = 0; i < ch.count; ++i) {
            std::uint64_t v = 0;
            std::memcpy(&v, static_cast<const char*>(ch.bits) + i * wide_size(ch.wide), wide_size(ch.wide));
            c.bits.push_back(v);
        }
        ++c.chunks;
    });
    REQUIRE(c.bits.size() == t.numel);
    return c;
}

inline std::uint32_t f32_bits(float f) {
    std::uint32_t b;
    std::memcpy(&b, &f, 4);
    return b;
}
inline std::uint64_t f64_bits(double d) {
    std::uint64_t b;
    std::memcpy(&b, &d, 8);
    return b;
}

inline const TensorInfo* find(const std::vector<TensorInfo>& ts, const std::string& name) {
    for (const auto& t : ts)
        if (t.name == name) return &t;
    return nullptr;
}
inline const Problem* find(const std::vector<Problem>& ps, const std::string& name) {
    for (const auto& p : ps)
        if (p.name == name) return &p;
    return nullptr;
}

// --- HDF5 writing, straight through the C API -------------------------------------------------

inline hid_t h5_create(const std::string& path) {
    const hid_t f = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(f >= 0);
    return f;
}

// IEEE binary16 as h5py defines it: a 2-byte HDF5 float with fields (15, 10, 5, 0, 10), bias 15.
inline hid_t h5_f16_type() {
    const hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    REQUIRE(H5Tset_fields(t, 15, 10, 5, 0, 10) >= 0);
    REQUIRE(H5Tset_precision(t, 16) >= 0);
    REQUIRE(H5Tset_size(t, 2) >= 0);
    REQUIRE(H5Tset_ebias(t, 15) >= 0);
    return t;
}

// Writes a dataset (intermediate groups created); returns it open so attributes can be added.
inline hid_t h5_write(hid_t loc, const std::string& name, hid_t file_type, hid_t mem_type,
                      const std::vector<hsize_t>& dims, const void* data, hid_t dcpl = H5P_DEFAULT,
                      bool scalar = false) {
    const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
    H5Pset_create_intermediate_group(lcpl, 1);
    const hid_t space =
        scalar ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr);
    const hid_t d = H5Dcreate2(loc, name.c_str(), file_type, space, lcpl, dcpl, H5P_DEFAULT);
    REQUIRE(d >= 0);
    if (data) REQUIRE(H5Dwrite(d, mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0);
    H5Sclose(space);
    H5Pclose(lcpl);
    return d;
}

// String attribute, variable-length UTF-8 like h5py writes str, or fixed-length ASCII (bytes).
inline void h5_attr_str(hid_t obj, const char* name, const std::string& value, bool vlen = true) {
    const hid_t t = H5Tcopy(H5T_C_S1);
    if (vlen) {
        H5Tset_size(t, H5T_VARIABLE);
        H5Tset_cset(t, H5T_CSET_UTF8);
    } else {
        H5Tset_size(t, value.size());
        H5Tset_strpad(t, H5T_STR_NULLPAD);
    }
    const hid_t s = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(obj, name, t, s, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    const char* p = value.c_str();
    REQUIRE(H5Awrite(a, t, vlen ? static_cast<const void*>(&p) : static_cast<const void*>(p)) >= 0);
    H5Aclose(a);
    H5Sclose(s);
    H5Tclose(t);
}

inline void h5_attr_int(hid_t obj, const char* name, long long v) {
    const hid_t s = H5Screate(H5S_SCALAR);
    const hid_t a = H5Acreate2(obj, name, H5T_STD_I64LE, s, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    REQUIRE(H5Awrite(a, H5T_NATIVE_LLONG, &v) >= 0);
    H5Aclose(a);
    H5Sclose(s);
}

// An attribute of n values of the given stored and memory types (n = 1: a scalar).
inline void h5_attr(hid_t obj, const char* name, hid_t stored, hid_t mem, const void* values, hsize_t n = 1) {
    const hid_t s = n == 1 ? H5Screate(H5S_SCALAR) : H5Screate_simple(1, &n, nullptr);
    const hid_t a = H5Acreate2(obj, name, stored, s, H5P_DEFAULT, H5P_DEFAULT);
    REQUIRE(a >= 0);
    REQUIRE(H5Awrite(a, mem, values) >= 0);
    H5Aclose(a);
    H5Sclose(s);
}

// A dataset's stored elements as bit patterns, read whole by libhdf5's own H5Dread with the
// stored type itself (no hyperslabs, no conversion; FP8 codes stay codes): the independent
// answer the reader's chunked reads are compared with.
inline std::vector<std::uint64_t> h5_raw_bits(const std::string& path, const std::string& name) {
    const hid_t f = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    REQUIRE(f >= 0);
    const hid_t d = H5Dopen2(f, name.c_str(), H5P_DEFAULT);
    REQUIRE(d >= 0);
    const hid_t t = H5Dget_type(d);
    const std::size_t size = H5Tget_size(t);
    const hid_t s = H5Dget_space(d);
    const auto n = static_cast<std::size_t>(H5Sget_simple_extent_npoints(s));
    std::vector<unsigned char> buf(n * size);
    REQUIRE(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf.data()) >= 0);
    REQUIRE(H5Tget_order(t) != H5T_ORDER_BE);
    std::vector<std::uint64_t> out(n);
    for (std::size_t i = 0; i < n; ++i) std::memcpy(&out[i], buf.data() + i * size, size);
    H5Sclose(s);
    H5Tclose(t);
    H5Dclose(d);
    H5Fclose(f);
    return out;
}

inline hid_t h5_chunked(const std::vector<hsize_t>& chunk, bool shuffle, int deflate) {
    const hid_t p = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(H5Pset_chunk(p, static_cast<int>(chunk.size()), chunk.data()) >= 0);
    if (shuffle) REQUIRE(H5Pset_shuffle(p) >= 0);
    if (deflate >= 0) REQUIRE(H5Pset_deflate(p, static_cast<unsigned>(deflate)) >= 0);
    return p;
}

}  // namespace fp8kit::dump::test
