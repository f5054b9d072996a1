// Checkpoints written on a GPU (data/checkpoints/gpu_*: ModelOpt 0.47.0 and compressed-tensors
// 0.20.0 with the model on an H100, scripts/fixtures/make_gpu_checkpoints.sh; the mixture-of-experts
// gpu_moe_* by scripts/fixtures/make_moe_checkpoints.py --device cuda): torch's CUDA arithmetic
// differs from the CPU's (a tensor divided by a Python number is a reciprocal multiply;
// compressed-tensors quantises with a Triton kernel), so `check --reference` must model the
// producer's CUDA arithmetic as a variant of its rule, and still fault a scale neither gives.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "checkpoint/fixture_edit.hpp"

using namespace fp8kit::test::ckpt;

namespace {

std::string variant_of(const char* folder) {
    return std::string(folder).find("modelopt") != std::string::npos ? "modelopt" : "compressed-tensors";
}

float bits_float(std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
}
std::uint32_t float_bits(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, 4);
    return u;
}

// The bfloat16 original weight's amax, read from the safetensors bytes here (not through fp8kit).
float original_amax(const std::string& module, const std::string& original = "original") {
    fp8kit::test::ScratchDir s("ckpt_gpu");
    float amax = 0;
    planted(s, original, [&](Tensors& t) {
        const auto& w = t.at(module + ".weight");
        REQUIRE(w.dtype == "BF16");
        for (std::size_t i = 0; i + 1 < w.bytes.size(); i += 2)
            amax = std::max(amax, std::fabs(bits_float(std::uint32_t(w.bytes[i] | (w.bytes[i + 1] << 8)) << 16)));
    });
    return amax;
}

float f32_of(const std::string& fixture, const std::string& tensor) {
    fp8kit::test::ScratchDir s("ckpt_gpu");
    float v = 0;
    planted(s, fixture, [&](Tensors& t) { v = get_f32(t.at(tensor)); });
    return v;
}

}  // namespace

TEST_CASE("checkpoints written on a GPU re-quantise bit for bit under the producer's CUDA arithmetic", "[checkpoint]") {
    // The folders where torch's CUDA arithmetic changed some code or scale (each differs from its
    // CPU twin; the others came out byte-identical on the GPU, data/checkpoints/README.md).
    for (const char* f :
         {"gpu_modelopt_fp8", "gpu_modelopt_fp8_block", "gpu_modelopt_fp8_pcpt", "gpu_modelopt_nvfp4",
          "gpu_modelopt_w4a8_max", "gpu_modelopt_w4a8", "gpu_ct_fp8", "gpu_ct_fp8_block", "gpu_ct_fp8_dynamic"}) {
        INFO(f);
        const std::string ref =
            std::string(f) == "gpu_modelopt_w4a8" ? kData + "gpu_modelopt_w4a8_smoothed" : kOriginal;
        const Report r = check(kData + f, ref);
        REQUIRE(r.comparisons.size() == 7);
        std::size_t cuda = 0;
        for (const auto& c : r.comparisons) {
            INFO(c.module);
            CHECK(c.verdict == "bit-exact");
            CHECK(c.code_mismatches == 0);
            CHECK(c.scale_mismatches == 0);
            cuda += c.variant == variant_of(f) + " (CUDA arithmetic)";
            if (c.variant != variant_of(f) + " (CUDA arithmetic)")
                CHECK(c.variant == variant_of(f) + " (CPU arithmetic)");
        }
        CHECK(cuda > 0);  // the CUDA variant was needed
        CHECK_FALSE(r.failed());
    }
    for (const char* f : {"gpu_modelopt_mxfp4", "gpu_modelopt_mxfp8", "gpu_ct_mxfp4", "gpu_ct_mxfp8", "gpu_ct_nvfp4",
                          "gpu_ct_nvfp4a16"}) {
        INFO(f);
        const Report r = check(kData + f, kOriginal);
        REQUIRE(r.comparisons.size() == 7);
        for (const auto& c : r.comparisons)
            CHECK((c.verdict == "bit-exact" && c.variant == variant_of(f) + " (CPU arithmetic)"));
    }
}

TEST_CASE("the CPU-written fixtures still match under the CPU arithmetic", "[checkpoint]") {
    for (const char* f : {"modelopt_fp8", "modelopt_fp8_block", "modelopt_fp8_pcpt", "modelopt_nvfp4", "modelopt_mxfp4",
                          "modelopt_w4a8_max", "ct_fp8", "ct_fp8_block", "ct_fp8_dynamic", "ct_nvfp4", "ct_mxfp4"}) {
        INFO(f);
        const Report r = check(kData + f, kOriginal);
        for (const auto& c : r.comparisons)
            CHECK((c.verdict == "bit-exact" && c.variant == variant_of(f) + " (CPU arithmetic)"));
    }
}

TEST_CASE("ModelOpt's NVFP4 weight_scale_2 on the GPU is amax times the float32 reciprocal of 2688", "[checkpoint]") {
    // Independent of fp8kit: the two fixtures' stored values against the two formulas, computed here.
    const float amax = original_amax(kO);  // o_proj shares its amax with no other linear
    const volatile float inv = 1.0f / 2688.0f;
    const float cuda = amax * inv, cpu = amax / 2688.0f;
    REQUIRE(float_bits(cuda) != float_bits(cpu));  // this amax is one where the two differ
    CHECK(float_bits(f32_of("gpu_modelopt_nvfp4", kO + ".weight_scale_2")) == float_bits(cuda));
    CHECK(float_bits(f32_of("modelopt_nvfp4", kO + ".weight_scale_2")) == float_bits(cpu));
}

TEST_CASE("a scale matching neither the CPU nor the CUDA arithmetic is still a fault", "[checkpoint]") {
    fp8kit::test::ScratchDir s("ckpt_gpu");
    SECTION("NVFP4 weight_scale_2 one ulp beyond the CUDA value") {
        const auto d = planted(s, "gpu_modelopt_nvfp4", [](Tensors& t) {
            Tensor& g = t.at(kO + ".weight_scale_2");
            set_f32(g, std::nextafter(get_f32(g), INFINITY));  // CPU value +2 ulps, CUDA value +1 ulp
        });
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kO).verdict == "different amax");
        CHECK(comparison(r, kO).variant == "modelopt (CPU arithmetic)");  // the verdict is the CPU rule's
        CHECK(r.failed());
    }
    SECTION("FP8 per-tensor weight_scale one ulp below the CPU value") {
        const auto d = planted(s, "gpu_modelopt_fp8", [](Tensors& t) {
            Tensor& g = t.at(kGate + ".weight_scale");
            const float cpu = f32_of("modelopt_fp8", kGate + ".weight_scale");
            REQUIRE(get_f32(g) != cpu);  // the GPU's is one ulp above it
            set_f32(g, std::nextafter(cpu, 0.0f));
        });
        const Report r = check(d, kOriginal);
        CHECK(comparison(r, kGate).verdict == "different amax");
        CHECK(r.failed());
    }
}

TEST_CASE("the matched variant is in the JSON and CSV reports", "[checkpoint]") {
    const Report r = check(kData + "gpu_modelopt_fp8", kOriginal);
    const auto j = nlohmann::json::parse(to_json(r));
    REQUIRE(j["comparisons"].size() == 7);
    for (const auto& c : j["comparisons"]) CHECK(c["variant"] == "modelopt (CUDA arithmetic)");
    const std::string csv = to_csv(r);
    CHECK(csv.substr(0, csv.find('\n')).size() >= 8);
    CHECK(csv.substr(0, csv.find('\n')).rfind(",variant") == csv.find('\n') - 8);
    CHECK(csv.find(kGate + ",fp8-per-tensor,") != std::string::npos);
    CHECK(csv.find(",modelopt (CUDA arithmetic)\n") != std::string::npos);
}

namespace {

const std::string kE2 = "model.layers.0.mlp.experts.2.";

std::string moe_original(const std::string& folder) {
    return kData + (folder.find("mixtral") != std::string::npos ? "moe_mixtral_original" : "moe_original");
}

}  // namespace

TEST_CASE("MoE checkpoints written on a GPU re-quantise bit for bit, every expert, under the matching variant",
          "[checkpoint][moe]") {
    // needs_cuda: the folders where the CUDA-arithmetic variant was needed for some weight (the CPU
    // twin moe_* differs there, data/checkpoints/README.md); the others match the CPU rule throughout.
    const std::pair<const char*, bool> folders[] = {{"gpu_moe_modelopt_fp8", true},
                                                    {"gpu_moe_modelopt_fp8_block", true},
                                                    {"gpu_moe_modelopt_nvfp4", true},
                                                    {"gpu_moe_modelopt_mxfp4", false},
                                                    {"gpu_moe_mixtral_modelopt_fp8", true},
                                                    {"gpu_moe_mixtral_modelopt_nvfp4", true},
                                                    {"gpu_moe_ct_fp8", true},
                                                    {"gpu_moe_ct_fp8_block", true},
                                                    {"gpu_moe_ct_nvfp4", false},
                                                    {"gpu_moe_ct_mxfp4", false}};
    for (const auto& [f, needs_cuda] : folders) {
        INFO(f);
        const Report r = check(kData + f, moe_original(f));
        REQUIRE(r.comparisons.size() == 16);  // q k v o + 4 experts x 3 projections
        std::size_t cuda = 0, experts = 0;
        for (const auto& c : r.comparisons) {
            INFO(c.module);
            experts += c.module.find(".experts.") != std::string::npos;
            CHECK(c.verdict == "bit-exact");
            CHECK(c.code_mismatches == 0);
            CHECK(c.scale_mismatches == 0);
            cuda += c.variant == variant_of(f) + " (CUDA arithmetic)";
            if (c.variant != variant_of(f) + " (CUDA arithmetic)")
                CHECK(c.variant == variant_of(f) + " (CPU arithmetic)");
        }
        CHECK(experts == 12);
        CHECK((cuda > 0) == needs_cuda);
        CHECK_FALSE(r.failed());
    }
}

TEST_CASE("ModelOpt NVFP4 on the GPU: expert 2's shared gate/up weight_scale_2 is the fused amax times fl(1/2688)",
          "[checkpoint][moe]") {
    // Independent of fp8kit: the fused gate_up slice's amax (one weight quantizer per expert,
    // modelopt plugins/huggingface.py _QuantFusedExperts) from moe_original's bfloat16 bytes here;
    // the GPU fixture holds amax * fl(1/2688) (ATen's reciprocal multiply), the CPU one amax / 2688.
    const float amax =
        std::max(original_amax(kE2 + "gate_proj", "moe_original"), original_amax(kE2 + "up_proj", "moe_original"));
    const volatile float inv = 1.0f / 2688.0f;
    const float cuda = amax * inv, cpu = amax / 2688.0f;
    REQUIRE(float_bits(cuda) != float_bits(cpu));
    for (const char* p : {"gate_proj", "up_proj"}) {
        INFO(p);
        CHECK(float_bits(f32_of("gpu_moe_modelopt_nvfp4", kE2 + p + ".weight_scale_2")) == float_bits(cuda));
        CHECK(float_bits(f32_of("moe_modelopt_nvfp4", kE2 + p + ".weight_scale_2")) == float_bits(cpu));
    }
}

TEST_CASE("a GPU MoE expert scale matching neither arithmetic is a fault on that expert only", "[checkpoint][moe]") {
    fp8kit::test::ScratchDir s("ckpt_gpu");
    const auto d = planted(s, "gpu_moe_modelopt_nvfp4", [](Tensors& t) {
        Tensor& g = t.at(kE2 + "gate_proj.weight_scale_2");
        set_f32(g, std::nextafter(get_f32(g), INFINITY));  // CUDA value +1 ulp
    });
    const Report r = check(d, kData + "moe_original");
    for (const auto& c : r.comparisons) {
        INFO(c.module);
        CHECK((c.verdict == "bit-exact") == (c.module != kE2 + "gate_proj"));
    }
    CHECK(comparison(r, kE2 + "gate_proj").verdict == "different amax");
    CHECK(r.failed());
}
