// The rows ModelOpt's TensorRT-LLM export adds to the original's (trtllm_rows.cpp): zero rows
// padding the vocabulary to what tp divides (vocab_embedding, lm_head), and KV heads repeated in
// qkv at tp_size above num_key_value_heads.
#pragma once

#include "fp8kit/checkpoint.hpp"

namespace fp8kit::checkpoint::detail {

// Appends to R.findings what is wrong with F's vocab_embedding and lm_head rows (a row count
// ModelOpt does not pad vocab_size to, nonzero padding rows, real rows other than ref's), and a
// note naming the padding. TensorRT-LLM checkpoints only; ref may be null.
void check_trtllm_vocab_rows(const Folder& F, const Folder* ref, Report& R);

// Layer L's original o (TensorRT-LLM qkv: q, k, v rows concatenated) with each KV head repeated
// as ModelOpt repeated it (Folder::kv_repeats); o itself for any other layer or checkpoint.
RawTensor with_repeated_kv_heads(const Folder& F, const Layer& L, RawTensor o);

}  // namespace fp8kit::checkpoint::detail
