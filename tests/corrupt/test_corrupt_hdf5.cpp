// HDF5 dumps broken the way interrupted copies and hand edits break them. The fixture is written
// through the HDF5 C API (tests/dump's helpers), never through the reader under test.
#include <cmath>
#include <limits>

#include "../dump/dump_test_util.hpp"
#include "exercise.hpp"

using namespace fp8kit::corrupt;
namespace h5 = fp8kit::dump::test;

namespace {

// Every kind of dataset the reader handles: contiguous float32 full of NaN/Inf, a chunked
// compressed one (so truncation lands inside chunks), FP8 codes, a 0-d scalar, an empty one,
// and a uint16 whose 'dtype' attribute claims 1-byte E4M3 codes.
std::string fixture() {
    const std::string path = scratch("fixture.h5");
    const hid_t f = h5::h5_create(path);
    const float inf = std::numeric_limits<float>::infinity(), nan = std::nanf("");
    const std::vector<float> special = {nan, inf, -inf, nan, -nan, inf};
    H5Dclose(h5::h5_write(f, "step_1/special", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {2, 3}, special.data()));
    std::vector<float> ramp(4096);
    for (std::size_t i = 0; i < ramp.size(); ++i) ramp[i] = static_cast<float>(i) * 0.25f - 100.0f;
    const hid_t dcpl = h5::h5_chunked({512}, true, 6);
    H5Dclose(h5::h5_write(f, "step_1/chunked", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {4096}, ramp.data(), dcpl));
    H5Pclose(dcpl);
    const std::vector<std::uint8_t> codes = {0x00, 0x38, 0x7e, 0x7f, 0xff, 0x80};
    const hid_t c = h5::h5_write(f, "step_1/codes", H5T_STD_U8LE, H5T_NATIVE_UINT8, {6}, codes.data());
    h5::h5_attr_str(c, "dtype", "e4m3");
    H5Dclose(c);
    const double s = 0.5;
    H5Dclose(h5::h5_write(f, "scalar", H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, {}, &s, H5P_DEFAULT, true));
    H5Dclose(h5::h5_write(f, "empty", H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, {0}, nullptr));
    const std::vector<std::uint16_t> wide = {1, 2, 3};
    const hid_t l = h5::h5_write(f, "lie", H5T_STD_U16LE, H5T_NATIVE_UINT16, {3}, wide.data());
    h5::h5_attr_str(l, "dtype", "e4m3");
    H5Dclose(l);
    H5Fclose(f);
    return read_file(path);
}

}  // namespace

TEST_CASE("HDF5: the fixture itself: empty, 0-d, NaN/Inf and a lying dtype attribute", "[corrupt]") {
    const auto path = write_file("h5_whole.h5", fixture());
    const auto o = exercise(path);
    REQUIRE(!o.file_error);
    CHECK(o.tensors_read == 4);  // special, chunked, codes, scalar
    bool lie = false, empty = false;
    for (const auto& e : o.errors) {
        lie = lie || (contains(e, ": lie: ") && contains(e, "needs 1-byte elements"));
        empty = empty || (contains(e, ": empty: ") && contains(e, "empty dataset"));
    }
    CHECK(lie);
    CHECK(empty);
}

TEST_CASE("HDF5: truncated at many offsets", "[corrupt]") {
    const std::string whole = fixture();
    // Every 61 bytes (a prime, so the cuts land at all alignments) plus the last few bytes.
    std::vector<std::size_t> cuts;
    for (std::size_t n = 0; n < whole.size(); n += 61) cuts.push_back(n);
    for (std::size_t k = 1; k <= 8 && k <= whole.size(); ++k) cuts.push_back(whole.size() - k);
    for (const std::size_t n : cuts) {
        INFO("truncated to " << n << " of " << whole.size() << " bytes");
        const auto o = exercise(write_file("h5_trunc.h5", whole.substr(0, n)));
        CHECK(o.tensors_read <= 4);
        if (o.tensors_read < 4) CHECK(!o.errors.empty());
    }
}

namespace {

// Every byte of the first kilobyte (superblock, root group headers), every 7th byte of the rest
// (metadata and data interleave further on), and the global heap collection ("GCOL", where
// variable-length string attributes live): libhdf5 1.10's H5HG_read trusts its object sizes and
// crashes or loops on a flipped byte there; the reader lists HDF5 files in a child process first
// and turns that into an error.
std::vector<std::size_t> flip_offsets(const std::string& whole) {
    std::vector<std::size_t> at;
    for (std::size_t i = 0; i < std::min<std::size_t>(1024, whole.size()); ++i) at.push_back(i);
    for (std::size_t i = 1024; i < whole.size(); i += 7) at.push_back(i);
    const std::size_t gcol = whole.find("GCOL");
    REQUIRE(gcol != std::string::npos);
    for (std::size_t i = gcol; i < std::min(whole.size(), gcol + 64); ++i)
        at.push_back(i);  // its header, first objects
    return at;
}

// One of `parts` interleaved shares of those offsets: the whole set takes minutes under the
// sanitizers, and four test cases let ctest spread it over the cores.
void flip_share(int part, int parts) {
    const std::string whole = fixture();
    const std::vector<std::size_t> at = flip_offsets(whole);
    for (std::size_t k = static_cast<std::size_t>(part); k < at.size(); k += static_cast<std::size_t>(parts)) {
        std::string bad = whole;
        bad[at[k]] = static_cast<char>(bad[at[k]] ^ 0xff);
        INFO("byte " << at[k] << " flipped");
        (void)exercise(write_file("h5_flip.h5", bad));  // every error names the file; nothing escapes
    }
}

}  // namespace

TEST_CASE("HDF5: flipped bytes in the superblock and object headers (1 of 4)", "[corrupt]") { flip_share(0, 4); }
TEST_CASE("HDF5: flipped bytes in the superblock and object headers (2 of 4)", "[corrupt]") { flip_share(1, 4); }
TEST_CASE("HDF5: flipped bytes in the superblock and object headers (3 of 4)", "[corrupt]") { flip_share(2, 4); }
TEST_CASE("HDF5: flipped bytes in the superblock and object headers (4 of 4)", "[corrupt]") { flip_share(3, 4); }

// The file format puts a global heap object's size at bytes 24..31 of its collection ("GCOL",
// version, 3 reserved bytes, collection size, then object 1: index, reference count, 4 reserved
// bytes, size). libhdf5 1.10 trusts it while reading a string attribute: a flipped high byte
// crashes it (SIGSEGV in H5HG_read), a flipped low byte sends it into a loop. Either way the file
// is one clear error, and the process goes on.
TEST_CASE("HDF5: a corrupt global heap object size is a file error, not a crash or a hang", "[corrupt]") {
    const std::string whole = fixture();
    const std::size_t gcol = whole.find("GCOL");
    REQUIRE(gcol != std::string::npos);
    for (const std::size_t at : {gcol + 24, gcol + 31}) {
        std::string bad = whole;
        bad[at] = static_cast<char>(bad[at] ^ 0xff);
        INFO("byte " << at << " flipped");
        const auto path = write_file("h5_gcol.h5", bad);
        const auto o = exercise(path);
        REQUIRE(o.file_error);
        CHECK_THAT(o.errors.at(0), Catch::Contains(path + ": libhdf5 "));
        CHECK_THAT(o.errors.at(0), Catch::Contains("while listing the file's objects"));
    }
    // The same file whole lists normally through the same child process.
    const auto o = exercise(write_file("h5_gcol_ok.h5", whole));
    CHECK_FALSE(o.file_error);
    CHECK(o.tensors_read == 4);
}
