// TransformerEngine DumpTensors files (data/te/, written by real torch.save through
// scripts/fixtures/make_te_fixtures.py on the GPU machine): both path layouts, high_precision values equal
// to torch's own view of them (data/te/EXPECTED.txt), the quantized entry's codes, and every
// hostile file refused with one line naming the file and what was refused.
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>

#include <catch2/catch.hpp>

#include "dump_test_util.hpp"
#include "fp8kit/io/te_debug.hpp"
#include "fp8kit/validate.hpp"

using namespace fp8kit;
using namespace fp8kit::dump;

namespace {

const std::string kTe = std::string(FP8KIT_DATA_DIR) + "/te/";
const std::string kRank0 = kTe + "dumps/tensor_dumps/rank_0/";
const std::string kRank1 = kTe + "dumps/tensor_dumps/rank_1/iter_000020/";

// EXPECTED.txt "hp <path> [shape] <float32 bits in hex>...", as torch read them.
std::map<std::string, std::vector<std::uint32_t>> expected_hp() {
    std::map<std::string, std::vector<std::uint32_t>> out;
    std::ifstream in(kTe + "EXPECTED.txt");
    std::string line;
    while (std::getline(in, line)) {
        if (line.rfind("hp ", 0) != 0) continue;
        std::istringstream s(line.substr(3));
        std::string path, word;
        s >> path;
        while (s >> word && word.back() != ']') {}
        auto& v = out[path];
        while (s >> word) v.push_back(static_cast<std::uint32_t>(std::stoul(word, nullptr, 16)));
    }
    REQUIRE(out.size() == 4);
    return out;
}

std::vector<std::uint32_t> as_f32_bits(Source& src, const TensorInfo& t) {
    std::vector<std::uint32_t> out(t.numel);
    src.read(t, [&](const Chunk& c) {
        for (std::size_t i = 0; i < c.count; ++i) {
            std::uint32_t b = 0;
            if (c.wide == Wide::f32)
                std::memcpy(&b, static_cast<const char*>(c.bits) + 4 * i, 4);
            else if (c.wide == Wide::bf16)
                b = std::uint32_t(static_cast<const std::uint16_t*>(c.bits)[i]) << 16;
            else
                FAIL("unexpected chunk type");
            out[c.first + i] = b;
        }
    });
    return out;
}

std::string refusal(const std::string& path) {
    try {
        auto src = open_source(path);
        std::string all;
        for (const auto& p : src->errors()) all += p.describe() + "\n";
        return all;
    } catch (const DumpError& e) {
        return e.what();
    }
}

}  // namespace

TEST_CASE("te: DumpTensors paths in both layouts", "[dump]") {
    auto a = te::parse_dump_path("log/tensor_dumps/rank_3/model_layers_0_self_attention_proj_wgrad_iter_000120.pt");
    REQUIRE(a);
    CHECK(a->layer == "model_layers_0_self_attention_proj");
    CHECK(a->tensor == "wgrad");
    CHECK(a->step == 120);
    CHECK(a->rank == 3);
    auto b = te::parse_dump_path("/x/tensor_dumps/rank_12/iter_000007/decoder_1_fc1_activation.pt");
    REQUIRE(b);
    CHECK(b->layer == "decoder_1_fc1");
    CHECK(b->tensor == "activation");
    CHECK(b->step == 7);
    CHECK(b->rank == 12);
    CHECK(te::role_of("dgrad") == Role::gradient);
    CHECK(te::role_of("output") == Role::activation);
    CHECK_FALSE(te::parse_dump_path("x/rank_0/fc1_activation.pt"));        // no step
    CHECK_FALSE(te::parse_dump_path("x/rank_0/fc1_bias_iter_000001.pt"));  // not a TE tensor name
}

TEST_CASE("te: torch.save files list both entries, step, rank and role from the path", "[dump]") {
    auto src = open_source(kRank0 + "layers_0_fc1_activation_iter_000010.pt");
    REQUIRE(src->errors().empty());
    REQUIRE(src->tensors().size() == 2);
    const TensorInfo& hp = src->tensors()[0];
    const TensorInfo& q = src->tensors()[1];
    CHECK(hp.name == "layers_0_fc1_activation/high_precision");
    CHECK(hp.dtype == DType::f32);
    CHECK(hp.shape == std::vector<std::uint64_t>{4, 32});
    CHECK(hp.step == 10);
    CHECK(hp.role == Role::activation);
    CHECK(q.name == "layers_0_fc1_activation/quantized");
    CHECK(q.dtype == DType::e4m3);
    CHECK(q.shape == hp.shape);

    auto old = open_source(kRank1 + "layers_0_fc2_gradient.pt");
    REQUIRE(old->tensors().size() == 2);
    CHECK(old->tensors()[0].dtype == DType::bf16);
    CHECK(old->tensors()[0].step == 20);
    CHECK(old->tensors()[0].role == Role::gradient);
    CHECK(old->tensors()[1].dtype == DType::e5m2);
}

TEST_CASE("te: high_precision values equal torch's, strided views included", "[dump]") {
    const auto expected = expected_hp();
    for (const auto& [rel, bits] : expected) {
        INFO(rel);
        auto src = open_source(kTe + rel);
        const TensorInfo* hp = nullptr;
        for (const auto& t : src->tensors())
            if (t.name.size() >= 14 && t.name.compare(t.name.size() - 14, 14, "high_precision") == 0) hp = &t;
        REQUIRE(hp);
        CHECK(as_f32_bits(*src, *hp) == bits);
    }
}

TEST_CASE("te: every hostile file is refused with one line, nothing runs", "[dump]") {
    const std::string sys = refusal(kTe + "hostile/hostile_os_system.pt");
    CHECK_THAT(sys, Catch::Contains("hostile_os_system.pt") && Catch::Contains("refused global posix.system"));
    const std::string ev = refusal(kTe + "hostile/hostile_eval.pt");
    CHECK_THAT(ev, Catch::Contains("refused global __builtin__.eval"));
    CHECK_THAT(refusal(kTe + "hostile/hostile_escape.pt"), Catch::Contains("escapes the archive's folder"));
    CHECK_THAT(refusal(kTe + "hostile/hostile_short_storage.pt"),
               Catch::Contains("storage shorter than its tensor") && Catch::Contains("high_precision"));
    for (const std::string& s : {sys, ev}) {
        CHECK(s.find('\n') == std::string::npos);
        CHECK(s.find(".pt: /") == std::string::npos);  // the file named once
    }
}

TEST_CASE("te: TE's Float8Tensor codes against fp8kit's reference", "[dump]") {
    // Codes written by torch's own float8 casts of x * scale (power-of-two scale, so
    // fl32(1 / scale_inv) == scale): bit-exact under the reference.
    auto a = check_te_quantized(kRank0 + "layers_0_fc1_activation_iter_000010.pt");
    REQUIRE(a);
    CHECK(a->name == "layers_0_fc1_activation");
    CHECK(a->format == Format::e4m3);
    CHECK(a->report.total == 128);
    CHECK(a->report.exact());
    auto g = check_te_quantized(kRank1 + "layers_0_fc2_gradient.pt");
    REQUIRE(g);
    CHECK(g->format == Format::e5m2);
    CHECK(g->report.from == Wide::bf16);
    CHECK(g->report.exact());
    // The fixture flipped the low bit of code 5: exactly one mismatch, at [0, 5].
    auto w = check_te_quantized(kRank0 + "layers_0_fc1_weight_iter_000010.pt");
    REQUIRE(w);
    CHECK(w->report.mismatches == 1);
    std::uint64_t first = ~0ull;
    for (const auto& c : w->report.classes)
        for (const auto& e : c.examples) first = std::min(first, e.index);
    CHECK(first == 5);
    CHECK(w->report.position(first) == "[0, 5]");
    // Only one of the two entries: nothing to compare.
    CHECK_FALSE(check_te_quantized(kRank0 + "layers_1_proj_dgrad_iter_000030.pt"));
    CHECK_FALSE(check_te_quantized(kRank1 + "layers_1_self_attention_output.pt"));
}
