// checkpoint check on the mixture-of-experts fixtures the producers' libraries wrote
// (data/checkpoints/moe_*, scripts/fixtures/make_moe_checkpoints.py: a Qwen3-MoE model of 4 experts,
// ModelOpt 0.47 exporting its fused experts per expert, compressed-tensors 0.20 on per-expert
// linears; a Mixtral of 4 experts under ModelOpt): every expert weight re-quantises bit for bit, and faults planted in one expert of a
// copy (under a ScratchDir) are found and named on that expert only.
#include <catch2/catch.hpp>

#include <cstring>
#include <string>

#include "checkpoint/fixture_edit.hpp"

using namespace fp8kit::test::ckpt;

namespace {

const std::string kMoe = std::string(FP8KIT_DATA_DIR) + "/checkpoints/";
const std::string kOrig = kMoe + "moe_original";
const std::string kE = "model.layers.0.mlp.experts.";

std::size_t failures(const Report& r, const std::string& check, const std::string& tensor = "") {
    std::size_t n = 0;
    for (const auto& f : r.findings) n += f.failed && f.check == check && (tensor.empty() || f.tensor == tensor);
    return n;
}
std::size_t notes(const Report& r, const std::string& check) {
    std::size_t n = 0;
    for (const auto& f : r.findings) n += !f.failed && f.check == check;
    return n;
}

}  // namespace

TEST_CASE("every MoE fixture re-quantises bit for bit, every expert", "[checkpoint][moe]") {
    const char* fixtures[] = {"moe_modelopt_fp8", "moe_modelopt_fp8_block", "moe_modelopt_nvfp4", "moe_modelopt_mxfp4",
                              "moe_ct_fp8",       "moe_ct_fp8_block",       "moe_ct_nvfp4",       "moe_ct_mxfp4"};
    for (const char* f : fixtures) {
        INFO(f);
        const Report r = check(kMoe + f, kOrig);
        CHECK(r.comparisons.size() == 16);  // q k v o + 4 experts x (gate up down)
        std::size_t experts = 0;
        for (const auto& c : r.comparisons) {
            INFO(c.module);
            experts += c.module.rfind(kE, 0) == 0;
            CHECK(c.verdict == "bit-exact");
            CHECK(c.code_mismatches == 0);
            CHECK(c.scale_mismatches == 0);
        }
        CHECK(experts == 12);
        CHECK(failures(r, "missing expert input_scale") == 0);
        CHECK_FALSE(r.failed());
    }
}

TEST_CASE("Mixtral under ModelOpt: experts exported as w1/w3/w2, w1 and w3 share the fused amax", "[checkpoint][moe]") {
    const std::string orig = std::string(FP8KIT_DATA_DIR) + "/checkpoints/moe_mixtral_original";
    for (const char* f : {"moe_mixtral_modelopt_fp8", "moe_mixtral_modelopt_nvfp4"}) {
        INFO(f);
        const Report r = check(kMoe + f, orig);
        CHECK(r.comparisons.size() == 16);
        std::size_t w13 = 0;
        for (const auto& c : r.comparisons) {
            INFO(c.module);
            CHECK(c.verdict == "bit-exact");
            w13 += c.module.find(".block_sparse_moe.experts.") != std::string::npos &&
                   (c.module.substr(c.module.size() - 3) == ".w1" || c.module.substr(c.module.size() - 3) == ".w3");
        }
        CHECK(w13 == 8);
        CHECK(notes(r, "expert gate/up scales differ") == 0);
        CHECK_FALSE(r.failed());
    }
}

TEST_CASE("ModelOpt's fused-expert sharing: one input_scale per projection, gate/up one weight amax",
          "[checkpoint][moe]") {
    // _QuantFusedExperts: one input quantizer per projection for all experts, one weight
    // quantizer per expert over the fused gate_up slice (modelopt plugins/huggingface.py).
    for (const char* f : {"moe_modelopt_fp8", "moe_modelopt_nvfp4"}) {
        INFO(f);
        const Report r = check(kMoe + f);
        CHECK(notes(r, "expert input scales differ") == 0);
        CHECK(notes(r, "expert gate/up scales differ") == 0);
    }
    // compressed-tensors quantises each expert's linears on their own: the scales differ.
    const Report ct = check(kMoe + "moe_ct_fp8");
    CHECK(notes(ct, "expert input scales differ") == 3);  // gate, up, down
    CHECK(notes(ct, "expert gate/up scales differ") > 0);
    CHECK_FALSE(ct.failed());  // notes only
    SECTION("an expert's gate weight scale of its own half (not the fused amax) is a different amax") {
        fp8kit::test::ScratchDir s("moe");
        const auto d = planted(s, "moe_modelopt_fp8", [](Tensors& t) {
            auto& g = t.at(kE + "0.gate_proj.weight_scale");
            float v;
            std::memcpy(&v, g.bytes.data(), 4);
            set_f32(g, v * 0.75f);
        });
        const Report r = check(d, kOrig);
        CHECK(comparison(r, kE + "0.gate_proj").verdict == "different amax");
        CHECK(comparison(r, kE + "0.up_proj").verdict == "bit-exact");
        CHECK(notes(r, "expert gate/up scales differ") == 1);
        CHECK(r.failed());
    }
}

TEST_CASE("faults planted in one expert are found and named", "[checkpoint][moe]") {
    fp8kit::test::ScratchDir s("moe");
    SECTION("one expert's input_scale removed (vLLM #45212)") {
        for (const char* f : {"moe_modelopt_fp8", "moe_modelopt_nvfp4", "moe_ct_fp8"}) {
            INFO(f);
            const auto d = planted(s, f, [](Tensors& t) { REQUIRE(t.erase(kE + "1.down_proj.input_scale") == 1); });
            const Report r = check(d);
            CHECK(failures(r, "missing expert input_scale", kE + "1.down_proj.input_scale") == 1);
            CHECK(failures(r, "missing expert input_scale") == 1);  // that expert only
            CHECK(r.failed());
            std::filesystem::remove_all(d);
        }
    }
    SECTION("one expert's input_scale zero") {
        const auto d =
            planted(s, "moe_modelopt_fp8", [](Tensors& t) { set_f32(t.at(kE + "2.gate_proj.input_scale"), 0.0f); });
        const Report r = check(d);
        CHECK(failures(r, "input scale", kE + "2.gate_proj.input_scale") == 1);
        CHECK(failures(r, "input scale") == 1);
    }
    SECTION("one expert's weight scale zero (FP8 per tensor, ModelOpt)") {
        const auto d =
            planted(s, "moe_modelopt_fp8", [](Tensors& t) { set_f32(t.at(kE + "3.down_proj.weight_scale"), 0.0f); });
        const Report r = check(d);
        CHECK(failures(r, "zero scale", kE + "3.down_proj.weight_scale") == 1);
        CHECK(failures(r, "zero scale") == 1);
    }
    SECTION("one expert's E4M3 block scale zero (NVFP4, compressed-tensors)") {
        const auto d = planted(s, "moe_ct_nvfp4", [](Tensors& t) { t.at(kE + "2.up_proj.weight_scale").bytes[9] = 0; });
        const Report r = check(d, kOrig);
        CHECK(failures(r, "zero scale", kE + "2.up_proj.weight_scale") == 1);
        CHECK(comparison(r, kE + "2.up_proj").verdict == "different amax");
        CHECK(comparison(r, kE + "2.gate_proj").verdict == "bit-exact");
    }
    SECTION("one flipped code in one expert (FP8 block, ModelOpt)") {
        const auto d =
            planted(s, "moe_modelopt_fp8_block", [](Tensors& t) { t.at(kE + "1.up_proj.weight").bytes[321] ^= 0x40; });
        const Report r = check(d, kOrig);
        const auto& c = comparison(r, kE + "1.up_proj");
        CHECK(c.code_mismatches == 1);
        CHECK(c.verdict == "codes differ");
        std::size_t exact = 0;
        for (const auto& k : r.comparisons) exact += k.verdict == "bit-exact";
        CHECK(exact == 15);
        CHECK(r.failed());
    }
    SECTION("one flipped code in one expert (MXFP4, compressed-tensors: packed nibbles)") {
        const auto d =
            planted(s, "moe_ct_mxfp4", [](Tensors& t) { t.at(kE + "0.down_proj.weight_packed").bytes[77] ^= 0x04; });
        const Report r = check(d, kOrig);
        const auto& c = comparison(r, kE + "0.down_proj");
        CHECK(c.code_mismatches == 1);
        CHECK(c.verdict != "bit-exact");
        CHECK(comparison(r, kE + "1.down_proj").verdict == "bit-exact");
    }
}

namespace {

// Restacks the per-expert tensors <kE><e>.<proj>.<suffix> (e = 0..3) of a library-written fixture
// into one stacked tensor model.layers.0.mlp.experts.<proj>.<suffix> of shape [4, ...] (the
// layout of compressed-tensors' 3-D expert weights, magnitude_expert_pruner.py): the codes and
// scales stay the library's own bytes, only their arrangement changes.
void stack(Tensors& t, const std::string& proj, const std::string& suffix) {
    Tensor s;
    for (int e = 0; e < 4; ++e) {
        auto node = t.extract(kE + std::to_string(e) + "." + proj + "." + suffix);
        REQUIRE(!node.empty());
        if (e == 0) {
            s.dtype = node.mapped().dtype;
            s.shape = nlohmann::json::array({4});
            for (const auto& d : node.mapped().shape) s.shape.push_back(d);
        }
        s.bytes.insert(s.bytes.end(), node.mapped().bytes.begin(), node.mapped().bytes.end());
    }
    t["model.layers.0.mlp.experts." + proj + "." + suffix] = s;
}

}  // namespace

TEST_CASE("stacked 3-D expert weights [E, rows, cols] against a per-expert original", "[checkpoint][moe]") {
    fp8kit::test::ScratchDir s("moe");
    const std::string kStacked = "model.layers.0.mlp.experts.down_proj";
    struct Case {
        const char* fixture;
        std::vector<const char*> suffixes;
        Scheme scheme;
    };
    const Case cases[] = {{"moe_modelopt_fp8", {"weight", "weight_scale", "input_scale"}, Scheme::fp8_tensor},
                          {"moe_ct_fp8", {"weight", "weight_scale", "input_scale"}, Scheme::fp8_tensor},
                          {"moe_ct_fp8_block", {"weight", "weight_scale"}, Scheme::fp8_block},
                          {"moe_modelopt_mxfp4", {"weight", "weight_scale"}, Scheme::mxfp4},
                          {"moe_ct_mxfp4", {"weight_packed", "weight_scale"}, Scheme::mxfp4}};
    for (const auto& c : cases) {
        INFO(c.fixture);
        fp8kit::test::ScratchDir good_dir("moe"), bad_dir("moe");
        const auto d = planted(good_dir, c.fixture, [&](Tensors& t) {
            for (const char* suf : c.suffixes) stack(t, "down_proj", suf);
        });
        const Report r = check(d, kOrig);
        const Layer* L = nullptr;
        for (const auto& l : r.layers)
            if (l.module == kStacked) L = &l;
        REQUIRE(L != nullptr);
        CHECK(L->scheme == c.scheme);
        CHECK(L->experts == 4);
        CHECK(comparison(r, kStacked).verdict == "bit-exact");
        CHECK(comparison(r, kStacked).elements == 4 * 128 * 64);
        CHECK(r.comparisons.size() == 13);  // 16 - 4 per-expert down_proj + 1 stacked
        CHECK_FALSE(r.failed());
        // One flipped code in expert 2's slice of the stack.
        const auto bad = planted(bad_dir, c.fixture, [&](Tensors& t) {
            for (const char* suf : c.suffixes) stack(t, "down_proj", suf);
            auto& w = t.at(kStacked + "." + c.suffixes[0]).bytes;
            w[w.size() / 2 + 5] ^= c.scheme == Scheme::mxfp4 ? 0x02 : 0x40;
        });
        const auto& k = comparison(check(bad, kOrig), kStacked);
        CHECK(k.code_mismatches == 1);
        CHECK(k.verdict != "bit-exact");
    }
    SECTION("a zero scale of one expert in a stack of per-expert scales") {
        const auto d = planted(s, "moe_modelopt_fp8", [&](Tensors& t) {
            for (const char* suf : {"weight", "weight_scale", "input_scale"}) stack(t, "down_proj", suf);
            std::memset(t.at(kStacked + ".weight_scale").bytes.data() + 4, 0, 4);  // expert 1
        });
        const Report r = check(d);
        CHECK(failures(r, "zero scale", kStacked + ".weight_scale") == 1);
    }
    SECTION("a zero input_scale of one expert in a stack of per-expert input scales") {
        const auto d = planted(s, "moe_modelopt_fp8", [&](Tensors& t) {
            for (const char* suf : {"weight", "weight_scale", "input_scale"}) stack(t, "down_proj", suf);
            std::memset(t.at(kStacked + ".input_scale").bytes.data() + 8, 0, 4);  // expert 2
        });
        const Report r = check(d);
        REQUIRE(failures(r, "input scale", kStacked + ".input_scale") == 1);
        for (const auto& f : r.findings)
            if (f.check == "input scale") CHECK(f.message.find("expert 2") != std::string::npos);
    }
    // 64 rows per expert in 128-row blocks: a block would cross an expert's edge.
    SECTION("stacked FP8 blocks across expert edges: said to be unchecked") {
        const auto d = planted(s, "moe_ct_fp8_block", [&](Tensors& t) {
            for (const char* suf : {"weight", "weight_scale"}) stack(t, "gate_proj", suf);
        });
        const Report r = check(d, kOrig);
        bool noted = false;
        for (const auto& f : r.findings)
            noted = noted || (f.check == "not checked" && f.tensor == "model.layers.0.mlp.experts.gate_proj");
        CHECK(noted);
        CHECK_FALSE(r.failed());
    }
    SECTION("stacked NVFP4 with a global scale per expert: said to be unchecked, never passed as checked") {
        const auto d = planted(s, "moe_modelopt_nvfp4", [&](Tensors& t) {
            for (const char* suf : {"weight", "weight_scale", "weight_scale_2", "input_scale"})
                stack(t, "down_proj", suf);
        });
        const Report r = check(d, kOrig);
        bool noted = false;
        for (const auto& f : r.findings) noted = noted || (f.check == "not checked" && f.tensor == kStacked);
        CHECK(noted);
        for (const auto& k : r.comparisons) CHECK(k.module != kStacked);
    }
}
