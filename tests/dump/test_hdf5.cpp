// The HDF5 reader on fixtures written here through the HDF5 C API: every supported encoding,
// chunked and compressed layouts read in small chunks, attributes and guessed metadata, and each
// kind of bad input.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "dump_test_util.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;
using namespace fp8kit::dump::test;

namespace {

// Values chosen so every encoding below holds them exactly; expectations are literals.
const std::vector<double> kF64 = {1.0, -0.0, 1e300, -2.5e-310 /* subnormal */};
const std::vector<float> kF32 = {0.5f, -3.25f, 65504.0f, 1e-40f /* subnormal */, INFINITY, -1.0f};
// binary16 bits: 1.0, -min subnormal, +inf, a quiet NaN
const std::vector<std::uint16_t> kF16 = {0x3c00, 0x8001, 0x7c00, 0x7e00};
// bfloat16 bits: 1.0, -1.0, -2.0 (negative as int16), min subnormal, NaN
const std::vector<std::uint16_t> kBF16 = {0x3f80, 0xbf80, 0xc000, 0x0001, 0x7fc0};

struct Fp8Case {
    const char* dtype_attr;
    const char* name;
    DType dtype;
    std::vector<std::uint8_t> codes;
    std::vector<std::uint32_t> f32;  // the float32 bits each code stands for (format tables)
};
const std::vector<Fp8Case> kFp8 = {
    // E4M3 (fn): 1.0, 448, 2^-9, -0, NaN, -1.5
    {"float8_e4m3fn",
     "fp8/e4m3",
     DType::e4m3,
     {0x38, 0x7e, 0x01, 0x80, 0x7f, 0xbc},
     {0x3f800000, 0x43e00000, 0x3b000000, 0x80000000, 0x7fc00000, 0xbfc00000}},
    // E5M2: 1.0, 57344, 2^-16, +inf, -inf
    {"float8_e5m2",
     "fp8/e5m2",
     DType::e5m2,
     {0x3c, 0x7b, 0x01, 0x7c, 0xfc},
     {0x3f800000, 0x47600000, 0x37800000, 0x7f800000, 0xff800000}},
    // E4M3FNUZ (bias 8): 1.0, 240, 0x80 is the NaN
    {"float8_e4m3fnuz", "fp8/e4m3fnuz", DType::e4m3fnuz, {0x40, 0x7f, 0x80}, {0x3f800000, 0x43700000, 0x7fc00000}},
    // E5M2FNUZ (bias 16): 1.0, 57344, 0x80 NaN
    {"float8_e5m2fnuz", "fp8/e5m2fnuz", DType::e5m2fnuz, {0x40, 0x7f, 0x80}, {0x3f800000, 0x47600000, 0x7fc00000}},
    // E8M0: 2^0, 2^-127, 2^127, NaN
    {"float8_e8m0fnu",
     "fp8/e8m0",
     DType::e8m0,
     {0x7f, 0x00, 0xfe, 0xff},
     {0x3f800000, 0x00400000, 0x7f000000, 0x7fc00000}},
};

std::vector<float> ramp(std::size_t n) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(i) * 0.25f - 100.0f;
    return v;
}

// A filter that stores data unchanged; registered only while the fixture is written, so the
// reader meets a filter this HDF5 cannot apply.
constexpr H5Z_filter_t kFakeFilter = 32123;
size_t identity_filter(unsigned, size_t, const unsigned[], size_t nbytes, size_t*, void**) { return nbytes; }

const std::string& fixture() {
    static const std::string path = [] {
        const std::string p = scratch("all.h5");
        const hid_t f = h5_create(p);
        H5Dclose(h5_write(f, "f64", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {kF64.size()}, kF64.data()));
        // Big-endian on disk: delivered little-endian.
        H5Dclose(h5_write(f, "f32_be", H5T_IEEE_F32BE, H5T_NATIVE_FLOAT, {2, 3}, kF32.data()));
        const hid_t f16 = h5_f16_type();
        H5Dclose(h5_write(f, "nested/a/b/f16", f16, f16, {kF16.size()}, kF16.data()));
        H5Tclose(f16);
        hid_t d = h5_write(f, "bf16_u16", H5T_STD_U16LE, H5T_NATIVE_UINT16, {kBF16.size()}, kBF16.data());
        h5_attr_str(d, "dtype", "bfloat16");
        H5Dclose(d);
        d = h5_write(f, "bf16_i16", H5T_STD_I16BE, H5T_STD_I16LE, {kBF16.size()}, kBF16.data());
        h5_attr_str(d, "dtype", "bfloat16", false);
        H5Dclose(d);
        const hid_t opaque = H5Tcreate(H5T_OPAQUE, 2);
        d = h5_write(f, "bf16_opaque", opaque, opaque, {kBF16.size()}, kBF16.data());
        h5_attr_str(d, "dtype", "bfloat16", false);
        H5Dclose(d);
        H5Tclose(opaque);
        for (const auto& c : kFp8) {
            d = h5_write(f, c.name, H5T_STD_U8LE, H5T_NATIVE_UINT8, {c.codes.size()}, c.codes.data());
            h5_attr_str(d, "dtype", c.dtype_attr);
            H5Dclose(d);
        }
        // Chunked + shuffle + deflate, shapes that do not divide into the chunks.
        const auto r2 = ramp(37 * 53);
        hid_t dcpl = h5_chunked({8, 16}, true, 6);
        H5Dclose(h5_write(f, "chunked/2d", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {37, 53}, r2.data(), dcpl));
        H5Pclose(dcpl);
        const auto r3 = ramp(5 * 7 * 300);
        dcpl = h5_chunked({2, 3, 64}, true, 1);
        H5Dclose(h5_write(f, "chunked/3d", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {5, 7, 300}, r3.data(), dcpl));
        H5Pclose(dcpl);
        const float one = 42.0f;
        H5Dclose(h5_write(f, "scalar", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {}, &one, H5P_DEFAULT, true));

        // Metadata: guessed from names, or given by attributes (which win).
        const float x[2] = {1, 2};
        H5Dclose(h5_write(f, "step_000012/layer1/grad_output", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x));
        H5Dclose(h5_write(f, "run/iter_000034/layer1/weight", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x));
        H5Dclose(h5_write(f, "run/iteration=56/act", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x));
        H5Dclose(h5_write(f, "misc/embed_tokens", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x));
        d = h5_write(f, "step_9/layer1/input", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x);
        h5_attr_int(d, "step", 7);
        h5_attr_str(d, "role", "weight");
        H5Dclose(d);
        d = h5_write(f, "attrs/odd_role", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x);
        h5_attr_str(d, "role", "bias");
        H5Dclose(d);
        // step attributes that are not one int64 step: noted, and the name decides (step_121, _122, ...)
        d = h5_write(f, "bad_step/step_121/text", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x);
        h5_attr_str(d, "step", "twelve");
        H5Dclose(d);
        const unsigned long long huge = ~0ull;
        d = h5_write(f, "bad_step/step_122/unsigned", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x);
        h5_attr(d, "step", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &huge);
        H5Dclose(d);
        const long long two[2] = {5, 6};
        d = h5_write(f, "bad_step/step_123/array", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x);
        h5_attr(d, "step", H5T_STD_I64LE, H5T_NATIVE_LLONG, two, 2);
        H5Dclose(d);
        const double half = 3.5;
        d = h5_write(f, "bad_step/step_124/fraction", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x);
        h5_attr(d, "step", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &half);
        H5Dclose(d);
        const unsigned long long big_ok = 1ull << 40;
        d = h5_write(f, "bad_step/step_125/unsigned_ok", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2}, x);
        h5_attr(d, "step", H5T_STD_U64LE, H5T_NATIVE_ULLONG, &big_ok);
        H5Dclose(d);

        // Skipped on purpose.
        const int ints[3] = {1, 2, 3};
        H5Dclose(h5_write(f, "skip/counts", H5T_STD_I32LE, H5T_NATIVE_INT, {3}, ints));
        const hid_t s5 = H5Tcopy(H5T_C_S1);
        H5Tset_size(s5, 5);
        H5Dclose(h5_write(f, "skip/label", s5, s5, {1}, "hello"));
        H5Tclose(s5);

        // Errors, one per dataset.
        d = h5_write(f, "bad/int4", H5T_STD_U8LE, H5T_NATIVE_UINT8, {3}, "abc");
        h5_attr_str(d, "dtype", "int4");
        H5Dclose(d);
        d = h5_write(f, "bad/bf16_in_bytes", H5T_STD_U8LE, H5T_NATIVE_UINT8, {3}, "abc");
        h5_attr_str(d, "dtype", "bfloat16");
        H5Dclose(d);
        H5Dclose(h5_write(f, "bad/empty", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {0}, nullptr));
        {
            const hid_t lcpl = H5Pcreate(H5P_LINK_CREATE);
            H5Pset_create_intermediate_group(lcpl, 1);
            const hid_t null_space = H5Screate(H5S_NULL);
            H5Dclose(H5Dcreate2(f, "bad/null", H5T_IEEE_F32LE, null_space, lcpl, H5P_DEFAULT, H5P_DEFAULT));
            H5Sclose(null_space);
            H5Pclose(lcpl);
        }
        const hid_t f24 = H5Tcopy(H5T_IEEE_F32LE);  // a 24-bit float nobody reads bit for bit
        H5Tset_fields(f24, 23, 16, 7, 0, 16);
        H5Tset_precision(f24, 24);
        H5Tset_size(f24, 3);
        H5Tset_ebias(f24, 63);
        H5Dclose(h5_write(f, "bad/float24", f24, H5T_NATIVE_FLOAT, {2}, x));
        H5Tclose(f24);
        // A chunk whose bytes are not a deflate stream.
        dcpl = h5_chunked({4}, false, 6);
        d = h5_write(f, "bad/corrupt_chunk", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {8}, nullptr, dcpl);
        const hsize_t off0 = 0, off1 = 4;
        const std::vector<float> four(4, 1.0f);
        const char garbage[16] = "not deflate!!!!";
        REQUIRE(H5Dwrite(d, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, ramp(8).data()) >= 0);
        REQUIRE(H5Dwrite_chunk(d, H5P_DEFAULT, 0, &off1, sizeof garbage, garbage) >= 0);
        (void)off0;
        H5Dclose(d);
        H5Pclose(dcpl);
        // A filter that is gone by the time the file is read.
        H5Z_class2_t cls{};
        cls.version = H5Z_CLASS_T_VERS;
        cls.id = kFakeFilter;
        cls.encoder_present = 1;
        cls.decoder_present = 1;
        cls.name = "fp8kit_test_filter";
        cls.filter = identity_filter;
        REQUIRE(H5Zregister(&cls) >= 0);
        dcpl = H5Pcreate(H5P_DATASET_CREATE);
        const hsize_t c4 = 4;
        H5Pset_chunk(dcpl, 1, &c4);
        REQUIRE(H5Pset_filter(dcpl, kFakeFilter, H5Z_FLAG_MANDATORY, 0, nullptr) >= 0);
        H5Dclose(h5_write(f, "bad/missing_filter", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {8}, ramp(8).data(), dcpl));
        H5Pclose(dcpl);

        // A hard-link cycle: the group is its own child. Listing must still end, once per dataset.
        REQUIRE(H5Lcreate_hard(f, "nested/a", f, "nested/a/loop", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        REQUIRE(H5Fclose(f) >= 0);
        REQUIRE(H5Zunregister(kFakeFilter) >= 0);
        return p;
    }();
    return path;
}

Collected read_all(Source& src, const TensorInfo& t, std::size_t chunk_bytes) {
    return collect([&](const ChunkFn& fn) { src.read(t, fn); }, t, chunk_bytes);
}

}  // namespace

TEST_CASE("HDF5: every float encoding is delivered bit for bit", "[dump]") {
    const auto src = open_source(fixture());
    const auto& ts = src->tensors();

    const auto* t = find(ts, "f64");
    REQUIRE(t);
    CHECK(t->dtype == DType::f64);
    CHECK(t->wide == Wide::f64);
    CHECK(t->storage == "float64");
    auto c = read_all(*src, *t, 1 << 20);
    for (std::size_t i = 0; i < kF64.size(); ++i) CHECK(c.bits[i] == f64_bits(kF64[i]));

    t = find(ts, "f32_be");
    REQUIRE(t);
    CHECK(t->shape == std::vector<std::uint64_t>{2, 3});
    CHECK(t->dtype == DType::f32);
    c = read_all(*src, *t, 1 << 20);
    for (std::size_t i = 0; i < kF32.size(); ++i) CHECK(c.bits[i] == f32_bits(kF32[i]));

    t = find(ts, "nested/a/b/f16");
    REQUIRE(t);
    CHECK(t->dtype == DType::f16);
    CHECK(t->storage == "float16");
    c = read_all(*src, *t, 1 << 20);
    for (std::size_t i = 0; i < kF16.size(); ++i) CHECK(c.bits[i] == kF16[i]);

    for (const char* n : {"bf16_u16", "bf16_i16", "bf16_opaque"}) {
        INFO(n);
        t = find(ts, n);
        REQUIRE(t);
        CHECK(t->dtype == DType::bf16);
        CHECK(t->wide == Wide::bf16);
        c = read_all(*src, *t, 1 << 20);
        for (std::size_t i = 0; i < kBF16.size(); ++i) CHECK(c.bits[i] == kBF16[i]);
    }
    CHECK(find(ts, "bf16_i16")->storage == "int16");
    CHECK(find(ts, "bf16_opaque")->storage == "opaque2");

    t = find(ts, "scalar");
    REQUIRE(t);
    CHECK(t->shape.empty());
    CHECK(t->numel == 1);
    CHECK(read_all(*src, *t, 1 << 20).bits == std::vector<std::uint64_t>{f32_bits(42.0f)});
}

TEST_CASE("HDF5: FP8 codes are decoded exactly to float32", "[dump]") {
    const auto src = open_source(fixture());
    for (const auto& fc : kFp8) {
        INFO(fc.name);
        const auto* t = find(src->tensors(), fc.name);
        REQUIRE(t);
        CHECK(t->dtype == fc.dtype);
        CHECK(t->wide == Wide::f32);
        CHECK(t->storage == "uint8");
        const auto c = read_all(*src, *t, 1 << 20);
        for (std::size_t i = 0; i < fc.codes.size(); ++i) {
            INFO("code 0x" << std::hex << int(fc.codes[i]));
            CHECK(c.bits[i] == fc.f32[i]);
        }
    }
}

TEST_CASE("HDF5: chunked, compressed datasets read in small pieces", "[dump]") {
    for (std::size_t budget :
         {std::size_t(4), std::size_t(64), std::size_t(1000), std::size_t(4096), std::size_t(1) << 20}) {
        ReadOptions opts;
        opts.chunk_bytes = budget;
        const auto src = open_source(fixture(), opts);
        for (const auto& [name, n] :
             {std::pair<const char*, std::size_t>{"chunked/2d", 37 * 53}, {"chunked/3d", 5 * 7 * 300}}) {
            INFO(name << " with chunks of " << budget << " bytes");
            const auto* t = find(src->tensors(), name);
            REQUIRE(t);
            CHECK(t->numel == n);
            const auto c = read_all(*src, *t, budget);
            const auto want = ramp(n);
            std::size_t bad = 0;
            for (std::size_t i = 0; i < n; ++i) bad += c.bits[i] != f32_bits(want[i]);
            CHECK(bad == 0);
            if (budget < n * 4) CHECK(c.chunks > 1);
        }
    }
}

TEST_CASE("HDF5: step and role from attributes, else guessed from the name", "[dump]") {
    const auto src = open_source(fixture());
    const auto& ts = src->tensors();
    auto t = find(ts, "step_000012/layer1/grad_output");
    REQUIRE(t);
    CHECK(t->step == 12);
    CHECK(t->step_guessed);
    CHECK(t->role == Role::gradient);
    CHECK(t->role_guessed);
    t = find(ts, "run/iter_000034/layer1/weight");
    REQUIRE(t);
    CHECK(t->step == 34);
    CHECK(t->role == Role::weight);
    t = find(ts, "run/iteration=56/act");
    REQUIRE(t);
    CHECK(t->step == 56);
    CHECK(t->role == Role::activation);
    t = find(ts, "misc/embed_tokens");
    REQUIRE(t);
    CHECK_FALSE(t->step.has_value());
    CHECK_FALSE(t->step_guessed);
    CHECK(t->role == Role::unknown);
    CHECK_FALSE(t->role_guessed);
    t = find(ts, "step_9/layer1/input");
    REQUIRE(t);
    CHECK(t->step == 7);
    CHECK_FALSE(t->step_guessed);
    CHECK(t->role == Role::weight);
    CHECK_FALSE(t->role_guessed);
    // An unknown role attribute is noted, and the name decides.
    t = find(ts, "attrs/odd_role");
    REQUIRE(t);
    CHECK(t->role == Role::unknown);
    const auto* note = find(src->notes(), "attrs/odd_role");
    REQUIRE(note);
    CHECK_THAT(note->message, Catch::Contains("bias"));
}

TEST_CASE("HDF5: a step attribute that is not one int64 is noted, and the name decides", "[dump]") {
    const auto src = open_source(fixture());
    const auto& ts = src->tensors();
    const std::pair<const char*, const char*> bad[] = {{"bad_step/step_121/text", "'twelve'"},
                                                       {"bad_step/step_122/unsigned", "18446744073709551615"},
                                                       {"bad_step/step_123/array", "holds 2 values"},
                                                       {"bad_step/step_124/fraction", "3.5"}};
    std::int64_t want = 121;
    for (const auto& [name, what] : bad) {
        INFO(name);
        const auto* t = find(ts, name);
        REQUIRE(t);
        CHECK(t->step == want++);
        CHECK(t->step_guessed);
        const auto* note = find(src->notes(), name);
        REQUIRE(note);
        CHECK_THAT(note->message, Catch::Contains(what) && Catch::Contains("guessed from the name"));
    }
    const auto* ok = find(ts, "bad_step/step_125/unsigned_ok");
    REQUIRE(ok);
    CHECK(ok->step == (std::int64_t{1} << 40));
    CHECK_FALSE(ok->step_guessed);
    CHECK(find(src->notes(), "bad_step/step_125/unsigned_ok") == nullptr);
}

TEST_CASE("HDF5: non-float datasets are skipped with a note, bad ones are errors", "[dump]") {
    const auto src = open_source(fixture());
    const auto* n = find(src->notes(), "skip/counts");
    REQUIRE(n);
    CHECK_THAT(n->message, Catch::Contains("int32") && Catch::Contains("dtype"));
    REQUIRE(find(src->notes(), "skip/label"));
    CHECK_THAT(find(src->notes(), "skip/label")->message, Catch::Contains("string"));

    auto err = [&](const char* name) -> std::string {
        const auto* p = find(src->errors(), name);
        if (!p) return "(no error recorded)";
        CHECK(p->file == fixture());
        CHECK_FALSE(find(src->tensors(), name));
        return p->message;
    };
    CHECK_THAT(err("bad/int4"), Catch::Contains("unsupported dtype 'int4'"));
    CHECK_THAT(err("bad/bf16_in_bytes"), Catch::Contains("needs 2-byte elements"));
    CHECK_THAT(err("bad/empty"), Catch::Contains("empty dataset"));
    CHECK_THAT(err("bad/null"), Catch::Contains("empty dataset"));
    CHECK_THAT(err("bad/float24"), Catch::Contains("unsupported dtype: 3-byte float"));
    CHECK_THAT(err("bad/missing_filter"), Catch::Contains("filter 32123") && Catch::Contains("fp8kit_test_filter") &&
                                              Catch::Contains("HDF5_PLUGIN_PATH"));
    // Nothing else failed, and the cycle did not list anything twice.
    CHECK(src->errors().size() == 6);
    std::vector<std::string> names;
    for (const auto& t : src->tensors()) names.push_back(t.name);
    std::sort(names.begin(), names.end());
    CHECK(std::adjacent_find(names.begin(), names.end()) == names.end());
}

TEST_CASE("HDF5: an unreadable chunk is an error naming file, dataset and elements", "[dump]") {
    const auto src = open_source(fixture());
    const auto* t = find(src->tensors(), "bad/corrupt_chunk");
    REQUIRE(t);  // listing cannot know; reading finds out
    try {
        read_all(*src, *t, 1 << 20);
        FAIL("corrupt chunk read without error");
    } catch (const DumpError& e) {
        CHECK(e.file == fixture());
        CHECK(e.name == "bad/corrupt_chunk");
        // Decoded by fp8kit (hdf5_filters.cpp): the chunk is named, and what is wrong with it.
        CHECK_THAT(std::string(e.what()),
                   Catch::Contains(fixture() + ": bad/corrupt_chunk: chunk at [4]: its deflate stream is corrupt"));
    }
    // The file stays usable after the failure.
    const auto c = read_all(*src, *find(src->tensors(), "f64"), 1 << 20);
    CHECK(c.bits[0] == f64_bits(1.0));
}

TEST_CASE("HDF5: missing, truncated and foreign files are file errors", "[dump]") {
    CHECK_THROWS_WITH(open_source(scratch("does_not_exist.h5")),
                      Catch::Contains("does_not_exist.h5: cannot open: No such file or directory"));
    const std::string whole = read_bytes(fixture());
    write_bytes(scratch("truncated.h5"), whole.substr(0, whole.size() / 2));
    try {
        open_source(scratch("truncated.h5"));
        FAIL("truncated file opened");
    } catch (const DumpError& e) {
        CHECK(e.name.empty());
        CHECK_THAT(std::string(e.what()),
                   Catch::Contains("truncated.h5: cannot open as HDF5") && Catch::Contains("truncated"));
    }
    write_bytes(scratch("text.h5"), "this is not an HDF5 file, just some text\n");
    CHECK_THROWS_WITH(open_source(scratch("text.h5")), Catch::Contains("text.h5: neither an HDF5 file"));
    write_bytes(scratch("tiny.h5"), "abc");
    CHECK_THROWS_WITH(open_source(scratch("tiny.h5")), Catch::Contains("only 3 bytes"));
    CHECK_THROWS_WITH(open_source(scratch_dir()), Catch::Contains("is a directory"));
    // A user block before the superblock is still HDF5.
    const hid_t fcpl = H5Pcreate(H5P_FILE_CREATE);
    REQUIRE(H5Pset_userblock(fcpl, 1024) >= 0);
    const hid_t ub = H5Fcreate(scratch("userblock.h5").c_str(), H5F_ACC_TRUNC, fcpl, H5P_DEFAULT);
    REQUIRE(ub >= 0);
    const double one = 1.0;
    H5Dclose(h5_write(ub, "x", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {1}, &one));
    H5Fclose(ub);
    H5Pclose(fcpl);
    CHECK(is_hdf5_file(scratch("userblock.h5")));
    CHECK(open_source(scratch("userblock.h5"))->tensors().size() == 1);
    CHECK(is_hdf5_file(fixture()));
    CHECK_FALSE(is_hdf5_file(scratch("text.h5")));
}

TEST_CASE("Dump: many files, selection, and errors collected for the end", "[dump]") {
    std::vector<Problem> problems;
    const auto files =
        expand_inputs({fixture(), scratch("does_not_exist.h5"), scratch("text.h5"), scratch("nomatch_*.h5")}, problems);
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0].describe(), Catch::Contains("nomatch_*.h5: no file matches"));
    write_bytes(scratch("text.h5"), "plain text");
    Selection sel;
    sel.include = {"chunked/*", "fp8/*", "bad/*"};
    sel.exclude = {"*/e8m0"};
    Dump dump(files, sel);
    CHECK(dump.files_opened() == 1);
    std::vector<std::string> names;
    for (const auto& t : dump.tensors()) names.push_back(t.name);
    CHECK(names == std::vector<std::string>{"bad/corrupt_chunk", "chunked/2d", "chunked/3d", "fp8/e4m3", "fp8/e4m3fnuz",
                                            "fp8/e5m2", "fp8/e5m2fnuz"});
    // Two unusable files plus the six bad datasets that the patterns select.
    CHECK(dump.errors().size() == 8);
    CHECK(find(dump.errors(), "bad/int4"));
    const auto c = collect([&](const ChunkFn& fn) { dump.read(1, fn); }, dump.tensors()[1], 1 << 20);
    CHECK(c.bits[1] == f32_bits(ramp(2)[1]));

    Selection steps;
    steps.steps = parse_steps("10-40");
    Dump by_step({fixture()}, steps);
    names.clear();
    for (const auto& t : by_step.tensors()) names.push_back(t.name);
    std::string why;  // on failure, what the reader said of the file
    for (const auto& e : by_step.errors()) why += e.describe() + "\n";
    INFO(why);
    CHECK(names == std::vector<std::string>{"run/iter_000034/layer1/weight", "step_000012/layer1/grad_output"});
}
