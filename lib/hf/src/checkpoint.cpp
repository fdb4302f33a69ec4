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

namespace cf::hf {

namespace {

using Shape = std::vector<std::int64_t>;

// dst [cols, rows] = src [rows, cols]^T in 64 x 64 tiles (a plain double loop strides through
// memory on one side and is ~10x slower for the 768 x 3072 GPT-2 matrices).
void transpose_blocked(const float* src, float* dst, std::int64_t rows, std::int64_t cols) {
  constexpr std::int64_t kB = 64;
  // omp-nothrow: a transpose of raw arrays (no allocation, no throwing call)
#pragma omp parallel for schedule(static)
  for (std::int64_t r0 = 0; r0 < rows; r0 += kB)
    for (std::int64_t c0 = 0; c0 < cols; c0 += kB)
      for (std::int64_t r = r0; r < std::min(r0 + kB, rows); ++r)
        for (std::int64_t c = c0; c < std::min(c0 + kB, cols); ++c) dst[c * rows + r] = src[r * cols + c];
}

// Copies HF tensors into the causalflow parameter array of `m`.
struct Importer {
  const TensorStore& st;
  nn::Model<float>& m;
  std::string prefix;  // "" or e.g. "transformer."

  std::vector<float> get(const std::string& name, const Shape& shape) const { return st.read(prefix + name, shape); }
  float* dst(const std::string& name) const { return m.params.data() + m.layout.find(name).offset; }
  // Same layout: copy.
  void copy(const std::string& hf, const std::string& cf) const {
    const auto& info = m.layout.find(cf);
    const auto v = get(hf, info.shape);
    std::copy(v.begin(), v.end(), dst(cf));
  }
  // HF Conv1D [in, out] -> nn.Linear [out, in].
  void transpose(const std::string& hf, const std::string& cf) const {
    const auto& info = m.layout.find(cf);
    const std::int64_t out = info.shape[0], in = info.shape[1];
    const auto v = get(hf, {in, out});
    transpose_blocked(v.data(), dst(cf), in, out);
  }
};

// Row permutation of one head for RoPE: causalflow dim d' reads HF dim perm[d'] (first r dims).
std::vector<int> rope_perm(int dh, int r) {
  std::vector<int> p(static_cast<std::size_t>(dh));
  for (int d = 0; d < dh; ++d) p[d] = d;
  for (int i = 0; i < r / 2; ++i) {
    p[2 * i] = i;
    p[2 * i + 1] = i + r / 2;
  }
  return p;
}

// Interleaved per-head query_key_value (rows (h, s, d), s = q/k/v; GPT-NeoX, BLOOM) into the
// causalflow stacking (s, h, d), applying `perm` to the q and k rows of each head. `cols` = 1 for a
// bias, d_model for a weight.
void regroup_qkv(const std::vector<float>& src, float* dst, int H, int dh, std::int64_t cols,
                 const std::vector<int>& perm) {
  for (int s = 0; s < 3; ++s)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < dh; ++d) {
        const int sd = s < 2 ? perm[d] : d;
        const std::int64_t from = (static_cast<std::int64_t>(h) * 3 * dh + s * dh + sd) * cols;
        const std::int64_t to = ((static_cast<std::int64_t>(s) * H + h) * dh + d) * cols;
        std::copy(src.begin() + from, src.begin() + from + cols, dst + to);
      }
}

// Stacked heads (rows (h, d)) with `perm` applied per head, written at dst.
void permute_heads(const std::vector<float>& src, float* dst, int heads, int dh, std::int64_t cols,
                   const std::vector<int>& perm) {
  for (int h = 0; h < heads; ++h)
    for (int d = 0; d < dh; ++d) {
      const std::int64_t from = (static_cast<std::int64_t>(h) * dh + perm[d]) * cols;
      std::copy(src.begin() + from, src.begin() + from + cols, dst + (static_cast<std::int64_t>(h) * dh + d) * cols);
    }
}

std::string first_present(const TensorStore& st, std::initializer_list<const char*> prefixes,
                          const std::string& probe) {
  for (const char* p : prefixes)
    if (st.has(p + probe)) return p;
  return "";
}

void import_gpt2(const TensorStore& st, nn::Model<float>& m) {
  Importer im{st, m, first_present(st, {"transformer.", ""}, "wte.weight")};
  im.copy("wte.weight", "wte.weight");
  im.copy("wpe.weight", "wpe.weight");
  for (int l = 0; l < m.config.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    for (const char* n : {"ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias", "attn.c_attn.bias",
                          "attn.c_proj.bias", "mlp.c_fc.bias", "mlp.c_proj.bias"})
      im.copy(p + n, p + n);
    for (const char* n : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
      im.transpose(p + n, p + n);
  }
  im.copy("ln_f.weight", "ln_f.weight");
  im.copy("ln_f.bias", "ln_f.bias");
  if (!m.config.arch.tied_head) {
    Importer head{st, m, ""};
    head.copy("lm_head.weight", "lm_head.weight");
  }
}

void import_neox_bloom(const TensorStore& st, nn::Model<float>& m, bool neox) {
  const nn::ModelConfig& c = m.config;
  const int H = c.n_head, C = c.d_model, dh = nn::head_dim(c, 0);
  Importer im{st, m, neox ? "gpt_neox." : first_present(st, {"transformer.", ""}, "word_embeddings.weight")};
  const std::vector<int> perm = neox ? rope_perm(dh, nn::rope_dims(c, 0)) : rope_perm(dh, 0);
  im.copy(neox ? "embed_in.weight" : "word_embeddings.weight", "wte.weight");
  if (!neox) {
    im.copy("word_embeddings_layernorm.weight", "emb_ln.weight");
    im.copy("word_embeddings_layernorm.bias", "emb_ln.bias");
  }
  const std::string attn = neox ? "attention." : "self_attention.";
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string hp = (neox ? "layers." : "h.") + std::to_string(l) + ".", p = "h." + std::to_string(l) + ".";
    for (const char* w : {"weight", "bias"}) {
      im.copy(hp + "input_layernorm." + w, p + "ln_1." + w);
      im.copy(hp + "post_attention_layernorm." + w, p + "ln_2." + w);
      im.copy(hp + "mlp.dense_h_to_4h." + w, p + "mlp.c_fc." + w);
      im.copy(hp + "mlp.dense_4h_to_h." + w, p + "mlp.c_proj." + w);
    }
    regroup_qkv(im.get(hp + attn + "query_key_value.weight", {3 * C, C}), im.dst(p + "attn.c_attn.weight"), H, dh, C,
                perm);
    im.copy(hp + attn + "dense.weight", p + "attn.c_proj.weight");
    if (c.bias) {
      regroup_qkv(im.get(hp + attn + "query_key_value.bias", {3 * C}), im.dst(p + "attn.c_attn.bias"), H, dh, 1, perm);
      im.copy(hp + attn + "dense.bias", p + "attn.c_proj.bias");
    }
  }
  const std::string lnf = neox ? "final_layer_norm." : "ln_f.";
  im.copy(lnf + "weight", "ln_f.weight");
  im.copy(lnf + "bias", "ln_f.bias");
  if (!c.arch.tied_head) {
    Importer head{st, m, ""};
    head.copy(neox ? "embed_out.weight" : "lm_head.weight", "lm_head.weight");
  }
}

void import_llama(const TensorStore& st, nn::Model<float>& m) {
  const nn::ModelConfig& c = m.config;
  const int H = c.n_head, KV = nn::kv_heads(c), C = c.d_model, dh = nn::head_dim(c, 0), F = nn::ffn_dim(c);
  Importer im{st, m, "model."};
  const std::vector<int> perm = rope_perm(dh, nn::rope_dims(c, 0)), id = rope_perm(dh, 0);
  im.copy("embed_tokens.weight", "wte.weight");
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string hp = "layers." + std::to_string(l) + ".", p = "h." + std::to_string(l) + ".";
    im.copy(hp + "input_layernorm.weight", p + "ln_1.weight");
    im.copy(hp + "post_attention_layernorm.weight", p + "ln_2.weight");
    float* w = im.dst(p + "attn.c_attn.weight");
    const std::int64_t qrows = static_cast<std::int64_t>(H) * dh, kvrows = static_cast<std::int64_t>(KV) * dh;
    permute_heads(im.get(hp + "self_attn.q_proj.weight", {qrows, C}), w, H, dh, C, perm);
    permute_heads(im.get(hp + "self_attn.k_proj.weight", {kvrows, C}), w + qrows * C, KV, dh, C, perm);
    permute_heads(im.get(hp + "self_attn.v_proj.weight", {kvrows, C}), w + (qrows + kvrows) * C, KV, dh, C, id);
    if (c.bias) {
      float* b = im.dst(p + "attn.c_attn.bias");
      permute_heads(im.get(hp + "self_attn.q_proj.bias", {qrows}), b, H, dh, 1, perm);
      permute_heads(im.get(hp + "self_attn.k_proj.bias", {kvrows}), b + qrows, KV, dh, 1, perm);
      permute_heads(im.get(hp + "self_attn.v_proj.bias", {kvrows}), b + qrows + kvrows, KV, dh, 1, id);
    }
    im.copy(hp + "self_attn.o_proj.weight", p + "attn.c_proj.weight");
    if (c.proj_bias) im.copy(hp + "self_attn.o_proj.bias", p + "attn.c_proj.bias");
    float* fc = im.dst(p + "mlp.c_fc.weight");
    const auto gate = im.get(hp + "mlp.gate_proj.weight", {F, C}), up = im.get(hp + "mlp.up_proj.weight", {F, C});
    std::copy(gate.begin(), gate.end(), fc);
    std::copy(up.begin(), up.end(), fc + static_cast<std::int64_t>(F) * C);
    im.copy(hp + "mlp.down_proj.weight", p + "mlp.c_proj.weight");
    if (c.arch.mlp_bias) {
      float* fb = im.dst(p + "mlp.c_fc.bias");
      const auto gb = im.get(hp + "mlp.gate_proj.bias", {F}), ub = im.get(hp + "mlp.up_proj.bias", {F});
      std::copy(gb.begin(), gb.end(), fb);
      std::copy(ub.begin(), ub.end(), fb + F);
      im.copy(hp + "mlp.down_proj.bias", p + "mlp.c_proj.bias");
    }
  }
  im.copy("norm.weight", "ln_f.weight");
  if (!c.arch.tied_head) {
    Importer head{st, m, ""};
    head.copy("lm_head.weight", "lm_head.weight");
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
// A folder written by export_hf records its weights' size and checksum in config.json
// ("causalflow_weights"): an export interrupted between its two renames (new weights, old config)
// or weights replaced by hand are refused instead of being read under the wrong configuration.
void check_export_manifest(const std::string& dir) {
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
}  // namespace

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
  check_export_manifest(dir);
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
    switch (h.family) {
      case Family::Gpt2:
        import_gpt2(st, m);
        break;
      case Family::GptNeox:
        import_neox_bloom(st, m, true);
        break;
      case Family::Bloom:
        import_neox_bloom(st, m, false);
        break;
      case Family::Llama:
        import_llama(st, m);
        break;
    }
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
