// checkpoint check on the fixtures the producers' libraries wrote (data/checkpoints, written by
// scripts/fixtures/make_quant_checkpoints.py with compressed-tensors 0.20.0 and nvidia-modelopt 0.47.0):
// every weight must re-quantise bit for bit; then faults are planted in copies made here (under
// a ScratchDir, removed also on failure) and each must be found and named.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>

#include "checkpoint/fixture_edit.hpp"

using namespace fp8kit::test::ckpt;

TEST_CASE("every fixture re-quantises bit for bit under its producer's preset", "[checkpoint]") {
    const char* fixtures[] = {"ct_fp8",   "ct_fp8_dynamic", "ct_fp8_block",       "ct_nvfp4",       "ct_nvfp4a16",
                              "ct_mxfp4", "modelopt_fp8",   "modelopt_fp8_block", "modelopt_nvfp4", "modelopt_mxfp4"};
    for (const char* f : fixtures) {
        INFO(f);
        all_bit_exact(check(kData + f, kOriginal));
    }
}

TEST_CASE("layers, schemes, conventions and excluded modules", "[checkpoint]") {
    const Folder ct(kData + "ct_nvfp4");
    CHECK(ct.producer() == Producer::compressed_tensors);
    const Folder mo(kData + "modelopt_nvfp4");
    CHECK(mo.producer() == Producer::modelopt);
    for (const Folder* F : {&ct, &mo}) {
        std::size_t quantised = 0, excluded = 0;
        for (const auto& L : F->layers()) {
            quantised += L.scheme == Scheme::nvfp4;
            excluded += L.excluded;
            if (L.scheme == Scheme::nvfp4)
                CHECK(L.global_convention == (F == &ct ? Convention::reciprocal : Convention::dequant));
            if (L.module == "lm_head") CHECK(L.excluded);
        }
        CHECK(quantised == 7);
        CHECK(excluded >= 1);
    }
    const Folder blk(kData + "ct_fp8_block");
    for (const auto& L : blk.layers())
        if (L.scheme != Scheme::none) CHECK(L.scheme == Scheme::fp8_block);
    const Folder ch(kData + "ct_fp8_dynamic");
    for (const auto& L : ch.layers())
        if (L.scheme != Scheme::none) CHECK(L.scheme == Scheme::fp8_channel);
}

TEST_CASE("ModelOpt KV scales: names vLLM loads and names it drops", "[checkpoint]") {
    const Report ok = check(kData + "modelopt_fp8");
    REQUIRE(ok.kv.size() == 2);
    for (const auto& k : ok.kv) CHECK_FALSE(k.dropped);
    CHECK_FALSE(ok.failed());
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "modelopt_fp8", [](Tensors& t) {
        auto n = t.extract("model.layers.0.self_attn.k_proj.k_scale");
        n.key() = "model.layers.0.self_attn.o_proj.k_scale";  // attached to the wrong module
        t.insert(std::move(n));
    });
    // What vLLM does is a failure when the check targets vLLM, a note otherwise.
    const Report r = check(d, CheckOptions{std::nullopt, "vllm"});
    CHECK(has_failure(r, "kv scale dropped", "model.layers.0.self_attn.o_proj.k_scale"));
    CHECK(r.failed());
    CHECK_FALSE(has_failure(check(d), "kv scale dropped", "model.layers.0.self_attn.o_proj.k_scale"));
}

TEST_CASE("planted scale faults are found and named", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    SECTION("zero scale (bfloat16, compressed-tensors)") {
        const auto d = planted(s, "ct_fp8", [](Tensors& t) {
            std::fill(t.at(kQ + ".weight_scale").bytes.begin(), t.at(kQ + ".weight_scale").bytes.end(), 0);
        });
        CHECK(has_failure(check(d), "zero scale", kQ + ".weight_scale"));
    }
    SECTION("NaN scale") {
        const auto d = planted(s, "modelopt_fp8", [](Tensors& t) { set_f32(t.at(kQ + ".weight_scale"), NAN); });
        CHECK(has_failure(check(d), "scale finite", kQ + ".weight_scale"));
    }
    SECTION("infinite scale") {
        const auto d = planted(s, "modelopt_fp8", [](Tensors& t) { set_f32(t.at(kQ + ".weight_scale"), INFINITY); });
        CHECK(has_failure(check(d), "scale finite", kQ + ".weight_scale"));
    }
    SECTION("subnormal scale") {
        const auto d = planted(s, "modelopt_fp8", [](Tensors& t) { set_f32(t.at(kQ + ".weight_scale"), 1e-40f); });
        CHECK(has_failure(check(d), "scale subnormal", kQ + ".weight_scale"));
    }
    SECTION("zero E4M3 block scale over nonzero codes (NVFP4)") {
        const auto d = planted(s, "modelopt_nvfp4", [](Tensors& t) { t.at(kQ + ".weight_scale").bytes[5] = 0; });
        CHECK(has_failure(check(d), "zero scale", kQ + ".weight_scale"));
    }
    SECTION("missing scale tensor") {
        const auto d = planted(s, "modelopt_fp8", [](Tensors& t) { t.erase(kQ + ".weight_scale"); });
        CHECK(has_failure(check(d), "structure", kQ + ".weight"));
    }
    SECTION("inverted NVFP4 global scale") {
        const auto d = planted(s, "modelopt_nvfp4", [](Tensors& t) {
            auto& g = t.at(kQ + ".weight_scale_2");
            set_f32(g, 1.0f / get_f32(g));
        });
        CHECK(has_failure(check(d), "global scale convention", kQ + ".weight_scale_2"));
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kQ).verdict == "scale convention inverted");
        CHECK(comparison(r, kK).verdict == "bit-exact");
    }
    SECTION("scale of a different amax") {
        const auto d = planted(s, "modelopt_fp8", [](Tensors& t) {
            auto& g = t.at(kQ + ".weight_scale");
            set_f32(g, get_f32(g) * 1.25f);
        });
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kQ).verdict == "different amax");
        CHECK(r.failed());
    }
}

TEST_CASE("a missing expert input_scale is found", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    // Two linears made experts 0 and 1 of one MoE block; expert 1 loses its input_scale.
    const auto d = planted(s, "modelopt_fp8", [](Tensors& t) {
        const std::string g = "model.layers.0.mlp.gate_proj", u = "model.layers.0.mlp.up_proj";
        const std::string e0 = "model.layers.0.mlp.experts.0.gate_proj", e1 = "model.layers.0.mlp.experts.1.gate_proj";
        for (const char* suf : {".weight", ".weight_scale", ".input_scale"}) {
            auto a = t.extract(g + suf);
            a.key() = e0 + suf;
            t.insert(std::move(a));
            auto b = t.extract(u + suf);
            b.key() = e1 + suf;
            t.insert(std::move(b));
        }
        t.erase(e1 + ".input_scale");
    });
    const Report r = check(d);
    CHECK(has_failure(r, "missing expert input_scale", "model.layers.0.mlp.experts.1.gate_proj.input_scale"));
    CHECK_FALSE(has_failure(r, "missing expert input_scale", "model.layers.0.mlp.experts.0.gate_proj.input_scale"));
}

TEST_CASE("planted code faults are classified against the original", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    SECTION("swapped nibbles (NVFP4, compressed-tensors)") {
        const auto d = planted(s, "ct_nvfp4", [](Tensors& t) {
            for (auto& b : t.at(kQ + ".weight_packed").bytes) b = static_cast<std::uint8_t>((b >> 4) | (b << 4));
        });
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kQ).verdict == "nibble order");
        CHECK(comparison(r, kK).verdict == "bit-exact");
    }
    SECTION("swapped nibbles (MXFP4, ModelOpt)") {
        const auto d = planted(s, "modelopt_mxfp4", [](Tensors& t) {
            for (auto& b : t.at(kK + ".weight").bytes) b = static_cast<std::uint8_t>((b >> 4) | (b << 4));
        });
        CHECK(comparison(check(d, kOriginal), kK).verdict == "nibble order");
    }
    SECTION("one flipped code (exponent bit)") {
        const auto d = planted(s, "ct_fp8", [](Tensors& t) { t.at(kK + ".weight").bytes[100] ^= 0x40; });
        const auto& c = comparison(check(d, kOriginal), kK);
        CHECK(c.code_mismatches == 1);
        CHECK(c.verdict == "codes differ");
    }
    SECTION("one code one step off") {
        const auto d = planted(s, "modelopt_fp8", [](Tensors& t) {
            auto& b = t.at(kK + ".weight").bytes[7];
            b = static_cast<std::uint8_t>((b & 0x7F) == 0 ? b + 1 : b - 1);
        });
        const auto& c = comparison(check(d, kOriginal), kK);
        CHECK(c.code_mismatches == 1);
        CHECK(c.verdict == "rounding");
    }
}

TEST_CASE("bad input is a CheckpointError naming the file", "[checkpoint]") {
    CHECK_THROWS_AS(check(kData + "no_such_folder"), CheckpointError);
    CHECK_THROWS_AS(check(kData + "ct_fp8", kData + "no_such_original"), CheckpointError);
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "ct_fp8", [](Tensors&) {});
    fs::resize_file(fs::path(d) / "model.safetensors", 1000);  // truncated shard
    try {
        check(d);
        FAIL("no error");
    } catch (const CheckpointError& e) {
        CHECK_THAT(e.what(), Catch::Contains("model.safetensors"));
    }
    fs::remove(fs::path(d) / "config.json");
    CHECK_THROWS_AS(check(d), CheckpointError);
}

// No library writes these two layouts (gpt-oss/weights.py and DeepSeek's fp8_cast_bf16.py only
// read them), so they are made here from library-written tensors under the other names.
namespace {
void write_config(const std::string& dir, const nlohmann::json& qc) {
    std::ofstream(fs::path(dir) / "config.json") << nlohmann::json{{"quantization_config", qc}}.dump();
    fs::remove(fs::path(dir) / "hf_quant_config.json");
}
}  // namespace

TEST_CASE("DeepSeek-V3 layout: weight_scale_inv per 128x128 block", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    // ModelOpt's FP8_PB_WO tensors renamed <w>_scale_inv: x = q * s per 128x128 block, as
    // DeepSeek-V3 inference/kernel.py weight_dequant reads them.
    const auto d = planted(s, "modelopt_fp8_block", [](Tensors& t) {
        Tensors out;
        for (auto& [k, v] : t) {
            std::string n = k;
            Tensor x = v;
            if (n.size() > 13 && n.compare(n.size() - 13, 13, ".weight_scale") == 0) {
                n += "_inv";
                // DeepSeek's grid is [rows/128, cols/128]; ModelOpt keeps [gr, 1, gc, 1].
                if (x.shape.size() == 4) x.shape = {x.shape[0], x.shape[2]};
            }
            out[n] = x;
        }
        t = std::move(out);
    });
    write_config(d, {{"quant_method", "fp8"},
                     {"fmt", "e4m3"},
                     {"activation_scheme", "dynamic"},
                     {"weight_block_size", {128, 128}}});
    const Folder F(d);
    CHECK(F.producer() == Producer::deepseek);
    std::size_t blocks = 0;
    for (const auto& L : F.layers())
        if (L.scheme == Scheme::fp8_block) {
            ++blocks;
            CHECK(L.scale == L.module + ".weight_scale_inv");
            CHECK(L.block_rows == 128);
        }
    CHECK(blocks == 7);
    const Report r = check(d, kOriginal);
    REQUIRE(r.comparisons.size() == 7);
    // amax / 448 per block in float32 and a float32 quotient: ModelOpt's rule, which is also
    // the per-block rule of DeepSeek's act_quant (inference/kernel.py). ModelOpt shares q/k/v's
    // one-block scale; DeepSeek's rule keeps each block's own, so k and v differ by their amax.
    for (const auto& c : r.comparisons) {
        INFO(c.module);
        if (c.module == kK || c.module == "model.layers.0.self_attn.v_proj")
            CHECK(c.verdict == "different amax");
        else
            CHECK(c.verdict == "bit-exact");
    }
}

TEST_CASE("gpt-oss layout: .blocks (low nibble first) and .scales (E8M0 bytes)", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "ct_mxfp4", [](Tensors& t) {
        Tensors out;
        for (auto& [k, v] : t) {
            std::string n = k;
            Tensor x = v;
            if (n.size() > 14 && n.compare(n.size() - 14, 14, ".weight_packed") == 0) {
                n = n.substr(0, n.size() - 14) + ".blocks";  // [rows, cols/2] -> [rows, cols/32, 16]
                x.shape = {v.shape[0], v.shape[1].get<std::size_t>() / 16, 16};
            } else if (n.size() > 13 && n.compare(n.size() - 13, 13, ".weight_scale") == 0) {
                n = n.substr(0, n.size() - 13) + ".scales";
            }
            out[n] = x;
        }
        t = std::move(out);
    });
    write_config(d, {{"quant_method", "mxfp4"}, {"modules_to_not_convert", {"lm_head", "model.embed_tokens"}}});
    const Folder F(d);
    CHECK(F.producer() == Producer::gpt_oss);
    std::size_t mx = 0;
    for (const auto& L : F.layers())
        if (L.scheme == Scheme::mxfp4) {
            ++mx;
            CHECK(L.cols == 128 * (L.module.find("down_proj") != std::string::npos ? 1.5 : 1));
        }
    CHECK(mx == 7);
    const Report r = check(d);
    CHECK_FALSE(r.failed());
}

TEST_CASE("an all-zero block's scale against the producer's convention", "[checkpoint]") {
    // up_proj row 3, columns 32..47 are zero in the original: NVFP4 block 3 * 8 + 2.
    const std::string up = "model.layers.0.mlp.up_proj.weight_scale";
    auto note_for = [&](const Report& r) {
        for (const auto& f : r.findings)
            if (f.check == "all-zero block scale" && f.tensor == up) return !f.failed;
        return false;
    };
    CHECK_FALSE(note_for(check(kData + "modelopt_nvfp4")));  // 1.0 as ModelOpt writes it
    CHECK_FALSE(note_for(check(kData + "ct_nvfp4")));        // 0.125 as compressed-tensors writes it
    fp8kit::test::ScratchDir s("ckpt");
    const auto d = planted(s, "modelopt_nvfp4", [&](Tensors& t) {
        REQUIRE(t.at(up).bytes[26] == 0x38);  // E4M3 1.0
        t.at(up).bytes[26] = 0x30;            // 0.5
    });
    CHECK(note_for(check(d)));
    CHECK(comparison(check(d, kOriginal), "model.layers.0.mlp.up_proj").verdict == "different amax");
}
