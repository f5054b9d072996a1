// The input gate (fp8kit/io/gate.hpp; docs/hardening.md, "Reading inputs"): regular files only,
// anything else refused without blocking; limits named; the one quoting function; a folder read
// as its documented layout.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>

#include <catch2/catch.hpp>

#include "fp8kit/io/dump.hpp"
#include "fp8kit/io/gate.hpp"
#include "fp8kit/io/npy.hpp"
#include "fp8kit/recipes.hpp"
#include "scratch_dir.hpp"

using namespace fp8kit;

namespace {

template <class F>
std::string message_of(F&& f) {
    try {
        f();
    } catch (const std::exception& e) {
        return e.what();
    }
    return "(no exception)";
}

}  // namespace

TEST_CASE("input gate: a FIFO, a device and a folder are refused without blocking, naming the file", "[gate]") {
    fp8kit::test::ScratchDir dir("gate");
    const std::string fifo = dir.file("fifo");
    REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
    // No writer ever opens the FIFO: an open() for reading would wait for ever.
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(message_of([&] { io::open_input(fifo); }) ==
          fifo + ": a FIFO, not a regular file: not read (fp8kit reads inputs from regular files only)");
    CHECK_THAT(message_of([&] { io::check_input(fifo); }), Catch::Contains("a FIFO, not a regular file"));
    CHECK_THAT(message_of([&] { io::read_input_text(fifo, 100, "a test file"); }), Catch::Contains("a FIFO"));
    CHECK_THAT(message_of([&] { read_npy(fifo); }), Catch::Contains("fifo: a FIFO, not a regular file"));
    CHECK_THAT(message_of([&] { parse_recipe(fifo); }), Catch::Contains("fifo: a FIFO, not a regular file"));
    CHECK_THAT(message_of([&] { dump::open_source(fifo); }), Catch::Contains("fifo: a FIFO, not a regular file"));
    CHECK_FALSE(dump::is_dump_file(fifo));
    CHECK_FALSE(dump::is_hdf5_file(fifo));
    CHECK_THAT(message_of([&] { io::open_input("/dev/zero"); }),
               Catch::Contains("/dev/zero: a device, not a regular file"));
    CHECK_THAT(message_of([&] { io::open_input(dir.path()); }), Catch::Contains(": a directory, not a regular file"));
    CHECK_THAT(message_of([&] { io::open_input(dir.file("none")); }),
               Catch::Contains("none: cannot open: No such file or directory"));
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10));

    std::vector<dump::Problem> problems;
    const auto files = dump::expand_inputs({fifo, "/dev/zero"}, problems);
    CHECK(files.empty());
    REQUIRE(problems.size() == 2);
    CHECK_THAT(problems[0].describe(), Catch::Contains("a FIFO, not a regular file"));
    CHECK_THAT(problems[1].describe(), Catch::Contains("a device, not a regular file"));
}

TEST_CASE("input gate: a regular file is opened read-only, blocking reads, with its size; limits are named", "[gate]") {
    fp8kit::test::ScratchDir dir("gate");
    const std::string f = dir.file("r.json");
    std::ofstream(f) << "{\"a\": 1}";
    io::InputFile in = io::open_input(f);
    CHECK(in.size() == 8);
    CHECK((::fcntl(in.fd(), F_GETFL) & (O_ACCMODE | O_NONBLOCK)) == O_RDONLY);
    CHECK((::fcntl(in.fd(), F_GETFD) & FD_CLOEXEC) != 0);
    CHECK(io::read_input_text(f, 8, "a test file") == "{\"a\": 1}");
    CHECK(message_of([&] { io::read_input_text(f, 7, "a test file"); }) ==
          f + ": 8 bytes, over the 7-byte limit of a test file");
}

TEST_CASE("io::quoted: the one quoting function escapes and cuts", "[gate]") {
    CHECK(io::quoted("a\nb\x1b[2J") == "a\\nb\\e[2J");
    const std::string big(10 << 20, 'e');
    const std::string q = io::quoted(big, 64);
    CHECK(q == std::string(64, 'e') + "... (10485760 bytes)");
    // Escaped after the cut: at most 4 bytes per byte kept, and printable() changes nothing more.
    CHECK(io::quoted(std::string(300, '\x01'), 10).size() == 40 + std::string("... (300 bytes)").size());
    CHECK(io::printable(io::quoted("x\ty\r")) == io::quoted("x\ty\r"));
    dump::Problem p{"f.h5", std::string(1 << 20, 'n'), "m"};
    CHECK(p.describe().size() < 300);
}

TEST_CASE("input gate: a TransformerEngine tensor_dumps folder is read as its documented layout", "[gate]") {
    const std::string te = std::string(FP8KIT_DATA_DIR) + "/te/dumps";
    const auto from_log_dir = dump::folder_files(te);
    const auto from_dumps = dump::folder_files(te + "/tensor_dumps/");
    CHECK(from_log_dir.size() == 5);
    CHECK(from_dumps == from_log_dir);
    std::vector<dump::Problem> problems;
    CHECK(dump::expand_inputs({te + "/tensor_dumps"}, problems) == from_dumps);
    CHECK(problems.empty());
    fp8kit::test::ScratchDir dir("gate");
    const auto none = dump::expand_inputs({dir.path()}, problems);
    CHECK(none.empty());
    REQUIRE(problems.size() == 1);
    CHECK_THAT(problems[0].message, Catch::Contains("/rank_*/*.pt'"));
    CHECK_THAT(problems[0].message, Catch::Contains("/rank_*/iter_*/*.pt'"));
}

TEST_CASE("input gate: what a folder's layout matches is an input, never silently left out", "[gate]") {
    // A folder named *.pt and a symbolic link loop in a rank folder were dropped: "0 file(s)",
    // exit 0 (tests/cli/adversarial.sh). Now each is an input the reader refuses by name.
    fp8kit::test::ScratchDir dir("gate_layout");
    const std::string r = dir.path() + "/tensor_dumps/rank_0";
    REQUIRE(::mkdir((dir.path() + "/tensor_dumps").c_str(), 0755) == 0);
    REQUIRE(::mkdir(r.c_str(), 0755) == 0);
    REQUIRE(::mkdir((r + "/a_iter_000001.pt").c_str(), 0755) == 0);
    REQUIRE(::symlink("loop_b.pt", (r + "/loop_a.pt").c_str()) == 0);
    REQUIRE(::symlink("loop_a.pt", (r + "/loop_b.pt").c_str()) == 0);
    std::vector<dump::Problem> problems;
    const auto files = dump::expand_inputs({dir.path()}, problems);
    CHECK(files.size() == 3);
    CHECK(problems.empty());
    const dump::Dump d(files, {}, {});
    CHECK(d.tensors().empty());
    REQUIRE(d.errors().size() == 3);
    for (const auto& e : d.errors()) CHECK_THAT(e.file, Catch::StartsWith(r + "/"));
}

TEST_CASE("a dump that holds no tensor is a failed input", "[gate]") {
    // A safetensors file whose header is {}: was "0 tensors from 1 file", exit 0.
    fp8kit::test::ScratchDir dir("gate_empty");
    const std::string f = dir.path() + "/empty.safetensors";
    {
        std::ofstream o(f, std::ios::binary);
        const char header[] = {2, 0, 0, 0, 0, 0, 0, 0, '{', '}'};
        o.write(header, sizeof header);
    }
    const dump::Dump d({f}, {}, {});
    CHECK(d.tensors().empty());
    REQUIRE(d.errors().size() == 1);
    CHECK(d.errors()[0].file == f);
    CHECK_THAT(d.errors()[0].message, Catch::Contains("holds no tensor"));
}
