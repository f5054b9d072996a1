// What the checkpoint readers share (folder.cpp and the TensorRT-LLM layout, trtllm.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
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

// How ModelOpt split tensor `name` (shape: one rank's) among tp ranks; weight_dims: the dimensions
// of its module's weight (3: stacked experts); q_rows, kv_rows: the rows of q and of k in a
// whole qkv. nullopt: every rank holds it whole. lib/src/checkpoint/trtllm.cpp.
std::optional<RankSplit> trtllm_split(const std::string& name, const std::vector<std::uint64_t>& shape,
                                      std::size_t weight_dims, std::uint64_t q_rows, std::uint64_t kv_rows,
                                      std::uint64_t tp);

}  // namespace fp8kit::checkpoint::detail
