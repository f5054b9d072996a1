// The safetensors reader on files built byte by byte here: every dtype, chunked reads, and
// headers that lie (sizes, offsets, overlaps, lengths).
#include <algorithm>

#include "dump_test_util.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;
using namespace fp8kit::dump::test;

namespace {

std::string u64le(std::uint64_t v) {
    std::string s(8, '\0');
    for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
}

std::string st_file(const std::string& header, const std::string& data) { return u64le(header.size()) + header + data; }

template <class T>
std::string raw(const std::vector<T>& v) {
    return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(T));
}

// Builds a valid file entry by entry.
struct Builder {
    std::string header = "{\"__metadata__\":{\"format\":\"pt\"}";
    std::string data;
    void add(const std::string& name, const std::string& dtype, const std::string& shape, const std::string& bytes) {
        header += ",\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
                  std::to_string(data.size()) + "," + std::to_string(data.size() + bytes.size()) + "]}";
        data += bytes;
    }
    std::string file() const { return st_file(header + "}", data); }
};

Collected read_all(Source& src, const TensorInfo& t, std::size_t chunk_bytes) {
    return collect([&](const ChunkFn& fn) { src.read(t, fn); }, t, chunk_bytes);
}

std::string open_error(const std::string& name, const std::string& bytes) {
    write_bytes(scratch(name), bytes);
    try {
        open_source(scratch(name));
    } catch (const DumpError& e) {
        CHECK(e.file == scratch(name));
        CHECK(e.name.empty());
        return e.what();
    }
    return "(opened without error)";
}

}  // namespace

TEST_CASE("safetensors: every float dtype, bit for bit", "[dump]") {
    const std::vector<float> f32 = {0.5f, -3.25f, 65504.0f, 1e-40f, -1.0f, 7.0f};
    const std::vector<double> f64 = {1e300, -0.0};
    const std::vector<std::uint16_t> f16 = {0x3c00, 0x8001, 0x7c00, 0x7e00};
    const std::vector<std::uint16_t> bf16 = {0x3f80, 0xbf80, 0x0001, 0x7fc0};
    Builder b;
    b.add("step_5/model.layers.0.mlp.weight", "F32", "[2,3]", raw(f32));
    b.add("d", "F64", "[2]", raw(f64));
    b.add("h.grad", "F16", "[4]", raw(f16));
    b.add("b", "BF16", "[2,2]", raw(bf16));
    b.add("q8", "F8_E4M3", "[3]", std::string("\x38\x7e\xbc", 3));
    b.add("q5", "F8_E5M2", "[2]", std::string("\x3c\x7c", 2));
    b.add("q8uz", "F8_E4M3FNUZ", "[2]", std::string("\x40\x80", 2));
    b.add("q5uz", "F8_E5M2FNUZ", "[1]", std::string("\x7f", 1));
    b.add("e8", "F8_E8M0", "[2]", std::string("\x7f\x00", 2));
    b.add("ids", "I64", "[1]", u64le(7));
    b.add("scalar", "F32", "[]", raw(std::vector<float>{42.0f}));
    write_bytes(scratch("ok.safetensors"), b.file());

    const auto src = open_source(scratch("ok.safetensors"));
    CHECK(src->errors().empty());
    REQUIRE(src->notes().size() == 1);
    CHECK(src->notes()[0].name == "ids");
    CHECK_THAT(src->notes()[0].message, Catch::Contains("I64"));
    const auto& ts = src->tensors();
    REQUIRE(ts.size() == 10);
    // Listed in data order.
    CHECK(ts[0].name == "step_5/model.layers.0.mlp.weight");
    CHECK(ts[9].name == "scalar");

    const auto* t = find(ts, "step_5/model.layers.0.mlp.weight");
    CHECK(t->shape == std::vector<std::uint64_t>{2, 3});
    CHECK(t->storage == "F32");
    CHECK(t->step == 5);
    CHECK(t->step_guessed);
    CHECK(t->role == Role::weight);
    CHECK(t->role_guessed);
    auto c = read_all(*src, *t, 1 << 20);
    for (std::size_t i = 0; i < f32.size(); ++i) CHECK(c.bits[i] == f32_bits(f32[i]));
    c = read_all(*src, *find(ts, "d"), 1 << 20);
    CHECK(c.bits == std::vector<std::uint64_t>{f64_bits(1e300), f64_bits(-0.0)});
    t = find(ts, "h.grad");
    CHECK(t->role == Role::gradient);
    CHECK(t->dtype == DType::f16);
    c = read_all(*src, *t, 1 << 20);
    CHECK(c.bits == std::vector<std::uint64_t>{0x3c00, 0x8001, 0x7c00, 0x7e00});
    t = find(ts, "b");
    CHECK(t->dtype == DType::bf16);
    CHECK(t->shape == std::vector<std::uint64_t>{2, 2});
    c = read_all(*src, *t, 1 << 20);
    CHECK(c.bits == std::vector<std::uint64_t>{0x3f80, 0xbf80, 0x0001, 0x7fc0});
    // FP8 codes -> float32 bits (1, 448, -1.5; 1, inf; 1, NaN; 57344; 1, 2^-127).
    CHECK(read_all(*src, *find(ts, "q8"), 1 << 20).bits ==
          std::vector<std::uint64_t>{0x3f800000, 0x43e00000, 0xbfc00000});
    CHECK(read_all(*src, *find(ts, "q5"), 1 << 20).bits == std::vector<std::uint64_t>{0x3f800000, 0x7f800000});
    CHECK(read_all(*src, *find(ts, "q8uz"), 1 << 20).bits == std::vector<std::uint64_t>{0x3f800000, 0x7fc00000});
    CHECK(read_all(*src, *find(ts, "q5uz"), 1 << 20).bits == std::vector<std::uint64_t>{0x47600000});
    CHECK(read_all(*src, *find(ts, "e8"), 1 << 20).bits == std::vector<std::uint64_t>{0x3f800000, 0x00400000});
    CHECK(find(ts, "e8")->dtype == DType::e8m0);
    t = find(ts, "scalar");
    CHECK(t->shape.empty());
    CHECK(t->numel == 1);
}

TEST_CASE("safetensors: large tensors stream in bounded chunks", "[dump]") {
    std::vector<float> big(100003);
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) - 5000.5f;
    std::vector<std::uint8_t> codes(70001);
    for (std::size_t i = 0; i < codes.size(); ++i) codes[i] = static_cast<std::uint8_t>(i * 7);
    Builder b;
    b.add("big", "F32", "[100003]", raw(big));
    b.add("codes", "F8_E5M2", "[70001]", raw(codes));
    write_bytes(scratch("big.safetensors"), b.file());
    ReadOptions opts;
    opts.chunk_bytes = 4096;
    const auto src = open_source(scratch("big.safetensors"), opts);
    const auto c = read_all(*src, src->tensors()[0], opts.chunk_bytes);
    CHECK(c.chunks == (big.size() + 1023) / 1024);
    std::size_t bad = 0;
    for (std::size_t i = 0; i < big.size(); ++i) bad += c.bits[i] != f32_bits(big[i]);
    CHECK(bad == 0);
    // E5M2 codes decode to float32 by widening: sign, 5 exponent bits rebias 15 -> 127,
    // 2 mantissa bits shifted up; subnormals, Inf and NaN by hand.
    const auto d = read_all(*src, src->tensors()[1], opts.chunk_bytes);
    bad = 0;
    for (std::size_t i = 0; i < codes.size(); ++i) {
        const std::uint32_t s = (codes[i] >> 7) << 31, e = (codes[i] >> 2) & 31, m = codes[i] & 3;
        std::uint32_t want;
        if (e == 31)
            want = s | (m ? 0x7fc00000u : 0x7f800000u);
        else if (e == 0)
            want = s | f32_bits(static_cast<float>(m) * 0x1p-16f);
        else
            want = s | ((e - 15 + 127) << 23) | (m << 21);
        bad += d.bits[i] != want;
    }
    CHECK(bad == 0);
}

TEST_CASE("safetensors: bad headers are file errors", "[dump]") {
    CHECK_THAT(open_error("short.safetensors", "abc"), Catch::Contains("shorter than the 8-byte header length"));
    CHECK_THAT(open_error("huge.safetensors", u64le(200'000'000) + "{}"), Catch::Contains("exceeds the 100 MB limit"));
    CHECK_THAT(open_error("past.safetensors", u64le(1000) + "{\"a\":1}"),
               Catch::Contains("header length 1000 runs past the end of the file"));
    CHECK_THAT(open_error("nojson.safetensors", st_file("{not json", "")), Catch::Contains("header is not JSON"));
    CHECK_THAT(open_error("array.safetensors", st_file("[1,2]", "")), Catch::Contains("not a JSON object"));
    // A number too large for a double is nlohmann's out_of_range, not a parse_error (found by
    // fuzz_safetensors; it escaped as std::terminate before).
    CHECK_THAT(open_error("bignum.safetensors", st_file("{\"a\":{\"dtype\":\"F32\",\"shape\":1E2380}}", "")),
               Catch::Contains("header is not JSON"));
    // Not named .safetensors and no JSON: neither format.
    CHECK_THAT(open_error("blob.bin", u64le(3) + "xyz"), Catch::Contains("neither an HDF5 file"));
}

TEST_CASE("safetensors: lying entries are tensor errors, the others still read", "[dump]") {
    const std::string good = raw(std::vector<float>{1.0f, 2.0f});
    std::string h = "{";
    h += "\"good\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},";
    h += "\"past_end\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]},";
    h += "\"lying_size\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[8,16]},";
    h += "\"overflow\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[8,16]},";
    h += "\"reversed\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,8]},";
    h += "\"negative\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[8,16]},";
    h += "\"empty\":{\"dtype\":\"F32\",\"shape\":[0,5],\"data_offsets\":[16,16]},";
    h += "\"f4\":{\"dtype\":\"F4\",\"shape\":[2],\"data_offsets\":[8,9]},";
    h += "\"no_offsets\":{\"dtype\":\"F32\",\"shape\":[2]},";
    h += "\"overlap_a\":{\"dtype\":\"BF16\",\"shape\":[2],\"data_offsets\":[8,12]},";
    h += "\"overlap_b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[10,14]},";
    h += "\"after\":{\"dtype\":\"F8_E4M3\",\"shape\":[2],\"data_offsets\":[14,16]}";
    h += "}";
    write_bytes(scratch("lies.safetensors"), st_file(h, good + std::string("\x00\x00\x80\x3f\x00\x00\x38\x38", 8)));
    const auto src = open_source(scratch("lies.safetensors"));
    std::vector<std::string> names;
    for (const auto& t : src->tensors()) names.push_back(t.name);
    CHECK(names == std::vector<std::string>{"good", "after"});
    auto err = [&](const char* name) -> std::string {
        const auto* p = find(src->errors(), name);
        return p ? p->message : "(no error recorded)";
    };
    CHECK_THAT(err("past_end"), Catch::Contains("run past the end of the data (16 bytes)"));
    CHECK_THAT(err("lying_size"), Catch::Contains("needs 12 bytes but data_offsets [8, 16] hold 8"));
    CHECK_THAT(err("overflow"), Catch::Contains("overflows 64 bits"));
    CHECK_THAT(err("reversed"), Catch::Contains("end before they begin"));
    CHECK_THAT(err("negative"), Catch::Contains("negative"));
    CHECK_THAT(err("empty"), Catch::Contains("empty tensor"));
    CHECK_THAT(err("f4"), Catch::Contains("unsupported dtype 'F4'"));
    CHECK_THAT(err("no_offsets"), Catch::Contains("lacks dtype, shape or data_offsets"));
    CHECK_THAT(err("overlap_a"), Catch::Contains("overlap those of 'overlap_b'"));
    CHECK_THAT(err("overlap_b"), Catch::Contains("overlap those of 'overlap_a'"));
    CHECK(src->errors().size() == 10);
    CHECK(read_all(*src, src->tensors()[0], 1 << 20).bits ==
          std::vector<std::uint64_t>{f32_bits(1.0f), f32_bits(2.0f)});
    CHECK(read_all(*src, src->tensors()[1], 1 << 20).bits == std::vector<std::uint64_t>{0x3f800000, 0x3f800000});
}

TEST_CASE("safetensors: a file truncated after listing fails on read, naming the tensor", "[dump]") {
    Builder b;
    b.add("x", "F32", "[1000]", std::string(4000, '\0'));
    const std::string bytes = b.file();
    write_bytes(scratch("shrinks.safetensors"), bytes);
    const auto src = open_source(scratch("shrinks.safetensors"));
    REQUIRE(src->tensors().size() == 1);
    write_bytes(scratch("shrinks.safetensors"), bytes.substr(0, bytes.size() - 100));
    CHECK_THROWS_WITH(read_all(*src, src->tensors()[0], 1 << 20),
                      Catch::Contains("shrinks.safetensors: x: cannot read bytes at offset") &&
                          Catch::Contains("unexpected end of file"));
    // Truncated before opening: the offsets run past the end.
    const auto again = open_source(scratch("shrinks.safetensors"));
    CHECK(again->tensors().empty());
    REQUIRE(again->errors().size() == 1);
    CHECK_THAT(again->errors()[0].message, Catch::Contains("truncated file?"));
}

TEST_CASE("safetensors: map gives a large tensor's bytes in place, and nothing once the file is cut", "[dump]") {
    // 8 MiB: above the size from which tensors are mapped (io/chunk_task.hpp, kMapMin).
    std::string data(std::size_t(8) << 20, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + 3);
    Builder b;
    b.add("big", "F32", "[2097152]", data);
    const std::string bytes = b.file();
    write_bytes(scratch("mapped.safetensors"), bytes);
    const auto src = open_source(scratch("mapped.safetensors"));
    REQUIRE(src->tensors().size() == 1);
    {
        const auto view = src->map(src->tensors()[0]);
        REQUIRE(view);
        CHECK(std::memcmp(view.get(), data.data(), data.size()) == 0);
    }
    // Cut after listing: no mapping (touching bytes past the end would raise SIGBUS); read() says why.
    write_bytes(scratch("mapped.safetensors"), bytes.substr(0, bytes.size() - 100));
    CHECK(src->map(src->tensors()[0]) == nullptr);
    CHECK_THROWS_WITH(read_all(*src, src->tensors()[0], 1 << 20), Catch::Contains("unexpected end of file"));
}
