#include "cf/nn/config.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

#include "cf/core/error.hpp"
#include "cf/core/list.hpp"
#include "cf/nn/attention_variant.hpp"

namespace cf::nn {
namespace {
std::string lower(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}
std::string trim(const std::string& s) {
  auto a = s.find_first_not_of(" \t");
  if (a == std::string::npos) return "";
  auto b = s.find_last_not_of(" \t");
  return s.substr(a, b - a + 1);
}
}  // namespace

std::string attn_name(AttnKind k) {
  if (is_registered_variant(k)) return attention_variant(k).name;
  return std::string(kAttnKinds.name(k));
}
std::string pos_name(PosKind k) { return std::string(kPosKinds.name(k)); }
std::string norm_name(NormKind k) { return std::string(kNormKinds.name(k)); }
std::string alibi_slopes_name(AlibiSlopes s) { return std::string(kAlibiSlopes.name(s)); }

AttnKind parse_attn_kind(const std::string& s0) {
  const std::string s = lower(trim(s0));
  if (const auto k = kAttnKinds.find(s)) return *k;
  AttnKind registered;
  if (find_registered_variant(s, registered)) return registered;
  throw InvalidArgument(str("unknown attention variant '", s0, "' (known: ", kAttnNamesShown, ")"));
}
PosKind parse_pos_kind(const std::string& s0) {
  if (const auto k = kPosKinds.find(lower(trim(s0)))) return *k;
  throw InvalidArgument(str("unknown position scheme '", s0, "' (known: ", kPosKinds.list(), ")"));
}
NormKind parse_norm_kind(const std::string& s0) {
  if (const auto k = kNormKinds.find(lower(trim(s0)))) return *k;
  throw InvalidArgument(str("unknown normalisation '", s0, "' (known: ", kNormKinds.list(), ")"));
}

std::vector<LayerConfig> parse_schedule(const std::string& schedule, int n_layer, const LayerConfig& proto) {
  require(n_layer >= 1, "n_layer must be >= 1 (got ", n_layer, ")");
  std::vector<LayerConfig> out;
  for (const std::string& t : split_list(schedule, "--attn")) {
    int count = 1;
    // "name*3" or "name x3"
    auto star = t.find('*');
    auto xs = t.rfind(" x");
    std::string name = t;
    std::string num;
    if (star != std::string::npos) {
      name = t.substr(0, star);
      num = t.substr(star + 1);
    } else if (xs != std::string::npos) {
      name = t.substr(0, xs);
      num = t.substr(xs + 2);
    }
    if (!num.empty()) {
      num = trim(num);
      require(!num.empty() && std::all_of(num.begin(), num.end(), ::isdigit) && num.size() < 6, "bad repeat count '",
              num, "' in schedule entry '", t, "' (use name*3 or 'name x3')");
      count = std::stoi(num);
      require(count >= 1, "repeat count must be >= 1 in '", t, "'");
    }
    LayerConfig lc = proto;
    lc.attn = parse_attn_kind(name);
    for (int i = 0; i < count; ++i) out.push_back(lc);
  }
  require(!out.empty(), "attention schedule is empty");
  if (out.size() == 1) out.assign(static_cast<std::size_t>(n_layer), out[0]);
  require(static_cast<int>(out.size()) == n_layer, "attention schedule '", schedule, "' has ", out.size(),
          " layers but n_layer = ", n_layer);
  return out;
}

ModelConfig gpt2_small_config(const std::string& attn, bool qkv_bias) {
  ModelConfig c;
  c.vocab_size = 50257;
  c.block_size = 1024;
  c.n_layer = 12;
  c.n_head = 12;
  c.d_model = 768;
  c.bias = qkv_bias;
  c.proj_bias = true;
  c.layers = parse_schedule(attn, c.n_layer, LayerConfig{});
  validate(c);
  return c;
}

graph::Pattern mask_pattern(const LayerConfig& lc) {
  graph::Pattern p;
  p.b = lc.b;
  p.w = lc.w;
  p.e = lc.e;
  switch (lc.attn) {
    case AttnKind::Block:
      p.kind = graph::PatternKind::Block;
      break;
    case AttnKind::Swa:
      p.kind = graph::PatternKind::Swa;
      break;
    case AttnKind::Bridge:
      p.kind = graph::PatternKind::Bridge;
      break;
    case AttnKind::Pbb:
      p.kind = graph::PatternKind::Pbb;
      break;
    case AttnKind::SeBridge:
      p.kind = graph::PatternKind::SeBridge;
      break;
    default:
      p.kind = graph::PatternKind::Full;
      break;
  }
  return p;
}

int head_dim(const ModelConfig& c, int l) {
  const int dh = c.layers.at(static_cast<std::size_t>(l)).d_head;
  return dh > 0 ? dh : c.d_model / c.n_head;
}

void validate(const ModelConfig& c) {
  require(c.vocab_size >= 2 && c.vocab_size <= 1000000, "vocab_size must be in [2, 1e6] (got ", c.vocab_size, ")");
  require(c.block_size >= 1 && c.block_size <= 65536, "block_size must be in [1, 65536] (got ", c.block_size, ")");
  require(c.n_layer >= 1 && c.n_layer <= 256, "n_layer must be in [1, 256] (got ", c.n_layer, ")");
  require(c.n_head >= 1 && c.n_head <= 1024, "n_head must be in [1, 1024] (got ", c.n_head, ")");
  require(c.d_model >= 1 && c.d_model <= 65536, "d_model must be in [1, 65536] (got ", c.d_model, ")");
  require(static_cast<int>(c.layers.size()) == c.n_layer, "layers has ", c.layers.size(),
          " entries but n_layer = ", c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const auto& lc = c.layers[static_cast<std::size_t>(l)];
    if (lc.d_head == 0)
      require(c.d_model % c.n_head == 0, "d_model % n_head must be 0 when d_head is implicit (d_model = ", c.d_model,
              ", n_head = ", c.n_head, ")");
    require(lc.d_head >= 0 && lc.d_head <= 4096, "layer ", l, ": d_head must be in [0, 4096] (got ", lc.d_head, ")");
    const int dh = head_dim(c, l);
    if (c.pos == PosKind::Rope) require(dh % 2 == 0, "layer ", l, ": RoPE needs an even d_head (got ", dh, ")");
    const graph::Pattern p = mask_pattern(lc);
    try {
      graph::validate(p, c.block_size);
    } catch (const InvalidArgument& e) {
      throw InvalidArgument(str("layer ", l, " (", attn_name(lc.attn), "): ", e.what()));
    }
    if (lc.attn == AttnKind::Sd)
      require(lc.sd_eps > 0 && std::isfinite(lc.sd_eps), "layer ", l,
              ": S-D damping offset sd_eps must be finite and > 0 (got ", lc.sd_eps, ")");
  }
  validate_arch(c);
}

nlohmann::json to_json(const ModelConfig& c) {
  nlohmann::json j;
  j["vocab_size"] = c.vocab_size;
  j["block_size"] = c.block_size;
  j["n_layer"] = c.n_layer;
  j["n_head"] = c.n_head;
  j["d_model"] = c.d_model;
  j["pos"] = pos_name(c.pos);
  j["norm"] = norm_name(c.norm);
  j["bias"] = c.bias;
  j["proj_bias"] = c.proj_bias;
  j["layers"] = nlohmann::json::array();
  for (std::size_t l = 0; l < c.layers.size(); ++l) {
    const auto& lc = c.layers[l];
    j["layers"].push_back({{"attn", attn_name(lc.attn)},
                           {"b", lc.b},
                           {"w", lc.w},
                           {"e", lc.e},
                           {"fusion", graph::fusion_name(lc.fusion)},
                           {"d_head", head_dim(c, static_cast<int>(l))},
                           {"sd_eps", lc.sd_eps}});
  }
  if (!(c.arch == ArchVariant{})) j["arch"] = arch_to_json(c.arch);
  return j;
}

namespace {

// Typed reads of one config field: the message names the field (with its path, e.g.
// "layers[2].w") and what was expected, never a raw nlohmann::json exception text.
const nlohmann::json* field(const nlohmann::json& obj, const std::string& path, const char* key, bool required) {
  const auto it = obj.find(key);
  if (it == obj.end()) {
    require(!required, "model config: missing field '", path, key, "'");
    return nullptr;
  }
  return &*it;
}

int int_field(const nlohmann::json& obj, const std::string& path, const char* key, bool required, int fallback,
              long long lo, long long hi) {
  const nlohmann::json* v = field(obj, path, key, required);
  if (!v) return fallback;
  require(v->is_number_integer(), "model config: field '", path, key, "' must be an integer (got ", v->dump(), ")");
  const long long x =
      v->is_number_unsigned() && v->get<unsigned long long>() > (1ULL << 62) ? (1LL << 62) : v->get<long long>();
  require(x >= lo && x <= hi, "model config: field '", path, key, "' must be in [", lo, ", ", hi, "] (got ", v->dump(),
          ")");
  return static_cast<int>(x);
}

double real_field(const nlohmann::json& obj, const std::string& path, const char* key, double fallback) {
  const nlohmann::json* v = field(obj, path, key, false);
  if (!v) return fallback;
  require(v->is_number(), "model config: field '", path, key, "' must be a number (got ", v->dump(), ")");
  const double x = v->get<double>();
  require(std::isfinite(x), "model config: field '", path, key, "' must be finite (got ", v->dump(), ")");
  return x;
}

bool bool_field(const nlohmann::json& obj, const std::string& path, const char* key, bool fallback) {
  const nlohmann::json* v = field(obj, path, key, false);
  if (!v) return fallback;
  require(v->is_boolean(), "model config: field '", path, key, "' must be true or false (got ", v->dump(), ")");
  return v->get<bool>();
}

std::string string_field(const nlohmann::json& obj, const std::string& path, const char* key, bool required,
                         const std::string& fallback) {
  const nlohmann::json* v = field(obj, path, key, required);
  if (!v) return fallback;
  require(v->is_string(), "model config: field '", path, key, "' must be a string (got ", v->dump(), ")");
  return v->get<std::string>();
}

void no_unknown_keys(const nlohmann::json& obj, const std::string& where, std::initializer_list<const char*> known) {
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    const bool ok = std::any_of(known.begin(), known.end(), [&](const char* k) { return it.key() == k; });
    std::string list;
    for (const char* k : known) list += std::string(list.empty() ? "" : ", ") + k;
    require(ok, "model config: unknown field '", where, it.key(), "' (known: ", list, ")");
  }
}

}  // namespace

ModelConfig config_from_json(const nlohmann::json& j) {
  require(j.is_object(), "model config must be a JSON object (got ", j.type_name(), ")");
  no_unknown_keys(j, "",
                  {"vocab_size", "block_size", "n_layer", "n_head", "d_model", "pos", "norm", "bias", "proj_bias",
                   "layers", "arch"});
  ModelConfig c;
  c.vocab_size = int_field(j, "", "vocab_size", true, 0, 2, 1000000);
  c.block_size = int_field(j, "", "block_size", true, 0, 1, 65536);
  c.n_layer = int_field(j, "", "n_layer", true, 0, 1, 256);
  c.n_head = int_field(j, "", "n_head", true, 0, 1, 1024);
  c.d_model = int_field(j, "", "d_model", true, 0, 1, 65536);
  c.pos = parse_pos_kind(string_field(j, "", "pos", false, "learned"));
  c.norm = parse_norm_kind(string_field(j, "", "norm", false, "layernorm"));
  c.bias = bool_field(j, "", "bias", true);
  c.proj_bias = bool_field(j, "", "proj_bias", c.bias);
  const nlohmann::json* layers = field(j, "", "layers", true);
  require(layers->is_array(), "model config: field 'layers' must be an array (got ", layers->type_name(), ")");
  require(static_cast<int>(layers->size()) == c.n_layer, "model config: field 'layers' has ", layers->size(),
          " entries but n_layer = ", c.n_layer);
  for (std::size_t l = 0; l < layers->size(); ++l) {
    const nlohmann::json& lj = (*layers)[l];
    const std::string path = str("layers[", l, "].");
    require(lj.is_object(), "model config: field 'layers[", l, "]' must be an object (got ", lj.type_name(), ")");
    no_unknown_keys(lj, path, {"attn", "b", "w", "e", "fusion", "d_head", "sd_eps"});
    LayerConfig lc;
    lc.attn = parse_attn_kind(string_field(lj, path, "attn", true, ""));
    lc.b = int_field(lj, path, "b", false, 128, 1, 2147483647);
    lc.w = int_field(lj, path, "w", false, 128, 1, 2147483647);
    lc.e = int_field(lj, path, "e", false, 64, 1, 2147483647);
    const std::string f = string_field(lj, path, "fusion", false, "branch");
    const auto fusion = graph::kFusions.find(f);
    require(fusion.has_value(), "model config: field '", path, "fusion' must be ", graph::kFusions.list(" or "),
            " (got '", f, "')");
    lc.fusion = *fusion;
    lc.d_head = int_field(lj, path, "d_head", false, 0, 0, 4096);
    lc.sd_eps = real_field(lj, path, "sd_eps", 0.1);
    c.layers.push_back(lc);
  }
  if (const nlohmann::json* arch = field(j, "", "arch", false)) {
    try {
      c.arch = arch_from_json(*arch);
    } catch (const nlohmann::json::exception& e) {
      throw InvalidArgument(str("model config: field 'arch' is malformed (", e.what(), ")"));
    }
  }
  validate(c);
  return c;
}

std::int64_t param_count(const ModelConfig& c) {
  validate(c);
  const std::int64_t C = c.d_model, H = c.n_head;
  std::int64_t n = static_cast<std::int64_t>(c.vocab_size) * C;
  if (c.pos == PosKind::Learned) n += static_cast<std::int64_t>(c.block_size) * C;
  const bool ln = c.norm == NormKind::LayerNorm;
  // a norm's parameter count: weight + bias (LayerNorm), weight (RMSNorm), nothing (none)
  const std::int64_t nrm = ln ? 2 * C : c.norm == NormKind::RMSNorm ? C : 0;
  const std::int64_t F = ffn_dim(c), KV = kv_heads(c);
  const bool glu = c.arch.mlp == MlpKind::SwiGLU;
  for (int l = 0; l < c.n_layer; ++l) {
    const std::int64_t dh = head_dim(c, l), HD = H * dh, QKV = (H + 2 * KV) * dh;
    n += 2 * nrm;
    n += QKV * C + (c.bias ? QKV : 0) + C * HD + (c.proj_bias ? C : 0);
    for (const VariantParam& t : variant_params(c, l)) {  // the unit's own block (S-D damping, runway B)
      std::int64_t size = 1;
      for (std::int64_t d : t.shape) size *= d;
      n += size;
    }
    n += (glu ? 2 : 1) * F * C + F * C + (c.arch.mlp_bias ? (glu ? 2 : 1) * F + C : 0);
  }
  n += nrm;
  if (c.arch.emb_norm) n += nrm;
  if (!c.arch.tied_head) n += static_cast<std::int64_t>(c.vocab_size) * C;
  return n;
}

}  // namespace cf::nn
