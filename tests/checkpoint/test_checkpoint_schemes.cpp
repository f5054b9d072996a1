// ModelOpt FP8 per-channel/per-token, MXFP8 (ModelOpt and compressed-tensors) and ModelOpt W4A8
// (INT4 AWQ + FP8), on checkpoints the libraries wrote themselves
// (scripts/fixtures/make_quant_checkpoints_more.py: nvidia-modelopt 0.47.0, compressed-tensors 0.20.0):
// every weight re-quantises bit for bit, then planted faults are found and named.
#include <catch2/catch.hpp>

#include <cmath>

#include "checkpoint/fixture_edit.hpp"

using namespace fp8kit::test::ckpt;

namespace {

// W4A8_AWQ: ModelOpt quantises AWQ-smoothed weights; the exporter's own input, saved by the script.
const std::string kSmoothed = kData + "modelopt_w4a8_smoothed";

void set_byte_f32(Tensor& t, std::size_t i, float v) { std::memcpy(t.bytes.data() + 4 * i, &v, 4); }

}  // namespace

TEST_CASE("FP8 per-channel, MXFP8 and W4A8 fixtures re-quantise bit for bit", "[checkpoint]") {
    for (const char* f : {"modelopt_fp8_pcpt", "modelopt_mxfp8", "ct_mxfp8", "modelopt_w4a8_max"}) {
        INFO(f);
        all_bit_exact(check(kData + f, kOriginal));
    }
    INFO("modelopt_w4a8 against the weights ModelOpt quantised");
    all_bit_exact(check(kData + "modelopt_w4a8", kSmoothed));
}

TEST_CASE("schemes, groups and excluded modules of the new layouts", "[checkpoint]") {
    auto quantised = [](const Folder& F, Scheme s) {
        std::size_t n = 0;
        for (const auto& L : F.layers()) {
            if (L.module == "lm_head") CHECK(L.excluded);
            if (L.scheme == Scheme::none) continue;
            CHECK(L.scheme == s);
            CHECK(L.scale_convention == Convention::dequant);
            ++n;
        }
        return n;
    };
    const Folder pc(kData + "modelopt_fp8_pcpt");
    CHECK(pc.quant_algo == "FP8_PER_CHANNEL_PER_TOKEN");
    CHECK(quantised(pc, Scheme::fp8_channel) == 7);
    for (const char* f : {"modelopt_mxfp8", "ct_mxfp8"}) {
        const Folder mx(kData + f);
        CHECK(quantised(mx, Scheme::mxfp8) == 7);
        for (const auto& L : mx.layers())
            if (L.scheme == Scheme::mxfp8) CHECK(L.block_cols == 32);
    }
    const Folder w(kData + "modelopt_w4a8");
    CHECK(w.quant_algo == "W4A8_AWQ");
    CHECK(quantised(w, Scheme::w4a8) == 7);
    for (const auto& L : w.layers()) {
        if (L.scheme != Scheme::w4a8) continue;
        INFO(L.module);
        CHECK(L.block_cols == 64);  // hf_quant_config group_size
        CHECK(L.global_scale == L.module + ".weight_scale_2");
        CHECK(L.input_scale == L.module + ".input_scale");
        // AWQ's pre_quant_scale stays on o_proj and down_proj; q/k/v's and gate/up's are folded
        // into the layernorms by the exporter.
        CHECK(L.pre_quant_scale.empty() == (L.module != kO && L.module != kDown));
        if (L.module == kDown) CHECK((L.rows == 128 && L.cols == 192));
    }
}

TEST_CASE("W4A8 AWQ against the unsmoothed original says why it cannot match", "[checkpoint]") {
    // Every scale differs and the weights are the original's up to one factor per input column:
    // each layer is noted, none fails (a correct file exits 0).
    const Report r = check(kData + "modelopt_w4a8", kOriginal);
    CHECK_FALSE(r.failed());
    std::size_t notes = 0, not_replayable = 0;
    for (const auto& f : r.findings) notes += f.check == "awq smoothing" && !f.failed;
    for (const auto& f : r.findings) not_replayable += f.check == "not replayable" && !f.failed;
    CHECK(notes == 7);
    CHECK(not_replayable == 7);
    CHECK(r.comparisons.empty());
    // Without smoothing (algorithm max) there is no such note and the original is the reference.
    for (const auto& f : check(kData + "modelopt_w4a8_max", kOriginal).findings) CHECK(f.check != "awq smoothing");
}

TEST_CASE("planted faults in FP8 per-channel checkpoints", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    const std::string f = "modelopt_fp8_pcpt";
    SECTION("one flipped code") {
        const auto d = planted(s, f, [](Tensors& t) { t.at(kK + ".weight").bytes[300] ^= 0x40; });
        const auto& c = comparison(check(d, kOriginal), kK);
        CHECK(c.code_mismatches == 1);
        CHECK(c.verdict == "codes differ");
    }
    SECTION("zero channel scale") {
        const auto d = planted(s, f, [](Tensors& t) { set_byte_f32(t.at(kQ + ".weight_scale"), 5, 0.0f); });
        CHECK(has_failure(check(d), "zero scale", kQ + ".weight_scale"));
    }
    SECTION("NaN channel scale") {
        const auto d = planted(s, f, [](Tensors& t) { set_byte_f32(t.at(kQ + ".weight_scale"), 9, NAN); });
        CHECK(has_failure(check(d), "scale finite", kQ + ".weight_scale"));
    }
    SECTION("one scale per row too few") {
        const auto d = planted(s, f, [](Tensors& t) {
            auto& sc = t.at(kQ + ".weight_scale");
            sc.bytes.resize(sc.bytes.size() - 4);
            sc.shape = {127};
        });
        const Report r = check(d);
        CHECK(has_failure(r, "structure", kQ + ".weight_scale"));
        for (const auto& L : r.layers)
            if (L.module == kQ) CHECK(L.scheme == Scheme::fp8_channel);  // from quant_algo, not the shape
    }
    SECTION("a channel scale of a different amax") {
        const auto d = planted(s, f, [](Tensors& t) { set_byte_f32(t.at(kO + ".weight_scale"), 3, 0.01f); });
        CHECK(comparison(check(d, kOriginal), kO).verdict == "different amax");
    }
}

TEST_CASE("planted faults in MXFP8 checkpoints", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    for (const char* f : {"modelopt_mxfp8", "ct_mxfp8"}) {
        INFO(f);
        SECTION(std::string("one flipped code, ") + f) {
            const auto d = planted(s, f, [](Tensors& t) { t.at(kDown + ".weight").bytes[1000] ^= 0x40; });
            const auto& c = comparison(check(d, kOriginal), kDown);
            CHECK(c.code_mismatches == 1);
            CHECK(c.verdict == "codes differ");
        }
        SECTION(std::string("NaN E8M0 scale (0xFF), ") + f) {
            const auto d = planted(s, f, [](Tensors& t) { t.at(kQ + ".weight_scale").bytes[2] = 0xFF; });
            CHECK(has_failure(check(d), "scale finite", kQ + ".weight_scale"));
        }
        SECTION(std::string("a scale one power of two up, ") + f) {
            const auto d = planted(s, f, [](Tensors& t) { ++t.at(kQ + ".weight_scale").bytes[2]; });
            const auto& c = comparison(check(d, kOriginal), kQ);
            CHECK(c.verdict == "different amax");
            CHECK(c.scale_mismatches == 1);
        }
        SECTION(std::string("scale grid of 16-element blocks, ") + f) {
            const auto d = planted(s, f, [](Tensors& t) {
                auto& sc = t.at(kQ + ".weight_scale");
                sc.bytes.resize(sc.bytes.size() * 2);
                sc.shape = {128, 8};
            });
            CHECK(has_failure(check(d), "structure", kQ + ".weight_scale"));
        }
    }
}

TEST_CASE("planted faults in W4A8 checkpoints", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    const std::string f = "modelopt_w4a8";
    SECTION("one flipped INT4 code (sign bit of row 1's nibble)") {
        const auto d = planted(s, f, [](Tensors& t) { t.at(kK + ".weight").bytes[5] ^= 0x80; });
        const auto& c = comparison(check(d, kSmoothed), kK);
        CHECK(c.code_mismatches == 1);
        CHECK(c.verdict == "codes differ");
    }
    SECTION("one INT4 code one step off") {
        const auto d = planted(s, f, [](Tensors& t) {
            auto& b = t.at(kK + ".weight").bytes[7];
            const int lo = b & 0xF;
            b = static_cast<std::uint8_t>((b & 0xF0) | (lo == 7 ? 6 : (lo + 1) & 0xF));
        });
        const auto& c = comparison(check(d, kSmoothed), kK);
        CHECK(c.code_mismatches == 1);
        CHECK(c.verdict == "rounding");
    }
    SECTION("rows swapped within each byte (nibble order)") {
        const auto d = planted(s, f, [](Tensors& t) {
            for (auto& b : t.at(kO + ".weight").bytes) b = static_cast<std::uint8_t>((b >> 4) | (b << 4));
        });
        CHECK(comparison(check(d, kSmoothed), kO).verdict == "nibble order");
    }
    SECTION("zero group scale") {
        const auto d = planted(s, f, [](Tensors& t) { set_byte_f32(t.at(kQ + ".weight_scale"), 3, 0.0f); });
        CHECK(has_failure(check(d), "zero scale", kQ + ".weight_scale"));
    }
    SECTION("NaN group scale") {
        const auto d = planted(s, f, [](Tensors& t) { set_byte_f32(t.at(kQ + ".weight_scale"), 3, NAN); });
        CHECK(has_failure(check(d), "scale finite", kQ + ".weight_scale"));
    }
    SECTION("zero and halved weight_scale_2") {
        const auto z = planted(s, f, [](Tensors& t) { set_f32(t.at(kDown + ".weight_scale_2"), 0.0f); });
        CHECK(has_failure(check(z), "scale finite", kDown + ".weight_scale_2"));
        fp8kit::test::ScratchDir s2("ckpt");
        const auto h = planted(s2, f, [](Tensors& t) {
            auto& g = t.at(kDown + ".weight_scale_2");
            set_f32(g, get_f32(g) * 0.5f);
        });
        CHECK(has_failure(check(h), "w4a8 scale above fp8 stage", kDown + ".weight_scale"));
        CHECK(comparison(check(h, kSmoothed), kDown).verdict == "different amax");
    }
    SECTION("group scales of 128 columns where the config says 64") {
        const auto d = planted(s, f, [](Tensors& t) {
            auto& sc = t.at(kQ + ".weight_scale");
            sc.bytes.resize(sc.bytes.size() / 2);
            sc.shape = {128, 1};
        });
        CHECK(has_failure(check(d), "structure", kQ + ".weight_scale"));
    }
    SECTION("negative pre_quant_scale") {
        const auto d =
            planted(s, f, [](Tensors& t) { t.at(kO + ".pre_quant_scale").bytes[1] ^= 0x80; });  // bfloat16 sign bit
        CHECK(has_failure(check(d), "pre_quant_scale", kO + ".pre_quant_scale"));
    }
}

TEST_CASE("W4A8 read from config.json alone: the group from the scale's shape", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "modelopt_w4a8", [](Tensors&) {});
    fs::remove(fs::path(d) / "hf_quant_config.json");  // config.json's quantization_config has no group_size
    const Folder F(d);
    CHECK(F.producer() == Producer::modelopt);
    std::size_t n = 0;
    for (const auto& L : F.layers()) {
        if (L.module == "lm_head") CHECK(L.excluded);  // config.json's "ignore"
        if (L.scheme != Scheme::w4a8) continue;
        ++n;
        CHECK(L.block_cols == 64);
    }
    CHECK(n == 7);
    all_bit_exact(check(d, kSmoothed));
}

TEST_CASE("A malformed quantized_layers is an error naming the folder and the entry", "[checkpoint]") {
    // ModelOpt's MIXED_PRECISION form is {module: {"quant_algo": ..., "group_size": N}}; a reader
    // that skipped a malformed entry would check that layer under the folder's scheme instead.
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "modelopt_nvfp4_fp8_mha", [](Tensors&) {});
    const fs::path hq = fs::path(d) / "hf_quant_config.json";
    nlohmann::json j;
    std::ifstream(hq) >> j;
    const nlohmann::json good = j;
    const std::string q = "model.layers.0.self_attn.q_proj";
    const std::pair<std::function<void(nlohmann::json&)>, const char*> cases[] = {
        {[](nlohmann::json& l) { l = nlohmann::json::array(); },
         "quantized_layers is not an object of modules: a JSON array"},
        {[&](nlohmann::json& l) { l[q] = "NVFP4"; }, "no quant_algo string"},
        {[&](nlohmann::json& l) { l[q].erase("quant_algo"); }, "no quant_algo string"},
        {[&](nlohmann::json& l) { l[q]["group_size"] = -16; }, "group_size is not a whole number from 1"},
        {[&](nlohmann::json& l) { l[q]["group_size"] = 0; }, "group_size is not a whole number from 1"},
    };
    for (const auto& [edit, want] : cases) {
        j = good;
        edit(j["quantization"]["quantized_layers"]);
        std::ofstream(hq) << j.dump();
        INFO(want);
        try {
            Folder F(d);
            FAIL("no error");
        } catch (const CheckpointError& e) {
            CHECK_THAT(e.what(), Catch::Contains(want) && Catch::Contains("modelopt_nvfp4_fp8_mha"));
            if (std::string(want) != "quantized_layers is not an object of modules: a JSON array")
                CHECK_THAT(e.what(), Catch::Contains(q));
        }
    }
    std::ofstream(hq) << good.dump();
    CHECK_NOTHROW(Folder(d));
}
