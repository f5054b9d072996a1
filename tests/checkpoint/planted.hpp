// A checkpoint fixture of data/checkpoints copied into a scratch folder with its
// model.safetensors rewritten: the tests' way of planting a fault in a library-written file.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scratch_dir.hpp"

namespace fp8kit::test {

// A fixture copied into `dir`, its model.safetensors rewritten with `edit` applied to the
// tensors: name -> (dtype, shape, bytes); erase or rename entries to drop or move tensors.
struct Tensor {
    std::string dtype;
    nlohmann::json shape;
    std::vector<std::uint8_t> bytes;
};
using Tensors = std::map<std::string, Tensor>;

inline std::string planted(const ScratchDir& scratch, const std::string& fixture, const std::function<void(Tensors&)>& edit) {
    namespace fs = std::filesystem;
    const fs::path src = std::string(FP8KIT_DATA_DIR) + "/checkpoints/" + fixture, dst = fs::path(scratch.path()) / fixture;
    fs::create_directories(dst);
    for (const auto& e : fs::directory_iterator(src))
        if (e.path().filename() != "model.safetensors") fs::copy_file(e.path(), dst / e.path().filename());
    std::ifstream in(src / "model.safetensors", std::ios::binary);
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
    std::ofstream o(dst / "model.safetensors", std::ios::binary);
    const std::uint64_t hn = hs.size();
    o.write(reinterpret_cast<const char*>(&hn), 8);
    o.write(hs.data(), static_cast<std::streamsize>(hs.size()));
    o.write(reinterpret_cast<const char*>(out.data()), static_cast<std::streamsize>(out.size()));
    return dst.string();
}

}  // namespace fp8kit::test
