// The profiles against the libraries' own outputs (tests/golden/README.md says how they were made):
// every float16 and bfloat16 input byte for byte, every float32 input slice CRC for slice CRC.
#include <catch2/catch.hpp>
#include <zlib.h>

#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "fp8kit/convert/names.hpp"
#include "fp8kit/convert/quantize.hpp"

using namespace fp8kit;

namespace {

std::vector<std::uint8_t> read_file(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    REQUIRE(f.good());
    return {std::istreambuf_iterator<char>(f), {}};
}

struct Lib {
    const char* file;
    Profile profile;
};
const Lib kLibs[] = {
    {"ml_dtypes", Profile::ml_dtypes}, {"torch", Profile::torch}, {"cuda-satfinite-gpu", Profile::cuda_satfinite}};

std::vector<std::uint8_t> ours16(Wide src, Format f, Profile p) {
    std::vector<std::uint8_t> out(65536);
    encode_bit_range(f, src, 0, out.size(), out.data(), emu::profile_policy(p, f).policy);
    return out;
}

// The formats added for FP4/FP6 and the rest of ml_dtypes: golden data from ml_dtypes only (the
// cuda_fp4.h / cuda_fp6.h host functions are compiled into test_cuda_host_oracle.cpp instead).
const Format kNewFormats[] = {Format::e2m1, Format::e2m3,        Format::e3m2,
                              Format::e3m4, Format::e4m3b11fnuz, Format::e4m3ieee};
bool is_new(Format f) {
    for (Format n : kNewFormats)
        if (n == f) return true;
    return false;
}

std::size_t first_difference(const std::vector<std::uint8_t>& a, const std::vector<std::uint8_t>& b) {
    for (std::size_t i = 0; i < a.size(); ++i)
        if (a[i] != b[i]) return i;
    return a.size();
}

}  // namespace

TEST_CASE("profiles equal their library on all float16 and bfloat16 inputs", "[emu][golden]") {
    int files = 0;
    for (Wide src : {Wide::f16, Wide::bf16}) {
        for (const Lib& lib : kLibs) {
            for (Format f : emu::kAllFormats) {
                if (f == Format::e8m0 || !emu::profile_policy(lib.profile, f).ok) continue;
                if (is_new(f) && lib.profile != Profile::ml_dtypes) continue;
                const std::string path = std::string(FP8KIT_GOLDEN_DIR) + "/" + std::string(name(src)) + "_" +
                                         std::string(name(f)) + "_" + lib.file + ".bin";
                CAPTURE(path);
                const auto golden = read_file(path);
                REQUIRE(golden.size() == 65536);
                const auto ours = ours16(src, f, lib.profile);
                const std::size_t d = first_difference(ours, golden);
                INFO("first difference at input 0x" << std::hex << d);
                CHECK(d == ours.size());
                ++files;
            }
        }
    }
    CHECK(files == 2 * (4 + 4 + 2 + 6));
}

TEST_CASE("torch on the GPU differs from torch on the CPU only on negative float16 NaNs", "[emu][golden]") {
    for (Format f : {Format::e4m3, Format::e5m2}) {
        const auto gpu = read_file(std::string(FP8KIT_GOLDEN_DIR) + "/f16_" + std::string(name(f)) + "_torch-cuda.bin");
        const auto ours = ours16(Wide::f16, f, Profile::torch);
        const auto cuda_like = ours16(Wide::f16, f, Profile::cuda_nosat);  // canonical NaN 0x7F
        int differing = 0;
        for (std::size_t i = 0; i < 65536; ++i) {
            const bool negative_nan = i > 0xFC00;  // 0xFC01..0xFFFF: sign set, exponent all ones, mantissa != 0
            if (ours[i] != gpu[i]) {
                ++differing;
                CHECK(negative_nan);
                CHECK(gpu[i] == cuda_like[i]);
            }
        }
        CHECK(differing == 1023);
    }
}

namespace {

// Every table of f32_crc32.json whose format passes `want`, recomputed slice by slice; returns
// how many tables were checked.
template <class Want>
int check_f32_tables(Want want) {
    std::ifstream jf(std::string(FP8KIT_GOLDEN_DIR) + "/f32_crc32.json");
    REQUIRE(jf.good());
    const auto j = nlohmann::json::parse(jf);
    const std::size_t slice = j.at("slice_inputs").get<std::size_t>();
    REQUIRE(slice == (std::size_t{1} << 24));
    std::vector<std::uint8_t> buf(slice);
    int tables = 0;
    for (const auto& [key, crcs] : j.at("tables").items()) {
        const auto slash = key.find('/');
        const std::string lib = key.substr(0, slash);
        const Format f = *parse_format(key.substr(slash + 1));
        if (!want(f)) continue;
        const Profile p = lib == "ml_dtypes" ? Profile::ml_dtypes
                          : lib == "torch"   ? Profile::torch
                                             : Profile::cuda_satfinite;
        const Policy policy = emu::profile_policy(p, f).policy;
        REQUIRE(crcs.size() == 256u);
        int bad = 0;
        for (std::size_t s = 0; s < 256; ++s) {
            encode_bit_range(f, Wide::f32, s * slice, slice, buf.data(), policy);
            const unsigned long crc = crc32(0L, buf.data(), static_cast<uInt>(slice));
            if (fmt::format("{:08x}", crc) != crcs[s].template get<std::string>()) {
                if (bad++ < 3)
                    FAIL_CHECK(key << ": slice " << s << " (inputs 0x" << std::hex << s * slice << "..) differs");
            }
        }
        CHECK(bad == 0);
        ++tables;
    }
    return tables;
}

}  // namespace

TEST_CASE("profiles equal their library on all 2^32 float32 inputs (slice CRCs)", "[emu][golden][exhaustive]") {
    CHECK(check_f32_tables([](Format f) { return !is_new(f); }) == 10);
}

TEST_CASE("ml_dtypes profiles of FP4/FP6 and the other 8-bit types on all 2^32 float32 inputs",
          "[emu][golden][exhaustive]") {
    CHECK(check_f32_tables([](Format f) { return is_new(f); }) == 6);
}
