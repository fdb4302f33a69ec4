#pragma once
// Model configuration of the embedded trainer (issue 4, docs/spec.md §4): a decoder-only, pre-LN (or
// norm-free) GPT with tied embeddings and one attention variant per layer. The JSON form is the
// `config` attribute of checkpoints (docs/checkpoint_format.md).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "cf/core/enum_table.hpp"
#include "cf/graph/mask.hpp"

namespace cf::nn {

/// Attention variant of one layer. Full/Block/Swa/Bridge/Pbb/SeBridge are softmax attention
/// restricted to the mask families of docs/spec.md §1 (Boundary repair (Yang)); RunwayDot/RunwayBilinear are full
/// causal attention with runway-aware rewiring (Runway (Lee & Clark) Eqs. 8-14, docs/spec.md §4); Sd is skew-routing
/// plus diagonal-damping attention (Routing/filtering (Jamil & Kapadia), docs/spec.md §3); Linear is ELU+1 linear
/// attention (docs/spec.md §3).
enum class AttnKind { Full, Block, Swa, Bridge, Pbb, SeBridge, RunwayDot, RunwayBilinear, Sd, Linear };

/// Position scheme: learned table (wpe), rotary (RoPE, base 10000, interleaved pairs (2i, 2i+1)),
/// ALiBi (slopes 2^(-8(h+1)/H), the "simple" scheme of docs/spec.md §7.3) or none.
enum class PosKind { Learned, Rope, Alibi, None };

/// Normalisation: pre-LN LayerNorm (ln_1, ln_2, ln_f) or none at all (docs/spec.md §3/§4 S–D variant);
/// RMSNorm (weight only, x / sqrt(mean(x^2) + eps) * w; Llama-family imports, issue 13).
enum class NormKind { LayerNorm, None, RMSNorm };

/// One layer's attention. b = block size, w = window / bridge width (bridge h = w/2), e = SE-Bridge
/// extension (docs/spec.md §1 notation); fusion = how bridge messages join the block path (Boundary repair (Yang)
/// Eqs. 34-36); d_head = head dimension of this layer (0 = d_model / n_head); sd_eps = fixed
/// positive damping offset of S–D attention (docs/spec.md §7.11; eps = 0 diverges).
struct LayerConfig {
  AttnKind attn = AttnKind::Full;
  int b = 128, w = 128, e = 64;
  graph::Fusion fusion = graph::Fusion::Branch;
  int d_head = 0;
  double sd_eps = 0.1;
};

/// MLP of every block: GELU with the tanh approximation (GPT-2 "gelu_new", BLOOM), exact erf GELU
/// (GPT-NeoX "gelu"), or SwiGLU (Llama: c_proj(silu(gate) * up), gate and up stacked in c_fc).
enum class MlpKind { GeluTanh, Gelu, SwiGLU };

/// ALiBi slope recipe (cf/core/alibi.hpp): Simple = 2^(-8(h+1)/H) (the trainer's models), Hf =
/// Hugging Face BLOOM's build_alibi_tensor (interleaved slopes when H is not a power of two, e.g.
/// BLOOM-176B's 112 heads). The two agree for a power-of-two H.
enum class AlibiSlopes { Simple, Hf };

/// Architecture variants of imported Hugging Face families (issue 13); the defaults are the GPT-2
/// model of the trainer, and a default ArchVariant is not written to JSON (old files read as
/// before). d_ff = MLP hidden width (0 = 4 d_model); mlp_bias = biases on c_fc / mlp.c_proj;
/// n_kv_head = key/value heads of grouped-query attention (0 = n_head; n_head % n_kv_head == 0,
/// query head h reads kv head h / (n_head / n_kv_head)); parallel_residual: x + attn(ln_1 x) +
/// mlp(ln_2 x) (GPT-NeoX); rope_theta, rope_dim: RoPE base and rotated dimensions per head (the
/// first rope_dim, 0 = all; partial rotary of GPT-NeoX rotary_pct); emb_norm: a norm (emb_ln) on
/// the token embeddings (BLOOM word_embeddings_layernorm); tied_head false adds lm_head.weight
/// [vocab, d_model]; norm_eps: epsilon of every LayerNorm/RMSNorm; alibi: the slope recipe of
/// pos = alibi (JSON key "alibi_slopes", written only when "hf").
struct ArchVariant {
  MlpKind mlp = MlpKind::GeluTanh;
  int d_ff = 0;
  bool mlp_bias = true;
  int n_kv_head = 0;
  bool parallel_residual = false;
  double rope_theta = 10000.0;
  int rope_dim = 0;
  bool emb_norm = false;
  bool tied_head = true;
  double norm_eps = 1e-5;
  AlibiSlopes alibi = AlibiSlopes::Simple;
  bool operator==(const ArchVariant& o) const;
};

/// Whole-model configuration. `bias` = biases of attn.c_attn (qkv); `proj_bias` = bias of
/// attn.c_proj (JSON key "proj_bias", defaults to `bias` when absent so files with only "bias"
/// read as the format describes). MLP and LayerNorm always carry biases (GPT-2).
struct ModelConfig {
  int vocab_size = 256;
  int block_size = 256;
  int n_layer = 4;
  int n_head = 4;
  int d_model = 256;
  PosKind pos = PosKind::Learned;
  NormKind norm = NormKind::LayerNorm;
  bool bias = true;
  bool proj_bias = true;
  std::vector<LayerConfig> layers;  ///< exactly n_layer entries after validate()
  ArchVariant arch;                 ///< Hugging Face family variants (defaults: GPT-2)
};

/// MLP hidden width (arch.d_ff, or 4 d_model when 0).
int ffn_dim(const ModelConfig& c);
/// Key/value heads (arch.n_kv_head, or n_head when 0).
int kv_heads(const ModelConfig& c);
/// ALiBi slopes of the model's n_head heads in the recipe arch.alibi (cf::alibi_slopes_simple or
/// cf::alibi_slopes_hf); head h's bias is -slopes[h] (i - j).
std::vector<double> alibi_slopes(const ModelConfig& c);
/// Rotated dimensions per head in layer l (arch.rope_dim, or head_dim when 0).
int rope_dims(const ModelConfig& c, int l);
/// Names of MlpKind ("gelu-tanh", "gelu", "swiglu"; kMlpKinds below) and the inverse (exact
/// spelling; cf::InvalidArgument).
std::string mlp_name(MlpKind k);
MlpKind parse_mlp_kind(const std::string& s);
/// JSON of an ArchVariant (the "arch" key of the config JSON) and its inverse; validate_arch
/// checks its ranges against the rest of the config (throws cf::InvalidArgument).
nlohmann::json arch_to_json(const ArchVariant& a);
ArchVariant arch_from_json(const nlohmann::json& j);
void validate_arch(const ModelConfig& c);

/// The name tables of the enums above (cf/core/enum_table.hpp): canonical name (configs, reports,
/// checkpoints), then the other spellings the parsers accept. The attention variants registered at
/// run time (register_attention_variant) are found after the built-in table.
inline constexpr EnumTable kAttnKinds{std::array{
    EnumEntry<AttnKind>{AttnKind::Full, "full", "softmax"},
    EnumEntry<AttnKind>{AttnKind::Block, "block"},
    EnumEntry<AttnKind>{AttnKind::Swa, "swa"},
    EnumEntry<AttnKind>{AttnKind::Bridge, "bridge"},
    EnumEntry<AttnKind>{AttnKind::Pbb, "pbb"},
    EnumEntry<AttnKind>{AttnKind::SeBridge, "se-bridge", "sebridge se"},
    EnumEntry<AttnKind>{AttnKind::RunwayDot, "runway-dot"},
    EnumEntry<AttnKind>{AttnKind::RunwayBilinear, "runway-bilinear"},
    EnumEntry<AttnKind>{AttnKind::Sd, "sd", "s-d"},
    EnumEntry<AttnKind>{AttnKind::Linear, "linear", "elu-linear"},
}};
/// The built-in attention names as messages and train --help show them: kAttnKinds' names, with
/// the one alias users know (tests/nn check it against the table).
inline constexpr std::string_view kAttnNamesShown =
    "full|softmax, block, swa, bridge, pbb, se-bridge, runway-dot, runway-bilinear, sd, linear";
inline constexpr EnumTable kPosKinds{std::array{
    EnumEntry<PosKind>{PosKind::Learned, "learned"},
    EnumEntry<PosKind>{PosKind::Rope, "rope"},
    EnumEntry<PosKind>{PosKind::Alibi, "alibi"},
    EnumEntry<PosKind>{PosKind::None, "none"},
}};
inline constexpr EnumTable kNormKinds{std::array{
    EnumEntry<NormKind>{NormKind::LayerNorm, "layernorm", "ln"},
    EnumEntry<NormKind>{NormKind::None, "none"},
    EnumEntry<NormKind>{NormKind::RMSNorm, "rmsnorm"},
}};
inline constexpr EnumTable kMlpKinds{std::array{
    EnumEntry<MlpKind>{MlpKind::GeluTanh, "gelu-tanh", "gelu_new"},
    EnumEntry<MlpKind>{MlpKind::Gelu, "gelu"},
    EnumEntry<MlpKind>{MlpKind::SwiGLU, "swiglu"},
}};
inline constexpr EnumTable kAlibiSlopes{std::array{
    EnumEntry<AlibiSlopes>{AlibiSlopes::Simple, "simple"},
    EnumEntry<AlibiSlopes>{AlibiSlopes::Hf, "hf"},
}};

/// Canonical names ("full", "block", "swa", "bridge", "pbb", "se-bridge", "runway-dot",
/// "runway-bilinear", "sd", "linear" or a registered variant's; "learned", "rope", "alibi",
/// "none"; "layernorm", "none", "rmsnorm"; "simple", "hf"): the tables above.
std::string attn_name(AttnKind k);
std::string pos_name(PosKind k);
std::string norm_name(NormKind k);
std::string alibi_slopes_name(AlibiSlopes s);
/// Parse the names above (case-insensitive, surrounding blanks ignored; the aliases of the tables,
/// e.g. "softmax" = "full"); throw cf::InvalidArgument listing the known names.
AttnKind parse_attn_kind(const std::string& s);
PosKind parse_pos_kind(const std::string& s);
NormKind parse_norm_kind(const std::string& s);

/// Expand a schedule such as "swa,swa,swa,full", "swa*3,full" or "linear x4, softmax x8" into
/// n_layer layer configs copied from `proto` with the kind replaced. A single entry is repeated
/// to n_layer. Throws cf::InvalidArgument if the expanded length differs from n_layer or a name
/// is unknown.
std::vector<LayerConfig> parse_schedule(const std::string& schedule, int n_layer, const LayerConfig& proto);

/// GPT-2 small's shape: 12 layers x 768, 12 heads, vocabulary 50,257, block 1024, learned
/// positions, pre-LN, `attn` (a schedule, see parse_schedule) at every layer. qkv_bias = false
/// (attention output bias kept) is the "Standard" model of Routing/filtering (Jamil & Kapadia) Table 1.
ModelConfig gpt2_small_config(const std::string& attn = "full", bool qkv_bias = true);

/// Effective head dimension of layer l (d_head, or d_model / n_head when 0).
int head_dim(const ModelConfig& c, int l);

/// The lib/graph mask pattern of a layer (kind, b, w, e); variants that are not a mask family
/// (full, runway, S-D, linear) map to the full causal pattern.
graph::Pattern mask_pattern(const LayerConfig& lc);

/// Check every constraint (sizes >= 1, d_model % n_head == 0 when d_head is implicit, even d_head
/// with RoPE, mask parameters per graph::validate at n = block_size, sd_eps > 0, layers.size() ==
/// n_layer); throws cf::InvalidArgument naming the violated constraint and the values.
void validate(const ModelConfig& c);

/// JSON of the checkpoint `config` attribute (docs/checkpoint_format.md) and its inverse;
/// from_json validates and throws cf::InvalidArgument on missing or malformed keys.
nlohmann::json to_json(const ModelConfig& c);
ModelConfig config_from_json(const nlohmann::json& j);

/// Total number of trainable parameters (tied embeddings counted once). Runway-dot adds none,
/// runway-bilinear adds d_head^2 per such layer, S–D adds H (d_model + 1) per such layer, norm =
/// none removes 4 d_model per layer + 2 d_model (docs/spec.md §3/§4). GPT-2 small (12 x 768, 12 heads,
/// vocab 50257, block 1024, learned positions) without qkv bias has 124,412,160 (Routing/filtering (Jamil & Kapadia)
/// Table 1).
std::int64_t param_count(const ModelConfig& c);

}  // namespace cf::nn
