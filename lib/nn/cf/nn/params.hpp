#pragma once
// Parameter layout: every tensor of the model lives in one flat array (parameters, gradients and
// AdamW moments share the layout), addressed by its nanoGPT/GPT-2 name and PyTorch shape
// (docs/checkpoint_format.md). Flat storage makes the optimizer one loop and checkpoints a list.
#include <cstdint>
#include <string>
#include <vector>

#include "cf/nn/config.hpp"

namespace cf::nn {

/// One named tensor: row-major PyTorch `shape`, position `offset` in the flat array, `decay` =
/// whether AdamW weight decay applies (matrices of dimension >= 2, per issue 4).
struct ParamInfo {
  std::string name;
  std::vector<std::int64_t> shape;
  std::int64_t offset = 0;
  std::int64_t size = 0;
  bool decay = false;
};

/// Offsets of the per-layer tensors (-1 = absent) for fast access in the kernels.
struct LayerOffsets {
  std::int64_t ln1_w = -1, ln1_b = -1, attn_w = -1, attn_b = -1, proj_w = -1, proj_b = -1;
  std::int64_t damp_w = -1, damp_b = -1, runway_B = -1;
  std::int64_t ln2_w = -1, ln2_b = -1, fc_w = -1, fc_b = -1, fcproj_w = -1, fcproj_b = -1;
  /// Every tensor of the layer's attention-variant parameter block, in the unit's order
  /// (cf/nn/attention_variant.hpp); damp_w / damp_b / runway_B name the built-in ones too.
  std::vector<std::int64_t> variant;
};

/// The full layout of a validated config.
struct ParamLayout {
  std::vector<ParamInfo> tensors;
  std::int64_t total = 0;
  std::int64_t wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1;
  std::int64_t emb_ln_w = -1, emb_ln_b = -1;  ///< arch.emb_norm (BLOOM): emb_ln.weight / .bias
  std::int64_t lm_head = -1;                  ///< untied head (!arch.tied_head): lm_head.weight [V, C]
  std::vector<LayerOffsets> layer;
  /// Index into `tensors` of `name`; throws cf::InvalidArgument if absent.
  const ParamInfo& find(const std::string& name) const;
};

/// Build the layout of `c` (calls validate(c)). Order: wte, wpe, then h.{l}.* in the table order of
/// docs/checkpoint_format.md, then ln_f. Architecture variants (issue 13, docs/hf.md): emb_ln after
/// wpe; RMSNorm norms have a weight only; c_attn is [(H + 2 n_kv_head) d_head, C] (queries of all
/// heads, then keys and values of the kv heads); SwiGLU c_fc is [2 d_ff, C] (gate rows, then up
/// rows); lm_head.weight last when the head is untied.
ParamLayout make_layout(const ModelConfig& c);

}  // namespace cf::nn
