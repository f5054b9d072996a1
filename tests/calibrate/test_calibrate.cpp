// fp8kit calibrate against the calibration libraries themselves: tests/golden/calibration_scales.json
// holds the scales that nvidia-modelopt 0.47.0 (MaxCalibrator, MseCalibrator, HistogramCalibrator
// percentile) and llm-compressor
// 0.14.0.1 (memoryless_minmax, static_minmax, minmax, mse observers) computed on the activations of
// data/example/llama_tiny_dump.h5 (15 bfloat16 inputs and 3 float32 weights, steps 0 and 100;
// scripts/fixtures/make_calibration_golden.py). Every
// scale must match bit for bit, through the library API and through the dump reader.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <fstream>

#include <nlohmann/json.hpp>

#include "fp8kit/calibrate.hpp"
#include "scratch_dir.hpp"
#include "float_bits.hpp"

using namespace fp8kit::calibrate;

namespace {

using fp8kit_test::from_bits;

using fp8kit_test::bits;

const std::string kDump = std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_dump.h5";

nlohmann::json golden() {
    std::ifstream f(std::string(FP8KIT_GOLDEN_DIR) + "/calibration_scales.json");
    REQUIRE(f);
    return nlohmann::json::parse(f);
}

std::uint32_t hex_bits(const std::string& s) { return static_cast<std::uint32_t>(std::stoul(s, nullptr, 16)); }

}  // namespace

TEST_CASE("calibrate: every method reproduces its library's scale bit for bit on the example dump", "[calibrate]") {
    const auto g = golden();
    Options o;
    o.files = {kDump};
    // The 15 bfloat16 inputs, and three float32 weights calibrated as activations (the float32
    // arithmetic of every method).
    o.include = {"*/input", "*/lm_head/weight", "*/model.layers.0.self_attn.q_proj/weight",
                 "*/model.layers.1.mlp.down_proj/weight"};
    o.methods = all_methods();
    const Report r = run(o);
    std::size_t compared = 0;
    for (const auto& row : r.rows) {
        INFO(row.tensor << " " << name(row.method));
        REQUIRE(g["tensors"].contains(row.tensor));
        const auto& e = g["tensors"][row.tensor][name(row.method)];
        CHECK(row.calib_steps == std::vector<std::int64_t>{0, 100});
        CHECK(row.holdout_steps == std::vector<std::int64_t>{299});
        CHECK(bits(row.scale.value) == hex_bits(e["scale_bits_f32"].get<std::string>()));
        CHECK(row.scale.dtype == e["dtype"].get<std::string>());
        if (e.contains("amax_bits_f32")) CHECK(bits(row.scale.amax) == hex_bits(e["amax_bits_f32"].get<std::string>()));
        ++compared;
    }
    CHECK(compared == g["tensors"].size() * all_methods().size());
    CHECK(compared == 18 * 7);
}

TEST_CASE("calibrate: ModelOpt's MSE candidates are torch.linspace(0.25, 4.0, 39) in float32", "[calibrate]") {
    const auto c = modelopt_mse_candidates();
    REQUIRE(c.size() == 39);
    CHECK(c.front() == 0.25f);
    CHECK(c.back() == 4.0f);
    // Independent: each candidate is the float32 nearest to the binary64 value start + step * i
    // (step the float32 quotient 3.75f / 38) for the first 19, end - step * (38 - i) after: one
    // rounding, as the fused multiply-add in torch's linspace kernel gives.
    const float step = 3.75f / 38.0f;
    for (int i = 0; i < 39; ++i) {
        const double exact = i < 19 ? 0.25 + static_cast<double>(step) * i : 4.0 - static_cast<double>(step) * (38 - i);
        CHECK(c[i] == static_cast<float>(exact));
    }
    // torch 2.15's own values at the indices where a two-rounding formula differs (printed by
    // torch.linspace(0.25, 4.0, steps=39) on AVX2 and AVX-512).
    CHECK(bits(c[9]) == bits(1.138158f));
    CHECK(bits(c[18]) == bits(2.026316f));
    CHECK(bits(c[20]) == bits(2.223684f));
    CHECK(bits(c[25]) == bits(2.7171052f));
}

TEST_CASE("calibrate: ModelOpt's FP8 fake quantisation follows _fp8_eager", "[calibrate]") {
    // amax 448: scale = (1/448) * 448 = 1 exactly, so values round to E4M3 directly.
    CHECK(modelopt_fp8_fake_quant(1.0625f, 448.0f) == 1.0f);    // tie between 1.0 and 1.125: even
    CHECK(modelopt_fp8_fake_quant(1000.0f, 448.0f) == 448.0f);  // clamped
    CHECK(modelopt_fp8_fake_quant(-1000.0f, 448.0f) == -448.0f);
    // amax below 2^-24 is replaced by 1.
    CHECK(modelopt_fp8_fake_quant(0.5f, 1e-9f) == 0.5f);
    CHECK(std::isnan(modelopt_fp8_fake_quant(std::nanf(""), 1.0f)));
}

TEST_CASE("calibrate: methods on hand-made batches", "[calibrate]") {
    // static_minmax keeps the extreme over batches; memoryless the last batch; minmax averages.
    const std::vector<Batch> b = {{-2.0f, 1.0f}, {-1.0f, 4.0f}};
    CHECK(calibrate(Method::llmc_static_minmax, b, DType::f32).value == 4.0f / 448.0f);
    CHECK(calibrate(Method::llmc_memoryless_minmax, b, DType::f32).value == 4.0f / 448.0f);
    // minmax: max = 1 * 0.99f + 4 * 0.01f, min = -2 * 0.99f + -1 * 0.01f: |min| = 1.99 > max 1.03.
    const float mn = -2.0f * 0.99f + -1.0f * 0.01f;
    CHECK(calibrate(Method::llmc_minmax, b, DType::f32).value == std::fabs(mn) / 448.0f);
    // ModelOpt max: amax / 448 in float32; a zero amax exports as maxbound 448 -> scale 1.
    CHECK(calibrate(Method::modelopt_max, b, DType::f32).value == 4.0f / 448.0f);
    CHECK(calibrate(Method::modelopt_max, {{0.0f, 0.0f}}, DType::f32).value == 1.0f);
    // compressed-tensors: a zero scale becomes the dtype's eps.
    CHECK(calibrate(Method::llmc_static_minmax, {{0.0f}}, DType::bf16).value == 0.0078125f);
    CHECK(calibrate(Method::llmc_static_minmax, {{0.0f}}, DType::f32).value == from_bits(0x34000000u));
    // bfloat16 arithmetic: 3 / 448 rounded to bfloat16.
    const float s = calibrate(Method::llmc_static_minmax, {{3.0f}}, DType::bf16).value;
    CHECK((bits(s) & 0xFFFFu) == 0u);
    CHECK(std::fabs(s - 3.0f / 448.0f) <= 3.0f / 448.0f / 256.0f);
    CHECK_THROWS_AS(calibrate(Method::modelopt_max, {}, DType::f32), CalibrateError);
    CHECK_THROWS_AS(calibrate(Method::modelopt_max, {{1.0f, INFINITY}}, DType::f32), CalibrateError);
}

TEST_CASE("calibrate: held-out statistics", "[calibrate]") {
    // scale 1: 500 clips to 448, 2^-12 underflows to 0 (E4M3's smallest subnormal is 2^-9), 1 is exact.
    const auto h = holdout_stats({{500.0f, std::ldexp(1.0f, -12), 1.0f, 0.0f}}, 1.0f);
    CHECK(h.elements == 4);
    CHECK(h.nonzero == 3);
    CHECK(h.clipped == 1);
    CHECK(h.underflow == 1);
    const double sig = 500.0 * 500.0 + std::ldexp(1.0, -24) + 1.0;
    const double err = 52.0 * 52.0 + std::ldexp(1.0, -24);
    CHECK(h.sqnr_db == Approx(10.0 * std::log10(sig / err)).epsilon(1e-12));
    CHECK(std::isinf(holdout_stats({{1.0f, 2.0f}}, 1.0f).sqnr_db));
}

TEST_CASE("calibrate: holdout selection and bad input", "[calibrate]") {
    Options o;
    o.files = {kDump};
    o.include = {"*/lm_head/input"};
    o.methods = {Method::modelopt_max};
    o.holdout_steps = "none";
    auto r = run(o);
    REQUIRE(r.rows.size() == 1);
    CHECK(r.rows[0].calib_steps == std::vector<std::int64_t>{0, 100, 299});
    CHECK(r.rows[0].holdout_batches == 0);
    o.holdout_steps = "100-";
    r = run(o);
    CHECK(r.rows[0].calib_steps == std::vector<std::int64_t>{0});
    CHECK(r.rows[0].holdout_steps == std::vector<std::int64_t>{100, 299});
    o.holdout_steps = "0-";  // every step held out: nothing to calibrate on
    CHECK_THROWS_WITH(run(o), Catch::Contains("every step is held out"));
    o.holdout_steps = "x";
    CHECK_THROWS_AS(run(o), CalibrateError);
    o.holdout_steps.reset();
    o.include = {"no_such_tensor"};
    CHECK_THROWS_AS(run(o), CalibrateError);
    o.files = {"/nonexistent/dump.h5"};
    CHECK_THROWS_AS(run(o), CalibrateError);
    CHECK(parse_method("static_minmax") == Method::llmc_static_minmax);
    CHECK(parse_method("max") == Method::modelopt_max);
    CHECK_FALSE(parse_method("entropy").has_value());
}

TEST_CASE("calibrate: --save writes the tool's names, dtype and shape", "[calibrate]") {
    fp8kit::test::ScratchDir scratch("calibrate");
    Options o;
    o.files = {kDump};
    o.include = {"*/model.layers.0.self_attn.q_proj/input"};
    o.methods = {Method::llmc_static_minmax, Method::modelopt_max};
    const auto r = run(o);
    for (Method m : o.methods) {
        const std::string path = scratch.path() + "/s.safetensors";
        write_safetensors(r, m, path);
        std::ifstream f(path, std::ios::binary);
        std::uint64_t n = 0;
        f.read(reinterpret_cast<char*>(&n), 8);
        std::string h(n, '\0');
        f.read(h.data(), static_cast<std::streamsize>(n));
        const auto j = nlohmann::json::parse(h);
        const auto& t = j["model.layers.0.self_attn.q_proj.input_scale"];
        const bool mo = m == Method::modelopt_max;
        CHECK(t["dtype"] == (mo ? "F32" : "BF16"));
        CHECK(t["shape"] == (mo ? nlohmann::json::array() : nlohmann::json::array({1})));
        std::uint32_t b = 0;
        f.read(reinterpret_cast<char*>(&b), mo ? 4 : 2);
        if (!mo) b <<= 16;
        const auto& row = r.rows[m == Method::llmc_static_minmax ? 0 : 1];
        CHECK(row.method == m);
        CHECK(b == bits(row.scale.value));
    }
}

TEST_CASE("calibrate: --save writes ModelOpt's KV scale names on the projections", "[calibrate]") {
    // ModelOpt: <attn>.k_proj.k_scale / v_proj.v_scale (quant_utils.py _KV_CACHE_REPLACEMENTS, as in
    // data/checkpoints/modelopt_fp8); compressed-tensors: <attn>.k_scale / v_scale.
    fp8kit::test::ScratchDir scratch("calibrate");
    Options o;
    o.files = {std::string(FP8KIT_DATA_DIR) + "/example/llama_tiny_kv.h5"};
    o.include = {"*/model.layers.0.self_attn.k", "*/model.layers.0.self_attn.v"};
    o.methods = {Method::llmc_static_minmax, Method::modelopt_max};
    const auto r = run(o);
    for (Method m : o.methods) {
        const std::string path = scratch.path() + "/kv.safetensors";
        write_safetensors(r, m, path);
        std::ifstream f(path, std::ios::binary);
        std::uint64_t n = 0;
        f.read(reinterpret_cast<char*>(&n), 8);
        std::string h(n, '\0');
        f.read(h.data(), static_cast<std::streamsize>(n));
        const auto j = nlohmann::json::parse(h);
        const std::string a = "model.layers.0.self_attn";
        const bool mo = m == Method::modelopt_max;
        for (const char* c : {"k", "v"}) {
            INFO(c);
            CHECK(j.contains(mo ? a + "." + c + "_proj." + c + "_scale" : a + "." + c + "_scale"));
            CHECK_FALSE(j.contains(mo ? a + "." + c + "_scale" : a + "." + c + "_proj." + c + "_scale"));
        }
    }
}

TEST_CASE("calibrate: holding out by token", "[calibrate]") {
    Options o;
    o.files = {kDump};
    o.include = {"*/lm_head/input"};  // [1, 128, 64] a step
    o.methods = {Method::llmc_static_minmax};
    o.holdout_tokens = 0.25;
    const auto r = run(o);
    REQUIRE(r.rows.size() == 1);
    CHECK(r.rows[0].calib_steps == std::vector<std::int64_t>{0, 100, 299});
    CHECK(r.rows[0].holdout_steps == std::vector<std::int64_t>{0, 100, 299});
    CHECK(r.rows[0].calib.elements == 3 * 96 * 64);
    CHECK(r.rows[0].holdout.elements == 3 * 32 * 64);
    o.holdout_tokens = 1.0;
    CHECK_THROWS_AS(run(o), CalibrateError);
    o.holdout_tokens = 0.001;  // ceil(0.128) = 1 token
    CHECK(run(o).rows[0].holdout.elements == 3 * 64);
    o.holdout_steps = "299";
    CHECK_THROWS_AS(run(o), CalibrateError);
}
