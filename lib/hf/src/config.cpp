#include "cf/hf/config.hpp"

#include <cmath>
#include <filesystem>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"

namespace cf::hf {

namespace {

// Reads keys of a config object under any of the spellings the HF config classes accept.
struct Keys {
  const nlohmann::json& j;
  const std::string& label;

  const nlohmann::json* find(std::initializer_list<const char*> names) const {
    for (const char* n : names)
      if (j.contains(n) && !j[n].is_null()) return &j[n];
    return nullptr;
  }
  static std::string spell(std::initializer_list<const char*> names) {
    std::string s;
    for (const char* n : names) s += std::string(s.empty() ? "" : " | ") + n;
    return s;
  }
  // An integer in [lo, hi], checked before anything is sized by it (the message states the range).
  int integer(std::initializer_list<const char*> names, const int* fallback = nullptr, std::int64_t lo = 0,
              std::int64_t hi = 1LL << 30) const {
    const nlohmann::json* v = find(names);
    if (!v) {
      require(fallback != nullptr, "config '", label, "': missing key ", spell(names));
      return *fallback;
    }
    const bool in_range = v->is_number_unsigned() ? v->get<std::uint64_t>() <= static_cast<std::uint64_t>(hi) &&
                                                        v->get<std::uint64_t>() >= static_cast<std::uint64_t>(lo)
                          : v->is_number_integer() ? v->get<std::int64_t>() >= lo && v->get<std::int64_t>() <= hi
                                                   : false;
    require(in_range, "config '", label, "': ", spell(names), " must be an integer in [", lo, ", ", hi, "] (got ",
            v->dump(), ")");
    return static_cast<int>(v->get<std::int64_t>());
  }
  int integer_or(std::initializer_list<const char*> names, int fallback) const { return integer(names, &fallback); }
  int integer_in(std::initializer_list<const char*> names, std::int64_t lo, std::int64_t hi) const {
    return integer(names, nullptr, lo, hi);
  }
  double number_or(std::initializer_list<const char*> names, double fallback) const {
    const nlohmann::json* v = find(names);
    if (!v) return fallback;
    require(v->is_number() && std::isfinite(v->get<double>()), "config '", label, "': ", spell(names),
            " must be a number (got ", v->dump(), ")");
    return v->get<double>();
  }
  bool boolean_or(std::initializer_list<const char*> names, bool fallback) const {
    const nlohmann::json* v = find(names);
    if (!v) return fallback;
    require(v->is_boolean(), "config '", label, "': ", spell(names), " must be true or false (got ", v->dump(), ")");
    return v->get<bool>();
  }
  std::string string_or(std::initializer_list<const char*> names, const std::string& fallback) const {
    const nlohmann::json* v = find(names);
    if (!v) return fallback;
    require(v->is_string(), "config '", label, "': ", spell(names), " must be a string (got ", v->dump(), ")");
    return v->get<std::string>();
  }
  void refuse_if_set(const char* name, const std::string& why) const {
    require(!j.contains(name) || j[name].is_null() || j[name] == false, "config '", label, "': ", name, " = ",
            j.contains(name) ? j[name].dump() : "", " is not supported (", why, ")");
  }
};

nn::MlpKind activation(const Keys& k, std::initializer_list<const char*> names, const std::string& fallback) {
  const std::string a = k.string_or(names, fallback);
  // gelu_fast is the same tanh approximation with sqrt(2/pi) written to 10 digits (FastGELUActivation)
  if (a == "gelu_new" || a == "gelu_pytorch_tanh" || a == "gelu_fast") return nn::MlpKind::GeluTanh;
  if (a == "gelu") return nn::MlpKind::Gelu;
  throw InvalidArgument(str("config '", k.label, "': ", Keys::spell(names), " = '", a,
                            "' is not supported (known: gelu_new, gelu_pytorch_tanh, gelu_fast, gelu)"));
}

void common_sizes(const Keys& k, nn::ModelConfig& c, std::initializer_list<const char*> hidden,
                  std::initializer_list<const char*> layers, std::initializer_list<const char*> heads) {
  // The ranges of nn::validate (lib/nn/src/config.cpp), checked here already: the layer list is
  // sized by n_layer before validate runs, so n_layer = 1e8 would allocate gigabytes first.
  c.vocab_size = k.integer_in({"vocab_size"}, 2, 1000000);
  c.d_model = k.integer_in(hidden, 1, 65536);
  c.n_layer = k.integer_in(layers, 1, 256);
  c.n_head = k.integer_in(heads, 1, 1024);
}

}  // namespace

std::string family_name(Family f) { return std::string(kFamilies.name(f)); }

HfConfig parse_hf_config(const nlohmann::json& j, const std::string& label) {
  require(j.is_object(), "config '", label, "' is not a JSON object");
  const Keys k{j, label};
  HfConfig h;
  h.model_type = k.string_or({"model_type"}, "");
  require(!h.model_type.empty(), "config '", label, "' has no model_type (supported: gpt2, gpt_neox, bloom, llama, ",
          "qwen2, mistral)");
  nn::ModelConfig& c = h.config;
  c.bias = c.proj_bias = true;
  if (h.model_type == "gpt2") {
    h.family = Family::Gpt2;
    common_sizes(k, c, {"n_embd", "hidden_size"}, {"n_layer", "num_hidden_layers"}, {"n_head", "num_attention_heads"});
    c.block_size = k.integer({"n_positions", "max_position_embeddings", "n_ctx"});
    c.pos = nn::PosKind::Learned;
    c.norm = nn::NormKind::LayerNorm;
    c.arch.norm_eps = k.number_or({"layer_norm_epsilon"}, 1e-5);
    c.arch.mlp = activation(k, {"activation_function"}, "gelu_new");
    // n_inner: the MLP width (None = 4 n_embd). 0 would be a zero-width MLP in GPT2MLP but the
    // causalflow default (4 d_model) here: refused, as is anything nn::validate_arch cannot hold.
    const int no_inner = 0;
    c.arch.d_ff = k.integer({"n_inner"}, &no_inner, 1, 1 << 20);
    // GPT2LMHeadModel reads lm_head.weight when tie_word_embeddings is false (an untied head scored
    // with wte instead gave other logits with exit 0)
    c.arch.tied_head = k.boolean_or({"tie_word_embeddings"}, true);
    require(k.boolean_or({"scale_attn_weights"}, true), "config '", label,
            "': scale_attn_weights = false is not supported (causalflow scales scores by 1/sqrt(d_head))");
    k.refuse_if_set("scale_attn_by_inverse_layer_idx", "per-layer score scaling");
    k.refuse_if_set("add_cross_attention", "cross-attention");
  } else if (h.model_type == "gpt_neox") {
    h.family = Family::GptNeox;
    common_sizes(k, c, {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"});
    c.block_size = k.integer_or({"max_position_embeddings"}, 2048);
    c.pos = nn::PosKind::Rope;
    c.norm = nn::NormKind::LayerNorm;
    c.arch.norm_eps = k.number_or({"layer_norm_eps"}, 1e-5);
    c.arch.mlp = activation(k, {"hidden_act"}, "gelu");
    c.arch.d_ff = k.integer({"intermediate_size"});
    c.arch.parallel_residual = k.boolean_or({"use_parallel_residual"}, true);
    c.arch.tied_head = k.boolean_or({"tie_word_embeddings"}, false);
    c.arch.rope_theta = k.number_or({"rope_theta", "rotary_emb_base"}, 10000.0);
    c.bias = c.proj_bias = k.boolean_or({"attention_bias"}, true);
    const double pct = k.number_or({"rotary_pct", "partial_rotary_factor"}, 0.25);
    require(pct > 0 && pct <= 1, "config '", label, "': rotary_pct must be in (0, 1] (got ", pct, ")");
    require(c.d_model % c.n_head == 0, "config '", label, "': hidden_size ", c.d_model,
            " is not a multiple of num_attention_heads ", c.n_head);
    c.arch.rope_dim = static_cast<int>(c.d_model / c.n_head * pct);  // int() truncation, as the HF code
    require(c.arch.rope_dim % 2 == 0 && c.arch.rope_dim > 0, "config '", label, "': rotary dimensions int(d_head * ",
            "rotary_pct) = ", c.arch.rope_dim, " must be even and positive");
    k.refuse_if_set("rope_scaling", "scaled RoPE");
  } else if (h.model_type == "bloom") {
    h.family = Family::Bloom;
    common_sizes(k, c, {"hidden_size", "n_embed"}, {"n_layer", "num_hidden_layers"}, {"n_head", "num_attention_heads"});
    c.block_size = k.integer_or({"seq_length", "max_position_embeddings"}, 2048);
    c.pos = nn::PosKind::Alibi;
    c.norm = nn::NormKind::LayerNorm;
    c.arch.norm_eps = k.number_or({"layer_norm_epsilon"}, 1e-5);
    c.arch.emb_norm = true;
    c.arch.tied_head = k.boolean_or({"tie_word_embeddings"}, true);
    k.refuse_if_set("apply_residual_connection_post_layernorm", "post-LayerNorm residual");
    // BLOOM's build_alibi_tensor slopes for any head count (interleaved when n_head is not a power
    // of two, e.g. BLOOM-176B's 112 heads): cf/core/alibi.hpp, shared with lib/rollout's "hf" recipe.
    c.arch.alibi = nn::AlibiSlopes::Hf;
  } else if (h.model_type == "llama" || h.model_type == "qwen2" || h.model_type == "mistral") {
    h.family = Family::Llama;
    common_sizes(k, c, {"hidden_size"}, {"num_hidden_layers"}, {"num_attention_heads"});
    c.block_size = std::min(k.integer_or({"max_position_embeddings"}, 2048), 65536);
    c.pos = nn::PosKind::Rope;
    c.norm = nn::NormKind::RMSNorm;
    c.arch.norm_eps = k.number_or({"rms_norm_eps"}, 1e-6);
    c.arch.mlp = nn::MlpKind::SwiGLU;
    const std::string act = k.string_or({"hidden_act"}, "silu");
    require(act == "silu" || act == "swish", "config '", label, "': hidden_act = '", act,
            "' is not supported (the SwiGLU MLP needs silu)");
    c.arch.d_ff = k.integer({"intermediate_size"});
    c.arch.n_kv_head = k.integer_or({"num_key_value_heads"}, c.n_head);
    c.arch.rope_theta = k.number_or({"rope_theta"}, 10000.0);
    c.arch.tied_head = k.boolean_or({"tie_word_embeddings"}, false);
    c.arch.mlp_bias = k.boolean_or({"mlp_bias"}, false);
    if (h.model_type == "qwen2") {
      c.bias = true;  // Qwen2: q/k/v projections always carry a bias, o_proj never
      c.proj_bias = false;
      require(!k.boolean_or({"use_sliding_window"}, false), "config '", label,
              "': use_sliding_window = true is not supported");
    } else {
      c.bias = c.proj_bias = k.boolean_or({"attention_bias"}, false);
      if (h.model_type == "mistral") k.refuse_if_set("sliding_window", "sliding-window attention");
    }
    k.refuse_if_set("rope_scaling", "scaled RoPE");
    const int dh = k.integer_or({"head_dim"}, c.n_head ? c.d_model / c.n_head : 0);
    if (dh * c.n_head != c.d_model || c.d_model % c.n_head != 0) {
      c.layers.assign(static_cast<std::size_t>(c.n_layer), nn::LayerConfig{});
      for (auto& lc : c.layers) lc.d_head = dh;
    }
  } else {
    throw InvalidArgument(str("config '", label, "': model_type '", h.model_type,
                              "' is not supported (supported: gpt2, gpt_neox, bloom, llama, qwen2, mistral)"));
  }
  if (c.layers.empty()) c.layers.assign(static_cast<std::size_t>(c.n_layer), nn::LayerConfig{});
  try {
    nn::validate(c);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("config '", label, "': ", e.what()));
  }
  return h;
}

HfConfig read_hf_config(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "config.json").string();
  nlohmann::json j;
  try {
    j = cf::parse_json(read_file(path), path);
  } catch (const nlohmann::json::exception& e) {
    throw InvalidArgument(str("'", path, "' is not valid JSON (", e.what(), ")"));
  }
  return parse_hf_config(j, path);
}

bool is_hf_directory(const std::string& path) {
  std::error_code ec;
  return std::filesystem::is_directory(path, ec) &&
         std::filesystem::exists(std::filesystem::path(path) / "config.json", ec);
}

}  // namespace cf::hf
