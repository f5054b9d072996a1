// The .npy reader and `fp8kit validate` on files written here by a minimal .npy writer (not the
// reader's code): exit 0 when bit-exact, 1 on mismatches, 2 with one line naming the bad file.
#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "fp8kit/io/npy.hpp"
#include "naive.hpp"
#include "scratch_dir.hpp"

namespace {

// One temporary directory per test process, removed at exit (tests/scratch_dir.hpp).
std::string tmp_dir() {
    struct Tag {};
    return fp8kit::test::process_scratch<Tag>("fp8kit_validate").path();
}

// Writes a .npy file: magic, version, little-endian header length, the dict padded with spaces
// to a multiple of 64 bytes and ending in '\n', then the bytes.
std::string write_npy(const std::string& name, const std::string& descr, const std::string& shape, const void* data,
                      std::size_t bytes, int version = 1, bool fortran = false) {
    std::string dict =
        "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape + ", }";
    const std::size_t len_bytes = version == 1 ? 2 : 4;
    while ((8 + len_bytes + dict.size() + 1) % 64 != 0) dict += ' ';
    dict += '\n';
    std::string out = "\x93NUMPY";
    out += static_cast<char>(version);
    out += '\0';
    for (std::size_t i = 0; i < len_bytes; ++i) out += static_cast<char>((dict.size() >> (8 * i)) & 0xFF);
    out += dict;
    out.append(static_cast<const char*>(data), bytes);
    const std::string path = tmp_dir() + "/" + name;
    std::ofstream(path, std::ios::binary) << out;
    return path;
}

std::string write_raw(const std::string& name, const void* data, std::size_t bytes) {
    const std::string path = tmp_dir() + "/" + name;
    std::ofstream(path, std::ios::binary).write(static_cast<const char*>(data), static_cast<std::streamsize>(bytes));
    return path;
}

struct Run {
    int status;
    std::string out, err;
};

Run cli(const std::string& args) {
    const std::string o = tmp_dir() + "/stdout.txt", e = tmp_dir() + "/stderr.txt";
    const int rc = std::system((std::string(FP8KIT_CLI) + " " + args + " >" + o + " 2>" + e).c_str());
    auto slurp = [](const std::string& p) {
        std::ifstream f(p);
        std::stringstream ss;
        ss << f.rdbuf();
        return ss.str();
    };
    return {WIFEXITED(rc) ? WEXITSTATUS(rc) : -1, slurp(o), slurp(e)};
}

std::vector<float> sample_inputs() {
    std::vector<float> x;
    for (int i = 0; i < 4096; ++i) x.push_back(std::ldexp(static_cast<float>(i % 97) - 48.0f, i % 9 - 4) + 0.0625f);
    for (double mid : {1.0625, 1.1875, 3.25, 0.0029296875}) {
        x.push_back(static_cast<float>(mid));
        x.push_back(static_cast<float>(-mid));
    }
    return x;
}

}  // namespace

TEST_CASE("npy: versions 1, 2 and 3 and their shapes", "[validate][npy]") {
    const std::vector<float> v{1, 2, 3, 4, 5, 6};
    for (int version : {1, 2, 3}) {
        const auto p = write_npy("v" + std::to_string(version) + ".npy", "<f4", "(2, 3)", v.data(), 24, version);
        const auto a = fp8kit::read_npy(p);
        CHECK(a.header.major == version);
        CHECK(a.header.descr == "<f4");
        CHECK(a.header.shape == std::vector<std::size_t>{2, 3});
        REQUIRE(a.data.size() == 24);
        CHECK(std::memcmp(a.data.data(), v.data(), 24) == 0);
    }
    const auto one = fp8kit::read_npy_header(write_npy("one.npy", "|u1", "(6,)", v.data(), 6));
    CHECK(one.shape == std::vector<std::size_t>{6});
    CHECK(one.kind == 'u');
    const auto scalar = fp8kit::read_npy_header(write_npy("scalar.npy", "<f8", "()", v.data(), 8));
    CHECK(scalar.shape.empty());
    CHECK(scalar.element_count() == 1);
}

TEST_CASE("npy: bad headers are refused with the file's name", "[validate][npy]") {
    const std::vector<float> v{1, 2, 3, 4};
    auto refuses = [](const std::string& path, const std::string& why) {
        try {
            fp8kit::read_npy(path);
            FAIL("accepted " << path);
        } catch (const fp8kit::NpyError& e) {
            const std::string m = e.what();
            INFO(m);
            CHECK(m.find(path) != std::string::npos);
            CHECK(m.find(why) != std::string::npos);
        }
    };
    refuses(write_npy("fortran.npy", "<f4", "(2, 2)", v.data(), 16, 1, true), "fortran_order");
    refuses(write_npy("short.npy", "<f4", "(5,)", v.data(), 16), "wrong size");
    refuses(write_npy("big.npy", ">f4", "(4,)", v.data(), 16), "big-endian");
    refuses(write_raw("notnpy.npy", v.data(), 16), "not a .npy file");
    // A header cut off in the middle of its dictionary.
    const auto full = write_npy("full.npy", "<f4", "(4,)", v.data(), 16);
    std::ifstream in(full, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    refuses(write_raw("truncated.npy", bytes.data(), 30), "truncated");
}

TEST_CASE("cli: validate exit codes and classes", "[validate][cli]") {
    const auto x = sample_inputs();
    std::vector<std::uint8_t> good, away;
    naive::Kernel k{}, a{};
    a.round = naive::Round::away;
    for (float v : x) {
        good.push_back(naive::convert(k, v));
        away.push_back(naive::convert(a, v));
    }
    const std::string shape = "(" + std::to_string(x.size()) + ",)";
    const auto xin = write_npy("x.npy", "<f4", shape, x.data(), x.size() * 4);
    const auto yok = write_npy("y_ok.npy", "|u1", shape, good.data(), good.size());
    const auto yaway = write_npy("y_away.npy", "|V1", shape, away.data(), away.size());
    const std::string base = "validate --to e4m3 --profile cuda-satfinite --input " + xin;

    auto ok = cli(base + " --output " + yok);
    INFO(ok.out << ok.err);
    CHECK(ok.status == 0);
    CHECK(ok.out.find("BIT-EXACT") != std::string::npos);
    CHECK(ok.out.find("profile cuda-satfinite") != std::string::npos);

    auto bad = cli(base + " --output " + yaway + " --json --examples 2");
    INFO(bad.out << bad.err);
    CHECK(bad.status == 1);
    std::size_t ties = 0;
    for (std::size_t i = 0; i < x.size(); ++i) ties += good[i] != away[i];
    REQUIRE(ties > 0);
    CHECK(bad.out.find("\"tie\": {\n   \"count\": " + std::to_string(ties) + ",") != std::string::npos);
    CHECK(bad.out.find("\"mismatches\": " + std::to_string(ties) + ",") != std::string::npos);
    CHECK(bad.out.find("equals nearest-away, saturate-all, NaN any") != std::string::npos);

    // The same bytes as raw files with --dtype and --shape.
    const auto xraw = write_raw("x.bin", x.data(), x.size() * 4);
    const auto yraw = write_raw("y.bin", away.data(), away.size());
    auto raw = cli("validate --to e4m3 --profile cuda-satfinite --input " + xraw + " --dtype f32 --output " + yraw);
    CHECK(raw.status == 1);
    CHECK(raw.out.find("tie: " + std::to_string(ties) + "\n") != std::string::npos);
}

TEST_CASE("cli: bad files exit 2 with one line naming the file", "[validate][cli]") {
    const auto x = sample_inputs();
    std::vector<std::uint8_t> codes(x.size(), 0);
    const std::string shape = "(" + std::to_string(x.size()) + ",)";
    const auto xin = write_npy("x2.npy", "<f4", shape, x.data(), x.size() * 4);
    const std::string base = "validate --to e4m3 --profile cuda-satfinite ";
    auto expect2 = [&](const std::string& args, const std::string& names, const std::string& why) {
        const Run r = cli(base + args);
        INFO(args << "\n" << r.out << r.err);
        CHECK(r.status == 2);
        CHECK(r.err.find(names) != std::string::npos);
        CHECK(r.err.find(why) != std::string::npos);
        CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    };
    // Output one element short (raw: the size does not fit the input's shape).
    const auto short_raw = write_raw("short.bin", codes.data(), codes.size() - 1);
    expect2("--input " + xin + " --output " + short_raw, short_raw, "wrong size");
    // .npy whose data is shorter than its header says.
    const auto short_npy = write_npy("short_codes.npy", "|u1", shape, codes.data(), codes.size() - 3);
    expect2("--input " + xin + " --output " + short_npy, short_npy, "wrong size");
    // Output stored as float32 instead of one-byte codes.
    const auto f32_out = write_npy("codes_f4.npy", "<f4", shape, x.data(), x.size() * 4);
    expect2("--input " + xin + " --output " + f32_out, f32_out, "wrong dtype");
    // Input given as codes.
    const auto u8_in = write_npy("x_u1.npy", "|u1", shape, codes.data(), codes.size());
    expect2("--input " + u8_in + " --output " + u8_in, u8_in, "wrong dtype");
    // Shapes differ although the element counts agree.
    const auto reshaped =
        write_npy("codes_2d.npy", "|u1", "(2, " + std::to_string(x.size() / 2) + ")", codes.data(), codes.size());
    expect2("--input " + xin + " --output " + reshaped, "shape mismatch", reshaped);
    // A truncated header.
    std::ifstream in(xin, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto cut = write_raw("cut.npy", bytes.data(), 40);
    expect2("--input " + cut + " --output " + u8_in, cut, "truncated");
    // Fortran order, an unsupported dtype, a missing file, a missing HDF5 dataset.
    const auto fort = write_npy("fortran2.npy", "<f4", "(2, 2)", x.data(), 16, 1, true);
    expect2("--input " + fort + " --output " + u8_in, fort, "fortran_order");
    const auto i4 = write_npy("x_i4.npy", "<i4", shape, x.data(), x.size() * 4);
    expect2("--input " + i4 + " --output " + u8_in, i4, "unsupported dtype");
    expect2("--input /nonexistent/x.npy --output " + u8_in, "/nonexistent/x.npy", "cannot open");
    const std::string h5 = std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_dump.h5:/no/such";
    expect2("--input " + h5 + " --output " + u8_in, "/no/such", "no dataset");
    // Block scales of the wrong count.
    const std::vector<float> scales(3, 1.0f);
    const auto sc = write_npy("scales.npy", "<f4", "(3,)", scales.data(), 12);
    expect2("--input " + xin + " --output " + u8_in + " --scales " + sc + " --block 1x128", sc, "wrong size");
}

TEST_CASE("cli: an HDF5 dump written by torch is bit-exact under the torch profile", "[validate][cli]") {
    const std::string f = std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_dump.h5";
    const Run r = cli("validate --to e4m3 --profile torch --input " + f + ":/step_000000/lm_head/weight --output " + f +
                      ":/step_000000/lm_head/weight_fp8");
    INFO(r.out << r.err);
    CHECK(r.status == 0);
    CHECK(r.out.find("16384 bit-exact, 0 mismatches") != std::string::npos);
    // The same weights against a truncating reference: mismatches, exit 1.
    const Run t = cli("validate --to e4m3 --round toward-zero --overflow no-saturate --nan signed-all-ones --input " +
                      f + ":/step_000000/lm_head/weight --output " + f + ":/step_000000/lm_head/weight_fp8");
    CHECK(t.status == 1);
}
