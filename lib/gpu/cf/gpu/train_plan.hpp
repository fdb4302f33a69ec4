#pragma once
// What the device trainer (cf/gpu/train_step.hpp, issue 14) needs to know about a model, in plain
// types only (no Eigen, no JSON), so that the CUDA translation unit sees nothing but this and the
// kernels: shapes, the offset of every tensor in the flat parameter array of lib/nn
// (cf::nn::make_layout, docs/checkpoint_format.md) and each layer's mask in tiled form. Built on
// the host from a cf::nn::ModelConfig by cf::gpu::make_train_plan.
#include <cstdint>
#include <vector>

#include "cf/gpu/attention.hpp"
#include "cf/gpu/precision.hpp"

namespace cf::gpu {

/// How a layer's heads mix values: the form the layer's attention unit names in its GPU hook
/// (cf::nn::GpuForm, cf/nn/attention_variant.hpp; make_train_plan maps one to the other): softmax
/// of scaled dot products (every mask family), S-D skew logits with damping, runway rewiring in its
/// dot or bilinear form, or ELU+1 linear attention.
enum class AttnForm { Softmax, Sd, RunwayDot, RunwayBilinear, Linear };

/// One transformer block: head dimension dh (<= 128), parameter offsets (-1 = absent: no bias,
/// no norm), the layer's mask at the plan's T, and its ALiBi slopes (empty = no ALiBi).
struct TrainLayer {
  int dh = 0;
  std::int64_t ln1_w = -1, ln1_b = -1, attn_w = -1, attn_b = -1, proj_w = -1, proj_b = -1;
  std::int64_t ln2_w = -1, ln2_b = -1, fc_w = -1, fc_b = -1, fcproj_w = -1, fcproj_b = -1;
  TiledMask mask;
  std::vector<float> slopes;
  /// Attention beyond GPT-2's (issue 31): kv key/value heads (grouped-query attention when < H:
  /// qkv rows are [q of H heads | k of kv | v of kv], head h reads kv head h / (H / kv)); RoPE on
  /// the first `rope` dims of every query and key head (0 = no RoPE), base rope_theta; the form,
  /// its logit scale, the S-D damping's parameters (d = softplus(x W_d^T + b_d) + sd_eps) and the
  /// bilinear runway form B [dh, dh].
  int kv = 0;
  int rope = 0;
  double rope_theta = 10000.0;
  AttnForm form = AttnForm::Softmax;
  float scale = 1;
  std::int64_t damp_w = -1, damp_b = -1, runway_B = -1;
  float sd_eps = 0;
};

/// The model's norms: LayerNorm (weight and bias), RMSNorm (Llama: weight only) or none.
enum class TrainNorm { None, LayerNorm, RMSNorm };

/// The MLP's activation: GELU with the tanh approximation (GPT-2), exact erf GELU (GPT-NeoX), or
/// SwiGLU (Llama: c_fc gives [N, 2F] = gate | up, c_proj reads silu(gate) up).
enum class TrainMlp { GeluTanh, GeluErf, SwiGLU };

/// A contiguous run of parameters with one weight-decay setting (AdamW).
struct ParamRun {
  std::int64_t offset = 0, size = 0;
  bool decay = false;
};

/// The whole model for one batch shape B x T (N = B T rows). norm_eps: every norm's epsilon
/// (arch.norm_eps); parallel_residual: the MLP reads norm_2 of the block's input (GPT-NeoX);
/// wpe < 0 = no learned positions; emb_ln_w >= 0 = a norm on the embedding (arch.emb_norm, BLOOM);
/// head = the LM head matrix [V, C] (wte when tied).
struct TrainPlan {
  int V = 0, C = 0, H = 0, F = 0, B = 0, T = 0, N = 0;
  TrainNorm norm = TrainNorm::LayerNorm;
  float norm_eps = 1e-5f;
  TrainMlp mlp = TrainMlp::GeluTanh;
  bool parallel_residual = false;
  std::int64_t total = 0;  ///< parameters
  std::int64_t wte = -1, wpe = -1, lnf_w = -1, lnf_b = -1, head = -1;
  std::int64_t emb_ln_w = -1, emb_ln_b = -1;
  std::vector<TrainLayer> layers;
  std::vector<ParamRun> runs;  ///< AdamW runs covering [0, total) in order
  /// How the GEMMs read their inputs (cf/gpu/precision.hpp; docs/gpu.md "Precision policies").
  Precision precision = Precision::Fp32;

  /// Whether sub-layers read a normalised copy of the stream (norm != None).
  bool normed() const { return norm != TrainNorm::None; }
  /// Columns of c_fc's output: 2F with SwiGLU (gate | up), else F.
  int fc_width() const { return mlp == TrainMlp::SwiGLU ? 2 * F : F; }
};

}  // namespace cf::gpu
