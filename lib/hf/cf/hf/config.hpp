#pragma once
// Hugging Face config.json of the four supported decoder families, mapped onto cf::nn::ModelConfig
// (issue 13, docs/hf.md): gpt2 (GPT2LMHeadModel), gpt_neox (Pythia), bloom, and llama (also the
// qwen2 / mistral-without-sliding-window layouts: RMSNorm, SwiGLU, GQA, rope_theta). The key
// spellings the HF config classes accept are accepted (e.g. BLOOM n_embed | hidden_size, n_head |
// num_attention_heads; GPT-2 n_embd | hidden_size). Options the causalflow model cannot express
// (rope_scaling, sliding windows, post-LayerNorm residuals, ...) are refused with a message.
#include <nlohmann/json.hpp>
#include <string>

#include "cf/core/enum_table.hpp"
#include "cf/nn/config.hpp"

namespace cf::hf {

/// The model families read from config.json "model_type".
enum class Family { Gpt2, GptNeox, Bloom, Llama };

/// The families' names (their Hugging Face model_type; parse_hf_config maps further model types,
/// e.g. qwen2 and mistral, onto Llama).
inline constexpr EnumTable kFamilies{std::array{
    EnumEntry<Family>{Family::Gpt2, "gpt2"},
    EnumEntry<Family>{Family::GptNeox, "gpt_neox"},
    EnumEntry<Family>{Family::Bloom, "bloom"},
    EnumEntry<Family>{Family::Llama, "llama"},
}};

/// "gpt2", "gpt_neox", "bloom", "llama".
std::string family_name(Family f);

/// A parsed config.json: the family and the equivalent causalflow config. `qkv_bias` / `proj_bias`
/// mirror config.bias / config.proj_bias; `tied` = tie_word_embeddings.
struct HfConfig {
  Family family = Family::Gpt2;
  std::string model_type;  ///< as written in the file ("qwen2" maps to Family::Llama)
  nn::ModelConfig config;
};

/// Parse a config.json object. `label` names the file in messages. Throws cf::InvalidArgument
/// naming the key and value for a missing/malformed key, an unknown model_type or an option the
/// causalflow model does not implement.
HfConfig parse_hf_config(const nlohmann::json& j, const std::string& label);

/// Read `<dir>/config.json` and parse it (cf::InvalidArgument if absent or not JSON).
HfConfig read_hf_config(const std::string& dir);

/// Whether `path` is a directory holding a config.json (a Hugging Face checkpoint directory).
bool is_hf_directory(const std::string& path);

}  // namespace cf::hf
