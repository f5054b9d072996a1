// safetensors files broken every way a copy or a hand edit can break them.
#include <cmath>
#include <limits>

#include "exercise.hpp"

using namespace fp8kit::corrupt;

namespace {

// Two F32 tensors of 3 elements: [1, 2, 3] and [NaN, Inf, -Inf].
std::string good_file() {
    const std::vector<float> data = {
        1, 2, 3, std::nanf(""), std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity()};
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
        {"shape product fits, byte count does not",
         R"({"dtype":"F64","shape":[2305843009213693952],"data_offsets":[4,8]})", 8, "needs"},
        {"offsets past the end", R"({"dtype":"F32","shape":[2],"data_offsets":[4,1000000000000]})", 8,
         "run past the end"},
        {"offsets reversed", R"({"dtype":"F32","shape":[1],"data_offsets":[8,4]})", 8, "end before they begin"},
        {"dtype lies about the storage size", R"({"dtype":"F16","shape":[1],"data_offsets":[4,8]})", 8, "needs"},
        {"negative shape", R"({"dtype":"F32","shape":[-1],"data_offsets":[4,8]})", 8, "non-integer or negative"},
        {"unknown dtype", R"({"dtype":"F7","shape":[1],"data_offsets":[4,8]})", 8, "unsupported dtype"},
        // 4 data bytes: with 8, bytes [4, 8) would belong to no tensor and refuse the whole file.
        {"overlapping tensors", R"({"dtype":"F32","shape":[1],"data_offsets":[0,4]})", 4, "overlap"},
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

// The reference reader (huggingface/safetensors, src/tensor.rs: Metadata::validate) refuses a
// header whose tensors do not tile the data: a repeated name (the JSON object keeps one of the
// two, and the other's bytes are left over) and bytes that no tensor covers.
TEST_CASE("safetensors: repeated names and uncovered bytes refuse the file", "[corrupt]") {
    const std::string one = raw(std::vector<float>{1.0f});
    struct Case {
        const char* what;
        std::string header, data;
        const char* message;
    };
    const std::vector<Case> cases = {
        {"name given twice",
         R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
         R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
         one + one, "appears twice"},
        {"name twice, same offsets",
         R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
         R"("w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
         one, "appears twice"},
        {"bytes before the first tensor", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", one + one,
         "[0, 4) belong to no tensor"},
        {"bytes between tensors",
         R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
         one + one + one, "[4, 8) belong to no tensor"},
        {"bytes after the last tensor", R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", one + "x",
         "after the last tensor"},
    };
    for (const auto& c : cases) {
        INFO(c.what);
        const auto o = exercise(write_file("st_tile.safetensors", safetensors(c.header, c.data)));
        CHECK(o.file_error);
        CHECK(o.tensors_read == 0);
        bool named = false;
        for (const auto& e : o.errors) named = named || contains(e, c.message);
        CHECK(named);
    }
    // Integer tensors (skipped, not analysed) still cover their bytes.
    const auto o = exercise(
        write_file("st_ints.safetensors", safetensors(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                                      R"("ids":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})",
                                                      one + one)));
    CHECK(!o.file_error);
    CHECK(o.tensors_read == 1);
}

// nlohmann's dump() recurses: a shape nested 10^6 deep overflowed the stack while the error
// message was formatted, and took every other file's results with it.
TEST_CASE("safetensors: a deeply nested shape is one short error", "[corrupt]") {
    for (const bool closed : {false, true}) {
        const std::size_t depth = 1'000'000;
        std::string shape = std::string(depth, '[');
        if (closed) shape += "1" + std::string(depth, ']');
        const std::string header =
            R"({"ok":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"bad":{"dtype":"F32","shape":[1,)" + shape +
            (closed ? R"(],"data_offsets":[4,8]}})" : "");
        INFO((closed ? "closed" : "unclosed") << " nesting");
        const auto o = exercise(write_file("st_deep.safetensors", safetensors(header, std::string(8, '\0'))));
        REQUIRE(!o.errors.empty());
        for (const auto& e : o.errors) CHECK(e.size() < 600);
        if (closed) CHECK(o.tensors_read == 1);  // the good tensor of the same file still reads
    }
}

// A NUL inside a name (JSON "\u0000") is part of the name: nothing cuts it.
TEST_CASE("safetensors: a NUL in a tensor name is kept", "[corrupt]") {
    const auto path = write_file(
        "st_nul.safetensors",
        safetensors(R"({"a\u0000b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", raw(std::vector<float>{1.0f})));
    fp8kit::dump::Dump d({path});
    REQUIRE(d.tensors().size() == 1);
    CHECK(d.tensors()[0].name == std::string("a\0b", 3));
}
