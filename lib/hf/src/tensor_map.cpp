#include "cf/hf/tensor_map.hpp"

#include <algorithm>

#include "cf/core/error.hpp"
#include "cf/nn/params.hpp"

namespace cf::hf {

namespace {

using Shape = std::vector<std::int64_t>;
using Has = std::function<bool(const std::string&)>;

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
// causalflow stacking (s, h, d), `perm` applied to the q and k rows of each head.
std::vector<std::int64_t> regroup_qkv_rows(int H, int dh, const std::vector<int>& perm) {
  std::vector<std::int64_t> rows;
  for (int s = 0; s < 3; ++s)
    for (int h = 0; h < H; ++h)
      for (int d = 0; d < dh; ++d)
        rows.push_back(static_cast<std::int64_t>(h) * 3 * dh + s * dh + (s < 2 ? perm[d] : d));
  return rows;
}

// Stacked heads (rows (h, d)) with `perm` applied per head.
std::vector<std::int64_t> head_rows(int heads, int dh, const std::vector<int>& perm) {
  std::vector<std::int64_t> rows;
  for (int h = 0; h < heads; ++h)
    for (int d = 0; d < dh; ++d) rows.push_back(static_cast<std::int64_t>(h) * dh + perm[d]);
  return rows;
}

std::string first_present(const Has& has, std::initializer_list<const char*> prefixes, const std::string& probe) {
  for (const char* p : prefixes)
    if (has(p + probe)) return p;
  return "";
}

// Collects the pieces of one family (`prefix` = the stored names' prefix).
struct Pieces {
  const nn::ParamLayout& lay;
  std::string prefix;
  std::vector<TensorPiece> out;

  const Shape& shape(const std::string& cf) const { return lay.find(cf).shape; }
  void copy(const std::string& hf, const std::string& cf) { out.push_back({prefix + hf, shape(cf), cf}); }
  void copy_into(const std::string& hf, const Shape& s, const std::string& cf, std::int64_t at) {
    out.push_back({prefix + hf, s, cf, at});
  }
  // HF Conv1D [in, out] -> nn.Linear [out, in].
  void transpose(const std::string& hf, const std::string& cf) {
    const Shape& s = shape(cf);
    out.push_back({prefix + hf, {s[1], s[0]}, cf, 0, PieceOp::Transpose});
  }
  void rows(const std::string& hf, const Shape& s, const std::string& cf, std::int64_t at,
            std::vector<std::int64_t> r) {
    const std::int64_t cols = s.size() > 1 ? s[1] : 1;
    out.push_back({prefix + hf, s, cf, at, PieceOp::Rows, std::move(r), cols});
  }
  // the untied LM head, stored without the prefix
  void head(const std::string& hf) { out.push_back({hf, shape("lm_head.weight"), "lm_head.weight"}); }
};

void gpt2_pieces(Pieces& p, const nn::ModelConfig& c) {
  p.copy("wte.weight", "wte.weight");
  p.copy("wpe.weight", "wpe.weight");
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string h = "h." + std::to_string(l) + ".";
    for (const char* n : {"ln_1.weight", "ln_1.bias", "ln_2.weight", "ln_2.bias", "attn.c_attn.bias",
                          "attn.c_proj.bias", "mlp.c_fc.bias", "mlp.c_proj.bias"})
      p.copy(h + n, h + n);
    for (const char* n : {"attn.c_attn.weight", "attn.c_proj.weight", "mlp.c_fc.weight", "mlp.c_proj.weight"})
      p.transpose(h + n, h + n);
  }
  p.copy("ln_f.weight", "ln_f.weight");
  p.copy("ln_f.bias", "ln_f.bias");
  if (!c.arch.tied_head) p.head("lm_head.weight");
}

void neox_bloom_pieces(Pieces& p, const nn::ModelConfig& c, bool neox) {
  const int H = c.n_head, C = c.d_model, dh = nn::head_dim(c, 0);
  const std::vector<int> perm = neox ? rope_perm(dh, nn::rope_dims(c, 0)) : rope_perm(dh, 0);
  p.copy(neox ? "embed_in.weight" : "word_embeddings.weight", "wte.weight");
  if (!neox) {
    p.copy("word_embeddings_layernorm.weight", "emb_ln.weight");
    p.copy("word_embeddings_layernorm.bias", "emb_ln.bias");
  }
  const std::string attn = neox ? "attention." : "self_attention.";
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string hp = (neox ? "layers." : "h.") + std::to_string(l) + ".", h = "h." + std::to_string(l) + ".";
    for (const char* w : {"weight", "bias"}) {
      p.copy(hp + "input_layernorm." + w, h + "ln_1." + w);
      p.copy(hp + "post_attention_layernorm." + w, h + "ln_2." + w);
      p.copy(hp + "mlp.dense_h_to_4h." + w, h + "mlp.c_fc." + w);
      p.copy(hp + "mlp.dense_4h_to_h." + w, h + "mlp.c_proj." + w);
    }
    p.rows(hp + attn + "query_key_value.weight", {3 * C, C}, h + "attn.c_attn.weight", 0,
           regroup_qkv_rows(H, dh, perm));
    p.copy(hp + attn + "dense.weight", h + "attn.c_proj.weight");
    if (c.bias) {
      p.rows(hp + attn + "query_key_value.bias", {3 * C}, h + "attn.c_attn.bias", 0, regroup_qkv_rows(H, dh, perm));
      p.copy(hp + attn + "dense.bias", h + "attn.c_proj.bias");
    }
  }
  const std::string lnf = neox ? "final_layer_norm." : "ln_f.";
  p.copy(lnf + "weight", "ln_f.weight");
  p.copy(lnf + "bias", "ln_f.bias");
  if (!c.arch.tied_head) p.head(neox ? "embed_out.weight" : "lm_head.weight");
}

void llama_pieces(Pieces& p, const nn::ModelConfig& c) {
  const int H = c.n_head, KV = nn::kv_heads(c), C = c.d_model, dh = nn::head_dim(c, 0), F = nn::ffn_dim(c);
  const std::vector<int> perm = rope_perm(dh, nn::rope_dims(c, 0)), id = rope_perm(dh, 0);
  const std::int64_t qrows = static_cast<std::int64_t>(H) * dh, kvrows = static_cast<std::int64_t>(KV) * dh;
  p.copy("embed_tokens.weight", "wte.weight");
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string hp = "layers." + std::to_string(l) + ".", h = "h." + std::to_string(l) + ".";
    p.copy(hp + "input_layernorm.weight", h + "ln_1.weight");
    p.copy(hp + "post_attention_layernorm.weight", h + "ln_2.weight");
    const std::string w = h + "attn.c_attn.weight";
    p.rows(hp + "self_attn.q_proj.weight", {qrows, C}, w, 0, head_rows(H, dh, perm));
    p.rows(hp + "self_attn.k_proj.weight", {kvrows, C}, w, qrows * C, head_rows(KV, dh, perm));
    p.rows(hp + "self_attn.v_proj.weight", {kvrows, C}, w, (qrows + kvrows) * C, head_rows(KV, dh, id));
    if (c.bias) {
      const std::string b = h + "attn.c_attn.bias";
      p.rows(hp + "self_attn.q_proj.bias", {qrows}, b, 0, head_rows(H, dh, perm));
      p.rows(hp + "self_attn.k_proj.bias", {kvrows}, b, qrows, head_rows(KV, dh, perm));
      p.rows(hp + "self_attn.v_proj.bias", {kvrows}, b, qrows + kvrows, head_rows(KV, dh, id));
    }
    p.copy(hp + "self_attn.o_proj.weight", h + "attn.c_proj.weight");
    if (c.proj_bias) p.copy(hp + "self_attn.o_proj.bias", h + "attn.c_proj.bias");
    p.copy_into(hp + "mlp.gate_proj.weight", {F, C}, h + "mlp.c_fc.weight", 0);
    p.copy_into(hp + "mlp.up_proj.weight", {F, C}, h + "mlp.c_fc.weight", static_cast<std::int64_t>(F) * C);
    p.copy(hp + "mlp.down_proj.weight", h + "mlp.c_proj.weight");
    if (c.arch.mlp_bias) {
      p.copy_into(hp + "mlp.gate_proj.bias", {F}, h + "mlp.c_fc.bias", 0);
      p.copy_into(hp + "mlp.up_proj.bias", {F}, h + "mlp.c_fc.bias", F);
      p.copy(hp + "mlp.down_proj.bias", h + "mlp.c_proj.bias");
    }
  }
  p.copy("norm.weight", "ln_f.weight");
  if (!c.arch.tied_head) p.head("lm_head.weight");
}

}  // namespace

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

std::int64_t TensorPiece::numel() const {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

std::vector<std::int64_t> TensorPiece::inverse_rows() const {
  std::vector<std::int64_t> inv(rows.size(), -1);
  for (std::size_t r = 0; r < rows.size(); ++r) inv[static_cast<std::size_t>(rows[r])] = static_cast<std::int64_t>(r);
  return inv;
}

std::int64_t TensorPiece::destination(std::int64_t e, const std::vector<std::int64_t>& inverse) const {
  switch (op) {
    case PieceOp::Copy:
      return at + e;
    case PieceOp::Transpose:  // stored [in, out] -> [out, in]
      return at + (e % shape[1]) * shape[0] + e / shape[1];
    case PieceOp::Rows:
      return at + inverse[static_cast<std::size_t>(e / cols)] * cols + e % cols;
  }
  return -1;
}

std::vector<TensorPiece> tensor_pieces(Family family, const nn::ModelConfig& c, const Has& has) {
  const nn::ParamLayout lay = nn::make_layout(c);
  Pieces p{lay, "", {}};
  switch (family) {
    case Family::Gpt2:
      p.prefix = first_present(has, {"transformer.", ""}, "wte.weight");
      gpt2_pieces(p, c);
      break;
    case Family::GptNeox:
      p.prefix = "gpt_neox.";
      neox_bloom_pieces(p, c, true);
      break;
    case Family::Bloom:
      p.prefix = first_present(has, {"transformer.", ""}, "word_embeddings.weight");
      neox_bloom_pieces(p, c, false);
      break;
    case Family::Llama:
      p.prefix = "model.";
      llama_pieces(p, c);
      break;
  }
  return std::move(p.out);
}

void place_float(const TensorPiece& piece, const float* stored, float* cf_tensor) {
  float* dst = cf_tensor + piece.at;
  switch (piece.op) {
    case PieceOp::Copy:
      std::copy(stored, stored + piece.numel(), dst);
      break;
    case PieceOp::Transpose:
      transpose_blocked(stored, dst, piece.shape[0], piece.shape[1]);
      break;
    case PieceOp::Rows:
      for (std::size_t r = 0; r < piece.rows.size(); ++r)
        std::copy(stored + piece.rows[r] * piece.cols, stored + (piece.rows[r] + 1) * piece.cols,
                  dst + static_cast<std::int64_t>(r) * piece.cols);
      break;
  }
}

}  // namespace cf::hf
