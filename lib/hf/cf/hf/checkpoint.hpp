#pragma once
// Hugging Face checkpoint directories <-> causalflow models (issue 13, docs/hf.md). Import maps the
// HF weight names and layouts of each family onto the causalflow layout (cf/nn/params.hpp):
//  - gpt2: Conv1D weights are stored [in, out] and are transposed; optional "transformer." prefix;
//  - gpt_neox / bloom: query_key_value rows are interleaved per head (h, {q, k, v}, d) and are
//    regrouped into [q of all heads; k; v];
//  - llama / qwen2: q_proj, k_proj, v_proj are stacked (GQA keeps n_kv_head key/value heads);
//    gate_proj and up_proj are stacked into c_fc;
//  - RoPE families rotate pairs (i, i + r/2) ("rotate_half"); causalflow rotates pairs (2i, 2i+1),
//    so query and key rows of each head are permuted (d' = 2i <- i, 2i+1 <- i + r/2 for i < r/2).
//    Scores, outputs and every W_Q(h) W_K(h)^T are unchanged (the same permutation on both sides).
// Export writes the gpt2 layout (the only family the causalflow trainer's models map onto).
#include <string>

#include "cf/hf/config.hpp"
#include "cf/nn/model.hpp"

namespace cf::hf {

/// Load a Hugging Face checkpoint directory (config.json + model.safetensors or sharded
/// model.safetensors.index.json) as a float causalflow model. Throws cf::InvalidArgument naming
/// the file and tensor for an unsupported config, a missing tensor or a shape mismatch.
nn::Model<float> load_hf_model(const std::string& dir);

/// A folder written by export_gpt2 records its weights' size and checksum in config.json
/// ("causalflow_weights"): throws cf::InvalidArgument when model.safetensors is not that file (an
/// export interrupted between its two renames, weights replaced by hand); other folders pass.
void check_export_weights(const std::string& dir);

/// Whether folder `dir` holds a causalflow export: a config.json whose causalflow_weights
/// ({"bytes", "fnv1a64"}) match its model.safetensors. export replaces such a folder without
/// --overwrite; any other non-empty folder is a user's (issue 29).
bool is_causalflow_export(const std::string& dir);

/// Why `c` cannot be written in the gpt2 layout ("" = it can), naming the field: learned positions,
/// LayerNorm, full attention with implicit d_head at every layer, a GELU MLP (arch.mlp gelu-tanh ->
/// activation_function "gelu_new", gelu -> "gelu") of any width (arch.d_ff -> n_inner), one
/// key/value head per head, sequential residuals and no embedding norm are required; norm_eps
/// (layer_norm_epsilon) and tied_head (tie_word_embeddings) are written. Models without qkv,
/// projection or MLP biases are exported with zero biases.
std::string gpt2_export_blocker(const nn::ModelConfig& c);

/// Write `model` to directory `dir` (created if missing) as config.json (model_type gpt2,
/// GPT2LMHeadModel) + model.safetensors (F32, "transformer."-prefixed GPT-2 names, Conv1D
/// [in, out] layouts, __metadata__ {"format": "pt"}), each file atomically. Throws
/// cf::InvalidArgument (before creating anything) when gpt2_export_blocker(config) is not empty.
void export_gpt2(const nn::Model<float>& model, const std::string& dir);

}  // namespace cf::hf
