// What the checkpoint readers share (folder.cpp and the TensorRT-LLM layout, trtllm.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// A checkpoint's JSON file (regular file, at most 256 MiB); CheckpointError naming it otherwise.
nlohmann::json read_json(const std::filesystem::path& p);
// The strings of a JSON array (other entries skipped).
std::vector<std::string> strings(const nlohmann::json& j);
// Whether an exclude pattern names the module (fnmatch, a name, a ".name" suffix, or "re:").
bool excluded_by(const std::vector<std::string>& patterns, const std::string& module);

// Where a TensorRT-LLM checkpoint layer's weight comes from in the Hugging Face model ModelOpt
// exported it from (Layer::sources, Layer::amax_group), for a Llama or Mixtral decoder.
struct TrtllmOrigin {
    std::vector<std::string> sources, amax_group;
};
// module: a TensorRT-LLM module name ("transformer.layers.0.attention.qkv"); experts: the
// stack's size (0: a 2-D weight); architecture: config.json "architecture".
TrtllmOrigin trtllm_origin(const std::string& module, std::uint64_t experts, const std::string& architecture,
                           Scheme scheme);

}  // namespace fp8kit::checkpoint::detail
