#include "cf/hf/checkpoint.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>

#include "cf/core/atomic_file.hpp"
#include "cf/core/error.hpp"
#include "cf/core/json.hpp"
#include "cf/data/token_file.hpp"
#include "cf/hf/safetensors.hpp"
#include "cf/hf/tensor_map.hpp"

namespace cf::hf {

namespace {

// Every stored tensor converted to float32 and placed where cf/hf/tensor_map.hpp says.
void import_tensors(const TensorStore& st, Family family, nn::Model<float>& m) {
  const auto has = [&st](const std::string& n) { return st.has(n); };
  for (const TensorPiece& piece : tensor_pieces(family, m.config, has)) {
    const std::vector<float> v = st.read(piece.hf, piece.shape);
    place_float(piece, v.data(), m.params.data() + m.layout.find(piece.cf).offset);
  }
}

}  // namespace

namespace {
namespace fs = std::filesystem;

// The FNV-1a 64 of a file, read in 1 MiB pieces.
std::string file_fnv1a64(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  require(static_cast<bool>(in), "cannot read '", path, "'");
  data::Fnv1a64 h;
  std::vector<char> buf(1 << 20);
  while (in) {
    in.read(buf.data(), static_cast<std::streamsize>(buf.size()));
    h.add(buf.data(), static_cast<std::size_t>(in.gcount()));
  }
  return h.hex();
}
}  // namespace

// A folder written by export_hf records its weights' size and checksum in config.json
// ("causalflow_weights"): an export interrupted between its two renames (new weights, old config)
// or weights replaced by hand are refused instead of being read under the wrong configuration.
void check_export_weights(const std::string& dir) {
  const std::string cfg = (fs::path(dir) / "config.json").string();
  const nlohmann::json j = cf::parse_json_file_text(read_file(cfg), cfg);  // an empty file: named, exit 2
  if (!j.is_object() || !j.contains("causalflow_weights")) return;         // not (or not yet) ours
  const nlohmann::json& w = j["causalflow_weights"];
  require(w.is_object() && w.contains("bytes") && w["bytes"].is_number_unsigned() && w.contains("fnv1a64") &&
              w["fnv1a64"].is_string(),
          "'", cfg, "': causalflow_weights must be {\"bytes\": N, \"fnv1a64\": HEX}");
  const std::string st = (fs::path(dir) / "model.safetensors").string();
  std::error_code ec;
  const auto size = fs::file_size(st, ec);
  require(!ec && size == w["bytes"].get<std::uint64_t>() && file_fnv1a64(st) == w["fnv1a64"].get<std::string>(), "'",
          st,
          "' is not the file its config.json was exported with (size or checksum differ: an "
          "interrupted export? export again)");
}
bool is_causalflow_export(const std::string& dir) {
  const std::string cfg = (fs::path(dir) / "config.json").string();
  const std::string st = (fs::path(dir) / "model.safetensors").string();
  std::error_code ec;
  if (!fs::is_regular_file(cfg, ec) || !fs::is_regular_file(st, ec)) return false;
  try {
    const nlohmann::json j = cf::parse_json(read_file(cfg), cfg);
    if (!j.is_object() || !j.contains("causalflow_weights") || !j["causalflow_weights"].is_object()) return false;
    const nlohmann::json& w = j["causalflow_weights"];
    if (!w.contains("bytes") || !w["bytes"].is_number_unsigned() || !w.contains("fnv1a64") || !w["fnv1a64"].is_string())
      return false;
    return fs::file_size(st, ec) == w["bytes"].get<std::uint64_t>() && !ec &&
           file_fnv1a64(st) == w["fnv1a64"].get<std::string>();
  } catch (const std::exception&) {
    return false;
  }
}

nn::Model<float> load_hf_model(const std::string& dir) {
  check_export_weights(dir);
  const HfConfig h = read_hf_config(dir);
  const TensorStore st(dir);
  nn::Model<float> m;
  m.config = h.config;
  m.layout = nn::make_layout(m.config);
  // The config is checked against the tensors BEFORE the parameters are allocated (a config with
  // sizes far beyond its tensors allocated first and ran out of memory, exit 1; issue 29): first
  // the embedding, the tensor every family starts with (dtype and [vocab_size, d_model]), then the
  // count: every parameter of the layout is read from some stored tensor, so a config asking for
  // more values than the files hold does not describe them (exit 2).
  for (const char* e : {"transformer.wte.weight", "wte.weight", "gpt_neox.embed_in.weight",
                        "transformer.word_embeddings.weight", "word_embeddings.weight", "model.embed_tokens.weight"})
    if (st.has(e)) {
      const TensorInfo& t = st.info(e);
      const std::string where = str("Hugging Face checkpoint '", dir, "' (", h.model_type, "): tensor '", e, "'");
      require(t.dtype == Dtype::F32 || t.dtype == Dtype::F16 || t.dtype == Dtype::BF16 || t.dtype == Dtype::F64, where,
              ": dtype ", dtype_name(t.dtype), " cannot be read as float (supported: F32, F16, BF16, F64)");
      const auto& got = t.shape;
      require(got == std::vector<std::int64_t>{m.config.vocab_size, m.config.d_model}, where, " has ", got.size(),
              " dimensions", got.size() == 2 ? str(" [", got[0], ", ", got[1], "]") : std::string(),
              " but config.json says [vocab_size, d_model] = [", m.config.vocab_size, ", ", m.config.d_model, "]");
    }
  const std::int64_t stored = st.total_elements();
  require(m.layout.total <= stored, "Hugging Face checkpoint '", dir, "' (", h.model_type, "): config.json describes ",
          m.layout.total, " parameters (vocab_size ", m.config.vocab_size, ", d_model ", m.config.d_model, ", n_layer ",
          m.config.n_layer, ") but its safetensors hold only ", stored,
          " values: the config does not describe these weights");
  m.params.assign(static_cast<std::size_t>(m.layout.total), 0.f);
  try {
    import_tensors(st, h.family, m);
  } catch (const InvalidArgument& e) {
    throw InvalidArgument(str("Hugging Face checkpoint '", dir, "' (", h.model_type, "): ", e.what()));
  }
  return m;
}

std::string gpt2_export_blocker(const nn::ModelConfig& c) {
  if (c.pos != nn::PosKind::Learned) return "position scheme '" + nn::pos_name(c.pos) + "' (gpt2 needs learned)";
  if (c.norm != nn::NormKind::LayerNorm) return "normalisation '" + nn::norm_name(c.norm) + "' (gpt2 needs layernorm)";
  for (int l = 0; l < c.n_layer; ++l) {
    const auto& lc = c.layers[static_cast<std::size_t>(l)];
    if (lc.attn != nn::AttnKind::Full)
      return str("layer ", l, " attention '", nn::attn_name(lc.attn), "' (gpt2 needs full causal attention)");
    if (lc.d_head != 0 && lc.d_head * c.n_head != c.d_model)
      return str("layer ", l, " d_head = ", lc.d_head, " (gpt2 needs d_model / n_head = ", c.d_model / c.n_head, ")");
  }
  // Each architecture field on its own, named as in the checkpoint's config (arch.*): what gpt2's
  // config.json expresses is written (n_inner, activation_function, layer_norm_epsilon,
  // tie_word_embeddings; absent biases as zeros), the rest is refused naming the field.
  const nn::ArchVariant& a = c.arch;
  if (a.mlp == nn::MlpKind::SwiGLU)
    return "arch.mlp = swiglu (gpt2's activation_function has no gated MLP: gelu_new or gelu only)";
  if (nn::kv_heads(c) != c.n_head)
    return str("arch.n_kv_head = ", a.n_kv_head, " (grouped-query attention; gpt2 has n_head = ", c.n_head,
               " key/value heads)");
  if (a.parallel_residual) return "arch.parallel_residual = true (gpt2 adds attention and MLP one after the other)";
  if (a.emb_norm) return "arch.emb_norm = true (a LayerNorm on the token embeddings; gpt2 has none)";
  return "";
}

static std::string gpt2_activation_name(nn::MlpKind k) {
  require(k != nn::MlpKind::SwiGLU, "arch.mlp = swiglu has no gpt2 activation_function");
  return k == nn::MlpKind::Gelu ? "gelu" : "gelu_new";
}

void export_gpt2(const nn::Model<float>& model, const std::string& dir) {
  namespace fs = std::filesystem;
  const nn::ModelConfig& c = model.config;
  const std::string why = gpt2_export_blocker(c);
  require(why.empty(), "cannot export this model in the gpt2 layout: ", why);
  require(static_cast<std::int64_t>(model.params.size()) == model.layout.total, "model has ", model.params.size(),
          " parameters but its layout needs ", model.layout.total);
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    require(fs::is_directory(dir, ec), "--to '", dir, "' exists and is not a directory");
    // an index there no longer shadows the exported model.safetensors (the single file is read
    // first, as transformers does); the export tool refuses or removes it (apps/export)
  }
  // Build everything in memory first: a failure below leaves no file behind.
  const std::int64_t C = c.d_model;
  std::vector<std::vector<float>> store;
  std::vector<TensorView> views;
  const float* P = model.params.data();
  auto direct = [&](const std::string& name) {
    const auto& t = model.layout.find(name);
    views.push_back({"transformer." + name, t.shape, P + t.offset});
  };
  auto transposed = [&](const std::string& name) {
    const auto& t = model.layout.find(name);
    const std::int64_t out = t.shape[0], in = t.shape[1];
    std::vector<float> v(static_cast<std::size_t>(out * in));
    transpose_blocked(P + t.offset, v.data(), out, in);
    store.push_back(std::move(v));
    views.push_back({"transformer." + name, {in, out}, nullptr});
  };
  auto zeros = [&](const std::string& name, std::int64_t n) {
    store.emplace_back(static_cast<std::size_t>(n), 0.f);
    views.push_back({"transformer." + name, {n}, nullptr});
  };
  store.reserve(static_cast<std::size_t>(8 * c.n_layer));
  direct("wte.weight");
  direct("wpe.weight");
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    direct(p + "ln_1.weight");
    direct(p + "ln_1.bias");
    transposed(p + "attn.c_attn.weight");
    if (c.bias)
      direct(p + "attn.c_attn.bias");
    else
      zeros(p + "attn.c_attn.bias", 3 * C);
    transposed(p + "attn.c_proj.weight");
    if (c.proj_bias)
      direct(p + "attn.c_proj.bias");
    else
      zeros(p + "attn.c_proj.bias", C);
    direct(p + "ln_2.weight");
    direct(p + "ln_2.bias");
    transposed(p + "mlp.c_fc.weight");
    if (c.arch.mlp_bias)
      direct(p + "mlp.c_fc.bias");
    else
      zeros(p + "mlp.c_fc.bias", nn::ffn_dim(c));
    transposed(p + "mlp.c_proj.weight");
    if (c.arch.mlp_bias)
      direct(p + "mlp.c_proj.bias");
    else
      zeros(p + "mlp.c_proj.bias", C);
  }
  direct("ln_f.weight");
  direct("ln_f.bias");
  if (!c.arch.tied_head) {
    const auto& t = model.layout.find("lm_head.weight");
    views.push_back({"lm_head.weight", t.shape, P + t.offset});
  }
  std::size_t k = 0;  // point the in-memory views at their buffers (store no longer reallocates)
  for (auto& v : views)
    if (!v.data) v.data = store[k++].data();
  const std::string st = safetensors_bytes(views, {{"format", "pt"}});
  nlohmann::json cj = {{"architectures", {"GPT2LMHeadModel"}},
                       {"model_type", "gpt2"},
                       {"vocab_size", c.vocab_size},
                       {"n_positions", c.block_size},
                       {"n_ctx", c.block_size},
                       {"n_embd", c.d_model},
                       {"n_layer", c.n_layer},
                       {"n_head", c.n_head},
                       // None = 4 n_embd, as GPT2MLP reads it
                       {"n_inner", c.arch.d_ff > 0 ? nlohmann::json(c.arch.d_ff) : nlohmann::json(nullptr)},
                       {"activation_function", gpt2_activation_name(c.arch.mlp)},
                       {"layer_norm_epsilon", c.arch.norm_eps},
                       {"resid_pdrop", 0.0},
                       {"embd_pdrop", 0.0},
                       {"attn_pdrop", 0.0},
                       {"scale_attn_weights", true},
                       {"tie_word_embeddings", c.arch.tied_head},
                       {"torch_dtype", "float32"},
                       {"causalflow_config", nn::to_json(c)},
                       {"causalflow_weights", {{"bytes", st.size()}, {"fnv1a64", data::fnv1a64_hex(st)}}}};
  const bool created = !fs::exists(dir, ec);
  if (created) fs::create_directories(dir, ec);
  require(fs::is_directory(dir, ec), "cannot create directory '", dir, "'");
  try {
    // one unit, config.json (which records the weights' checksum) last
    write_files_atomic({{(fs::path(dir) / "model.safetensors").string(), st},
                        {(fs::path(dir) / "config.json").string(), cj.dump(2) + "\n"}});
  } catch (...) {
    if (created) fs::remove_all(dir, ec);
    throw;
  }
}

}  // namespace cf::hf
