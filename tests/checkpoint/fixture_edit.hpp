// Fixture editing for the checkpoint tests: a library-written fixture of data/checkpoints copied
// into a ScratchDir with its tensors edited (faults planted), and lookups into a Report.
#pragma once

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/checkpoint.hpp"
#include "scratch_dir.hpp"

namespace fp8kit::test::ckpt {
namespace fs = std::filesystem;
using namespace fp8kit::checkpoint;

inline const std::string kData = std::string(FP8KIT_DATA_DIR) + "/checkpoints/";
inline const std::string kOriginal = kData + "original";
// Layers of the fixtures' model (data/checkpoints/original) the tests edit or read.
inline const std::string kO = "model.layers.0.self_attn.o_proj", kGate = "model.layers.0.mlp.gate_proj",
                         kUp = "model.layers.0.mlp.up_proj", kDown = "model.layers.0.mlp.down_proj";

// A fixture copied into `dir`, its model.safetensors rewritten with `edit` applied to the
// tensors: name -> (dtype, shape, bytes); erase or rename entries to drop or move tensors.
struct Tensor {
    std::string dtype;
    nlohmann::json shape;
    std::vector<std::uint8_t> bytes;
};
using Tensors = std::map<std::string, Tensor>;

// shard: the file rewritten (a TensorRT-LLM checkpoint's rank0.safetensors).
inline std::string planted(const fp8kit::test::ScratchDir& scratch, const std::string& fixture,
                           const std::function<void(Tensors&)>& edit, const std::string& shard = "model.safetensors") {
    const fs::path src = kData + fixture, dst = fs::path(scratch.path()) / fixture;
    fs::create_directories(dst);
    for (const auto& e : fs::directory_iterator(src))
        if (e.path().filename() != shard) fs::copy_file(e.path(), dst / e.path().filename());
    std::ifstream in(src / shard, std::ios::binary);
    std::uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), 8);
    std::string head(n, '\0');
    in.read(head.data(), static_cast<std::streamsize>(n));
    const std::vector<char> data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    Tensors ts;
    const auto header = nlohmann::json::parse(head);  // kept alive: items() only views it
    for (const auto& [k, v] : header.items()) {
        if (k == "__metadata__") continue;
        const auto b = v["data_offsets"][0].get<std::size_t>(), e = v["data_offsets"][1].get<std::size_t>();
        ts[k] = {v["dtype"], v["shape"], std::vector<std::uint8_t>(data.begin() + b, data.begin() + e)};
    }
    edit(ts);
    nlohmann::json h = nlohmann::json::object();
    std::vector<std::uint8_t> out;
    for (const auto& [k, t] : ts) {
        h[k] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {out.size(), out.size() + t.bytes.size()}}};
        out.insert(out.end(), t.bytes.begin(), t.bytes.end());
    }
    const std::string hs = h.dump();
    std::ofstream o(dst / shard, std::ios::binary);
    const std::uint64_t hn = hs.size();
    o.write(reinterpret_cast<const char*>(&hn), 8);
    o.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
    return dst.string();
}

inline void set_f32(Tensor& t, float v) {
    REQUIRE(t.dtype == "F32");
    std::memcpy(t.bytes.data(), &v, 4);
}
inline float get_f32(const Tensor& t) {
    float v;
    std::memcpy(&v, t.bytes.data(), 4);
    return v;
}

inline bool has_failure(const Report& r, const std::string& check, const std::string& tensor) {
    for (const auto& f : r.findings)
        if (f.failed && f.check == check && f.tensor == tensor) return true;
    return false;
}
inline const Comparison& comparison(const Report& r, const std::string& module) {
    for (const auto& c : r.comparisons)
        if (c.module == module) return c;
    FAIL("no comparison for " << module);
    throw;
}

inline const std::string kQ = "model.layers.0.self_attn.q_proj", kK = "model.layers.0.self_attn.k_proj";

// Every layer of a dense fixture (q k v o gate up down) bit-exact against its reference.
inline void all_bit_exact(const Report& r) {
    CHECK(r.comparisons.size() == 7);  // q k v o gate up down
    for (const auto& c : r.comparisons) {
        INFO(c.module);
        CHECK(c.verdict == "bit-exact");
        CHECK(c.code_mismatches == 0);
        CHECK(c.scale_mismatches == 0);
        CHECK(c.sqnr_db > 15);
    }
    CHECK_FALSE(r.failed());
}

}  // namespace fp8kit::test::ckpt
