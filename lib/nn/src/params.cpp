#include "cf/nn/params.hpp"

#include "cf/core/error.hpp"

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
  const std::int64_t C = c.d_model, H = c.n_head;
  const bool ln = c.norm == NormKind::LayerNorm;
  L.wte = add("wte.weight", {c.vocab_size, C});
  if (c.pos == PosKind::Learned) L.wpe = add("wpe.weight", {c.block_size, C});
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "h." + std::to_string(l) + ".";
    const std::int64_t dh = head_dim(c, l), HD = H * dh;
    const auto k = c.layers[static_cast<std::size_t>(l)].attn;
    LayerOffsets o;
    if (ln) {
      o.ln1_w = add(p + "ln_1.weight", {C});
      o.ln1_b = add(p + "ln_1.bias", {C});
    }
    o.attn_w = add(p + "attn.c_attn.weight", {3 * HD, C});
    if (c.bias) o.attn_b = add(p + "attn.c_attn.bias", {3 * HD});
    o.proj_w = add(p + "attn.c_proj.weight", {C, HD});
    if (c.proj_bias) o.proj_b = add(p + "attn.c_proj.bias", {C});
    if (k == AttnKind::Sd) {
      o.damp_w = add(p + "attn.damp.weight", {H, C});
      o.damp_b = add(p + "attn.damp.bias", {H});
    }
    if (k == AttnKind::RunwayBilinear) o.runway_B = add(p + "attn.runway_B", {dh, dh});
    if (ln) {
      o.ln2_w = add(p + "ln_2.weight", {C});
      o.ln2_b = add(p + "ln_2.bias", {C});
    }
    o.fc_w = add(p + "mlp.c_fc.weight", {4 * C, C});
    o.fc_b = add(p + "mlp.c_fc.bias", {4 * C});
    o.fcproj_w = add(p + "mlp.c_proj.weight", {C, 4 * C});
    o.fcproj_b = add(p + "mlp.c_proj.bias", {C});
    L.layer.push_back(o);
  }
  if (ln) {
    L.lnf_w = add("ln_f.weight", {C});
    L.lnf_b = add("ln_f.bias", {C});
  }
  return L;
}

}  // namespace cf::nn
