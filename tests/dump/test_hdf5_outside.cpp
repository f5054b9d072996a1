// "Read only the files the user named" (docs/hardening.md): HDF5 datasets whose bytes live in
// other files are skipped with a note naming what they point at, external links are not followed,
// and ReadOptions::allow_external_in_dump_folder allows only regular files in the dump's folder.
// Fixtures through the HDF5 C API (H5Pset_external, H5Pset_virtual, H5Lcreate_external).
#include <sys/stat.h>

#include "dump_test_util.hpp"
#include "fp8kit/io/array_file.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;
using namespace fp8kit::dump::test;

namespace {

// DIR/dump/NAME.h5 with a good tensor 'good' and one dataset made by `make`; DIR/other/ holds
// the files outside the dump's folder: secret.bin (16 float32 7.0) and src.h5:/data (16 x 5.0).
struct Fixture {
    std::string dump, other;
    Fixture() : dump(scratch("outside_dump")), other(scratch("outside_other")) {
        ::mkdir(dump.c_str(), 0700);
        ::mkdir(other.c_str(), 0700);
        const std::vector<float> sevens(16, 7.0f), fives(16, 5.0f), twos(16, 2.0f), threes(16, 3.0f);
        write_bytes(other + "/secret.bin", std::string(reinterpret_cast<const char*>(sevens.data()), 64));
        write_bytes(dump + "/inside.bin", std::string(reinterpret_cast<const char*>(twos.data()), 64));
        for (const auto& [path, v] :
             {std::pair{other + "/src.h5", &fives}, std::pair{dump + "/inside_src.h5", &threes}}) {
            const hid_t f = h5_create(path);
            H5Dclose(h5_write(f, "data", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {16}, v->data()));
            H5Fclose(f);
        }
    }
    template <class Make>
    std::string file(const std::string& name, Make&& make) const {
        const std::string path = dump + "/" + name;
        const hid_t f = h5_create(path);
        const std::vector<float> good(8, 1.0f);
        H5Dclose(h5_write(f, "good", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {8}, good.data()));
        make(f);
        H5Fclose(f);
        return path;
    }
};

void external(hid_t f, const char* name, const std::string& target) {
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(H5Pset_external(dcpl, target.c_str(), 0, 64) >= 0);
    H5Dclose(h5_write(f, name, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {16}, nullptr, dcpl));
    H5Pclose(dcpl);
}

void virtual_ds(hid_t f, const char* name, const std::string& src_file, const char* src_dset) {
    const hsize_t n = 16;
    const hid_t vspace = H5Screate_simple(1, &n, nullptr), sspace = H5Screate_simple(1, &n, nullptr);
    const hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    REQUIRE(H5Pset_virtual(dcpl, vspace, src_file.c_str(), src_dset, sspace) >= 0);
    const hid_t d = H5Dcreate2(f, name, H5T_IEEE_F32LE, vspace, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    REQUIRE(d >= 0);
    H5Dclose(d);
    H5Pclose(dcpl);
    H5Sclose(vspace);
    H5Sclose(sspace);
}

std::vector<float> read_all(Source& src, const std::string& name) {
    const auto* t = find(src.tensors(), name);
    REQUIRE(t);
    std::vector<float> v(t->numel);
    src.read(*t, [&](const Chunk& c) { std::memcpy(v.data() + c.first, c.bits, c.count * 4); });
    return v;
}

const std::string& note_of(const Source& src, const std::string& name) {
    const Problem* p = find(src.notes(), name);
    if (!p) p = find(src.errors(), name);
    REQUIRE(p);
    return p->message;
}

}  // namespace

TEST_CASE("HDF5 outside: external raw storage is skipped with a note, never read", "[dump]") {
    const Fixture fx;
    const auto path = fx.file("ext.h5", [&](hid_t f) {
        external(f, "passwd", "/etc/passwd");
        external(f, "abs", fx.other + "/secret.bin");
        external(f, "rel", "../outside_other/secret.bin");
        external(f, "zero", "/dev/zero");
        external(f, "inside", "inside.bin");
    });
    const auto src = open_source(path);
    REQUIRE(src->tensors().size() == 1);  // 'good' only
    CHECK_THAT(note_of(*src, "passwd"),
               Catch::Contains("raw data stored outside the file, in '/etc/passwd': not read"));
    CHECK_THAT(note_of(*src, "abs"), Catch::Contains("secret.bin"));
    CHECK_THAT(note_of(*src, "zero"), Catch::Contains("'/dev/zero'"));
    CHECK_THAT(note_of(*src, "inside"), Catch::Contains("--allow-external-in-dump-folder"));

    ReadOptions allow;
    allow.allow_external_in_dump_folder = true;
    const auto src2 = open_source(path, allow);
    CHECK(read_all(*src2, "inside") == std::vector<float>(16, 2.0f));  // in the dump's folder: read
    for (const char* outside : {"passwd", "abs", "rel", "zero"}) {
        CAPTURE(outside);
        CHECK(find(src2->tensors(), outside) == nullptr);
        CHECK_THAT(note_of(*src2, outside), Catch::Contains("not allowed"));
    }
    CHECK_THAT(note_of(*src2, "rel"), Catch::Contains("outside the dump's folder"));
    CHECK_THAT(note_of(*src2, "zero"), Catch::Contains("outside the dump's folder"));
}

TEST_CASE("HDF5 outside: virtual datasets are skipped; one mapping itself does not crash", "[dump]") {
    const Fixture fx;
    const auto path = fx.file("vds.h5", [&](hid_t f) {
        virtual_ds(f, "other", fx.other + "/src.h5", "data");
        virtual_ds(f, "missing", fx.other + "/no_such.h5", "data");
        virtual_ds(f, "self", ".", "self");
        virtual_ds(f, "inside", "inside_src.h5", "data");
        const std::vector<float> fours(16, 4.0f);
        H5Dclose(h5_write(f, "plain16", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {16}, fours.data()));
        virtual_ds(f, "same_file", ".", "plain16");
    });
    for (bool allowed : {false, true}) {
        CAPTURE(allowed);
        ReadOptions opts;
        opts.allow_external_in_dump_folder = allowed;
        const auto src = open_source(path, opts);
        CHECK_THAT(note_of(*src, "other"), Catch::Contains("virtual dataset mapping '" + fx.other + "/src.h5:data'"));
        CHECK_THAT(note_of(*src, "missing"), Catch::Contains("no_such.h5"));
        CHECK_THAT(note_of(*src, "self"), Catch::Contains("'(this file):self'"));
        if (allowed) {
            CHECK_THAT(note_of(*src, "self"), Catch::Contains("it maps itself"));
            CHECK(read_all(*src, "inside") == std::vector<float>(16, 3.0f));
            CHECK(read_all(*src, "same_file") == std::vector<float>(16, 4.0f));
        } else {
            CHECK(src->tensors().size() == 2);  // good, plain16
        }
    }
}

TEST_CASE("HDF5 outside: external links are not followed, also not by file.h5:/path", "[dump]") {
    const Fixture fx;
    const auto path = fx.file("elink.h5", [&](hid_t f) {
        REQUIRE(H5Lcreate_external((fx.other + "/src.h5").c_str(), "data", f, "e", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        REQUIRE(H5Lcreate_external("src.h5", "data", f, "erel", H5P_DEFAULT, H5P_DEFAULT) >= 0);
        REQUIRE(H5Lcreate_soft("/e", f, "soft_to_e", H5P_DEFAULT, H5P_DEFAULT) >= 0);
    });
    const auto src = open_source(path);
    REQUIRE(src->tensors().size() == 1);
    for (const char* name : {"/e", "/erel", "/soft_to_e"}) {
        CAPTURE(name);
        try {
            (void)load_array(path + ":" + name, {});
            FAIL("an external link was followed");
        } catch (const ArrayFileError& e) {
            CHECK_THAT(e.what(), Catch::Contains(name));
            CHECK_THAT(e.what(), Catch::Contains("external link") || Catch::Contains("does not exist"));
        }
    }
}
