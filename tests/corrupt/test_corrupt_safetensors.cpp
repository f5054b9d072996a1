// safetensors files broken every way a copy or a hand edit can break them.
#include <cmath>
#include <limits>

#include "exercise.hpp"

using namespace fp8kit::corrupt;

namespace {

// Two F32 tensors of 3 elements: [1, 2, 3] and [NaN, Inf, -Inf].
std::string good_file() {
    const std::vector<float> data = {1, 2, 3, std::nanf(""), std::numeric_limits<float>::infinity(),
                                     -std::numeric_limits<float>::infinity()};
    return safetensors(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                       R"("b":{"dtype":"F32","shape":[3],"data_offsets":[12,24]}})",
                       raw(data));
}

std::string with_entry(const std::string& entry, std::size_t data_bytes) {
    return safetensors(R"({"ok":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"bad":)" + entry + "}",
                       std::string(data_bytes, '\0'));
}

}  // namespace

TEST_CASE("safetensors: truncated at every offset", "[corrupt]") {
    const std::string full = good_file();
    REQUIRE(exercise(write_file("st_full.safetensors", full)).tensors_read == 2);
    for (std::size_t n = 0; n < full.size(); ++n) {
        INFO("truncated to " << n << " of " << full.size() << " bytes");
        const auto o = exercise(write_file("st_trunc.safetensors", full.substr(0, n)));
        // Whatever survives must have been read completely; the rest is reported.
        CHECK(o.tensors_read < 2);
        CHECK(!o.errors.empty());
    }
}

TEST_CASE("safetensors: every header byte flipped", "[corrupt]") {
    const std::string full = good_file();
    const std::size_t header_end = 8 + (static_cast<unsigned char>(full[0]) | static_cast<unsigned char>(full[1]) << 8);
    for (std::size_t i = 0; i < header_end; ++i) {
        for (unsigned char mask : {0x01, 0x80, 0xff}) {
            std::string bad = full;
            bad[i] = static_cast<char>(bad[i] ^ mask);
            INFO("byte " << i << " ^ " << int(mask));
            const auto o = exercise(write_file("st_flip.safetensors", bad));
            // A flip may leave a valid file (a digit in a name): then both tensors still read.
            if (o.errors.empty()) CHECK(o.tensors_read >= 1);
        }
    }
}

TEST_CASE("safetensors: lying entries are named, the good tensor still reads", "[corrupt]") {
    struct Case {
        const char* what;
        std::string entry;
        std::size_t data_bytes;
        const char* message;
    };
    const std::vector<Case> cases = {
        {"shape overflows 64 bits", R"({"dtype":"F32","shape":[4294967296,4294967296,16],"data_offsets":[4,8]})", 8,
         "overflows 64 bits"},
        {"shape product fits, byte count does not", R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[4,8]})",
         8, "needs"},
        {"offsets past the end", R"({"dtype":"F32","shape":[2],"data_offsets":[4,1000000000000]})", 8,
         "run past the end"},
        {"offsets reversed", R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", 8, "end before they begin"},
        {"dtype lies about the storage size", R"({"dtype":"F16","shape":[1],"data_offsets":[4,8]})", 8, "needs"},
        {"negative shape", R"({"dtype":"F32","shape":[-1],"data_offsets":[4,8]})", 8, "non-integer or negative"},
        {"unknown dtype", R"({"dtype":"F7","shape":[1],"data_offsets":[4,8]})", 8, "unsupported dtype"},
        {"overlapping tensors", R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 8, "overlap"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        const auto path = write_file("st_lie.safetensors", with_entry(c.entry, c.data_bytes));
        const auto o = exercise(path);
        REQUIRE(!o.file_error);
        bool named = false;
        for (const auto& e : o.errors) named = named || (contains(e, ": bad: ") && contains(e, c.message));
        CHECK(named);
        // Overlap makes both tensors suspect; otherwise the good one still reads.
        CHECK(o.tensors_read == (std::string(c.message) == "overlap" ? 0u : 1u));
    }
}

TEST_CASE("safetensors: header length larger than the file or than 100 MB", "[corrupt]") {
    std::string f = good_file();
    for (std::uint64_t n : {std::uint64_t(1) << 40, std::uint64_t(~0ull), std::uint64_t(f.size())}) {
        std::string bad = f;
        for (int i = 0; i < 8; ++i) bad[i] = static_cast<char>((n >> (8 * i)) & 0xff);
        const auto o = exercise(write_file("st_len.safetensors", bad));
        CHECK(o.file_error);
    }
}

TEST_CASE("safetensors: empty and 0-d tensors", "[corrupt]") {
    const auto path = write_file("st_shapes.safetensors",
                                 safetensors(R"({"scalar":{"dtype":"F32","shape":[],"data_offsets":[0,4]},)"
                                             R"("empty":{"dtype":"F32","shape":[0,3],"data_offsets":[4,4]}})",
                                             raw(std::vector<float>{2.5f})));
    const auto o = exercise(path);
    CHECK(!o.file_error);
    CHECK(o.tensors_read == 1);  // the scalar; the empty tensor is reported, not analysed
}
