// The CLI on corrupt inputs: each failure is one message naming the file and the problem, the good
// inputs of the same call are still reported, and the exit status says an input failed.
#include <algorithm>
#include <cmath>
#include <limits>

#include "corrupt_util.hpp"

using namespace fp8kit::corrupt;

TEST_CASE("cli: inspect reports the good file and names every corrupt one", "[corrupt][cli]") {
    const std::string good = write_file(
        "good.safetensors", safetensors(R"({"layer.weight":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                        raw(std::vector<float>{0.5f, -1.0f, 2.0f, 448.0f})));
    const std::string full = read_file(good);
    struct Bad {
        std::string file, message;
    };
    const std::vector<Bad> bad = {
        {write_file("cut.safetensors", full.substr(0, full.size() - 5)), "run past the end of the data"},
        {write_file("cut_header.safetensors", full.substr(0, 20)), "runs past the end of the file"},
        {write_file("overflow.safetensors",
                    safetensors(R"({"x":{"dtype":"F32","shape":[4294967296,4294967297],"data_offsets":[0,4]}})",
                                std::string(4, '\0'))),
         "overflows 64 bits"},
        {write_file("overlap.safetensors", safetensors(R"({"x":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                       R"("y":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                                       std::string(12, '\0'))),
         "overlap"},
        {write_file("cut.h5", std::string("\x89HDF\r\n\x1a\n", 8) + std::string(40, '\0')), "cannot open as HDF5"},
    };
    std::string args = "inspect --json " + good;
    for (const auto& b : bad) args += " " + b.file;
    const Run r = cli(args);
    INFO(r.out << r.err);
    CHECK(r.status == 1);
    CHECK(contains(r.out, "\"layer.weight\""));
    for (const auto& b : bad) {
        INFO(b.file);
        CHECK(contains(r.err, b.file));
        CHECK(contains(r.err, b.message));
    }
}

TEST_CASE("cli: NaN/Inf-only, 0-d and empty tensors are analysed or reported, never crash", "[corrupt][cli]") {
    const float inf = std::numeric_limits<float>::infinity();
    const std::string f = write_file(
        "special.safetensors",
        safetensors(R"({"allnan":{"dtype":"F32","shape":[3],"data_offsets":[0,12]},)"
                    R"("allinf":{"dtype":"F32","shape":[3],"data_offsets":[12,24]},)"
                    R"("scalar":{"dtype":"F32","shape":[],"data_offsets":[24,28]},)"
                    R"("empty":{"dtype":"F32","shape":[0],"data_offsets":[28,28]}})",
                    raw(std::vector<float>{std::nanf(""), std::nanf(""), std::nanf(""), inf, -inf, inf, 3.0f})));
    const Run r = cli("inspect --json " + f);
    INFO(r.out << r.err);
    CHECK(r.status == 1);  // the empty tensor is an input that could not be analysed
    for (const char* n : {"\"allnan\"", "\"allinf\"", "\"scalar\""}) CHECK(contains(r.out, n));
    CHECK(contains(r.err, "empty"));
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
}

TEST_CASE("cli: validate names a truncated or lying .npy and exits 2", "[corrupt][cli]") {
    const std::string x = write_file(
        "x.npy", npy("{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", raw(std::vector<float>{1.0f, 2.0f})));
    const std::string codes = npy("{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", "\x38\x40");
    const std::string cut = write_file("cut.npy", codes.substr(0, codes.size() - 1));
    const std::string lie = write_file(
        "lie.npy",
        npy("{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296, 16), }", "\x38\x40"));
    for (const auto& out : {cut, lie}) {
        const Run r = cli("validate --to e4m3 --profile cuda-satfinite --input " + x + " --output " + out);
        INFO(r.out << r.err);
        CHECK(r.status == 2);
        CHECK(contains(r.err, out));
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    }
}

TEST_CASE("cli: sweep and replay name a corrupt trace", "[corrupt][cli]") {
    const std::string t = write_file("bad.csv", "step,tensor,amax\n0,t,1\n1,t,-5\n");
    for (const char* cmd : {"sweep", "replay"}) {
        const Run r = cli(std::string(cmd) + " " + t);
        INFO(cmd << "\n" << r.out << r.err);
        CHECK(r.status != 0);
        CHECK(contains(r.err, t + ":3:"));
    }
}
