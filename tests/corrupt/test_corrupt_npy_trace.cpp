// .npy files (validate's inputs) and amax traces (replay/sweep inputs) cut short, flipped and lying.
#include <limits>

#include "corrupt_util.hpp"
#include "fp8kit/io/npy.hpp"
#include "fp8kit/io/trace.hpp"

using namespace fp8kit::corrupt;

namespace {

std::string good_npy() {
    return npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", raw(std::vector<float>{1, 2, 3, 4}));
}

// read_npy either returns exactly the array the header describes or throws NpyError naming the file.
void exercise_npy(const std::string& path, std::size_t file_size) {
    try {
        const auto a = fp8kit::read_npy(path);
        CHECK(a.header.data_offset + a.data.size() == file_size);
    } catch (const fp8kit::NpyError& e) {
        CHECK(contains(e.what(), path));
    }
}

void exercise_trace(const std::string& path) {
    try {
        const auto t = fp8kit::trace::read_trace(path);
        for (const auto& s : t.series) CHECK(s.steps.size() == s.amax.size());
    } catch (const fp8kit::trace::TraceError& e) {
        CHECK(contains(e.what(), path));
    }
}

std::string head_of(const std::string& path, std::size_t bytes) { return read_file(path).substr(0, bytes); }

}  // namespace

TEST_CASE("npy: truncated at every offset and every header byte flipped", "[corrupt]") {
    const std::string full = good_npy();
    for (std::size_t n = 0; n < full.size(); ++n) {
        INFO("truncated to " << n);
        const auto path = write_file("trunc.npy", full.substr(0, n));
        CHECK_THROWS_AS(fp8kit::read_npy(path), fp8kit::NpyError);
        exercise_npy(path, n);
    }
    for (std::size_t i = 0; i < 64; ++i) {
        for (unsigned char mask : {0x01, 0x20, 0xff}) {
            std::string bad = full;
            bad[i] = static_cast<char>(bad[i] ^ mask);
            INFO("byte " << i << " ^ " << int(mask));
            exercise_npy(write_file("flip.npy", bad), bad.size());
        }
    }
}

TEST_CASE("npy: shapes that overflow, lie about the size, or are empty and 0-d", "[corrupt]") {
    struct Case {
        std::string dict, data, message;  // message empty: must read
    };
    const std::vector<Case> cases = {
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", "", "shape too large"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (2305843009213693952,), }", "", "shape too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", "", "malformed"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", "", "malformed"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", std::string(8, '\0'), "wrong size"},
        {"{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", std::string(8, '\0'), "wrong size"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 5), }", "", ""},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (), }", std::string(4, '\0'), ""},
    };
    for (const auto& c : cases) {
        INFO(c.dict);
        const auto path = write_file("case.npy", npy(c.dict, c.data));
        if (c.message.empty()) {
            CHECK_NOTHROW(fp8kit::read_npy(path));
        } else {
            try {
                fp8kit::read_npy(path);
                FAIL("read");
            } catch (const fp8kit::NpyError& e) {
                CHECK(contains(e.what(), path));
                CHECK(contains(e.what(), c.message));
            }
        }
    }
}

TEST_CASE("traces: the example CSV and dlfw log cut at many offsets and flipped", "[corrupt]") {
    for (const char* name : {"amax_trace.csv", "dlfw_inspect.log"}) {
        const std::string head = head_of(std::string(FP8KIT_DATA_DIR) + "/example/" + name, 2048);
        for (std::size_t n = 0; n <= head.size(); n += 13) {
            INFO(name << " cut to " << n);
            exercise_trace(write_file("trunc.trace", head.substr(0, n)));
        }
        for (std::size_t i = 0; i < 400; ++i) {
            for (char c : {'\0', '\n', ',', '-', 'e', '9', '\xff'}) {
                std::string bad = head;
                bad[i] = c;
                INFO(name << " byte " << i << " = " << int(c));
                exercise_trace(write_file("flip.trace", bad));
            }
        }
    }
}

TEST_CASE("traces: NaN/Inf everywhere, overflowing steps, empty files", "[corrupt]") {
    auto expect_error = [](const std::string& text, const std::string& message) {
        INFO(text);
        const auto path = write_file("case.trace", text);
        try {
            fp8kit::trace::read_trace(path);
            FAIL("read");
        } catch (const fp8kit::trace::TraceError& e) {
            CHECK(contains(e.what(), path));
            CHECK(contains(e.what(), message));
        }
    };
    expect_error("", "neither a CSV trace");
    expect_error("step,amax\n", "no data rows");
    expect_error("step,amax\n99999999999999999999999,1\n", ":2:");
    expect_error("step,amax\nnan,1\n", ":2:");
    expect_error("step,amax\n1,-inf\n", ":2:");
    const auto path = write_file("special.trace", "step,tensor,amax\n0,t,nan\n1,t,inf\n2,t,nan\n3,t,0\n");
    const auto t = fp8kit::trace::read_trace(path);
    REQUIRE(t.series.size() == 1);
    CHECK(t.series[0].amax.size() == 4);
    CHECK(t.series[0].amax[1] == std::numeric_limits<float>::infinity());
}
