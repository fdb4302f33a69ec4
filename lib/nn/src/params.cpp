#include "cf/nn/params.hpp"

#include "cf/core/error.hpp"
#include "cf/nn/attention_variant.hpp"

namespace cf::nn {

const ParamInfo& ParamLayout::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return t;
  throw InvalidArgument(str("no parameter named '", name, "' in this model"));
}

ParamLayout make_layout(const ModelConfig& c) {
  validate(c);
  ParamLayout L;
  auto add = [&](const std::string& name, std::vector<std::int64_t> shape) {
    ParamInfo p;
    p.name = name;
    p.shape = std::move(shape);
    p.size = 1;
    for (auto s : p.shape) p.size *= s;
    p.offset = L.total;
    p.decay = p.shape.size() >= 2;
    L.total += p.size;
    L.tensors.push_back(p);
    return p.offset;
  };
  const std::int64_t C = c.d_model, H = c.n_head, KV = kv_heads(c), F = ffn_dim(c);
  const bool ln = c.norm == NormKind::LayerNorm, rms = c.norm == NormKind::RMSNorm;
  const bool glu = c.arch.mlp == MlpKind::SwiGLU;
  // a norm: weight + bias (LayerNorm), weight only (RMSNorm), nothing (none)
  auto norm = [&](const std::string& name, std::int64_t& w, std::int64_t& b) {
    if (ln || rms) w = add(name + ".weight", {C});
    if (ln) b = add(name + ".bias", {C});
  };
  L.wte = add("wte.weight", {c.vocab_size, C});
  if (c.pos == PosKind::Learned) L.wpe = add("wpe.weight", {c.block_size, C});
  if (c.arch.emb_norm) norm("emb_ln", L.emb_ln_w, L.emb_ln_b);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const std::int64_t dh = head_dim(c, l), HD = H * dh, QKV = (H + 2 * KV) * dh;
    LayerOffsets o;
    norm(p + "ln_1", o.ln1_w, o.ln1_b);
    o.attn_w = add(p + "attn.c_attn.weight", {QKV, C});
    if (c.bias) o.attn_b = add(p + "attn.c_attn.bias", {QKV});
    o.proj_w = add(p + "attn.c_proj.weight", {C, HD});
    if (c.proj_bias) o.proj_b = add(p + "attn.c_proj.bias", {C});
    for (const VariantParam& t : variant_params(c, l)) {  // the attention variant's own block
      o.variant.push_back(add(p + t.name, t.shape));
      if (t.slot) o.*t.slot = o.variant.back();
    }
    norm(p + "ln_2", o.ln2_w, o.ln2_b);
    o.fc_w = add(p + "mlp.c_fc.weight", {(glu ? 2 : 1) * F, C});
    if (c.arch.mlp_bias) o.fc_b = add(p + "mlp.c_fc.bias", {(glu ? 2 : 1) * F});
    o.fcproj_w = add(p + "mlp.c_proj.weight", {C, F});
    if (c.arch.mlp_bias) o.fcproj_b = add(p + "mlp.c_proj.bias", {C});
    L.layer.push_back(o);
  }
  norm("ln_f", L.lnf_w, L.lnf_b);
  if (!c.arch.tied_head) L.lm_head = add("lm_head.weight", {c.vocab_size, C});
  return L;
}

}  // namespace cf::nn
