#pragma once
// What the device analysis model (cf/gpu/device_analysis_model.hpp, issue 30) needs to know about a
// model, in plain types only (no Eigen, no JSON), so that the CUDA translation unit sees nothing
// but this and the kernels: shapes, the architecture variants it runs, the offset of every tensor
// in the flat parameter array of lib/nn (cf::nn::make_layout) and each layer's softmax branches.
// Built on the host from a cf::nn::ModelConfig by cf::gpu::make_analysis_plan
// (cf/gpu/analysis_model.hpp), which refuses what the device model does not run.
#include <cstdint>
#include <functional>
#include <vector>

#include "cf/gpu/precision.hpp"

namespace cf::gpu {

/// The pre-norm of every sub-layer (cf::nn::NormKind).
enum class NormOp { None, LayerNorm, RMSNorm };
/// How the matrices sit on the device (docs/gpu.md "Weights in their stored dtype"): float32, or
/// the checkpoint's bfloat16 / IEEE half bits, widened exactly to float32 per GEMM (precision
/// policies fp32 and tf32) or, bfloat16, the GEMM's operand as they are (bf16).
enum class WeightType { F32, BF16, F16 };

/// The MLP activation (cf::nn::MlpKind): GELU tanh (GPT-2, BLOOM), GELU erf (GPT-NeoX), SwiGLU (Llama).
enum class MlpOp { GeluTanh, GeluErf, SwiGLU };

/// One transformer block: head dimension dh, the column of each query / key / value head in a
/// qkv row (grouped-query attention: query head h reads kv head h / (H / KV)), parameter offsets
/// (-1 = absent), RoPE's rotated dimensions (0 = no RoPE), ALiBi slopes (empty = none) and the
/// layer's softmax branches at a length T as dense 0/1 masks (cf::nn::layer_branches; the
/// probabilities of a row are the sum over branches of one softmax each).
struct AnalysisLayer {
  int dh = 0;
  std::int64_t ld = 0;  ///< qkv row width, (H + 2 KV) dh
  std::vector<std::int64_t> q_col, k_col, v_col;
  std::int64_t ln1_w = -1, ln1_b = -1, attn_w = -1, attn_b = -1, proj_w = -1, proj_b = -1;
  std::int64_t ln2_w = -1, ln2_b = -1, fc_w = -1, fc_b = -1, fcproj_w = -1, fcproj_b = -1;
  int rope_dims = 0;
  std::vector<float> slopes;
  std::function<std::vector<std::vector<std::uint8_t>>(int T)> branch_masks;
};

/// The whole model: vocabulary V, width C, H query heads, MLP width F, block size; the norm and its
/// epsilon, the MLP, GPT-NeoX's parallel residual, RoPE's base; offsets of the embeddings (wpe < 0:
/// no learned positions), of BLOOM's embedding norm (emb_ln_w < 0: none), of the final norm and of
/// the LM head [V, C] (wte when tied); `total` parameters.
/// Two weight arrays: the matrices (wte, head and each layer's attn_w, proj_w, fc_w, fcproj_w) index
/// the matrix array, `mat_total` elements of `wtype`; every other offset (wpe, norms, biases) the
/// float32 array of `total` floats. A plan of a loaded lib/nn model (make_analysis_plan) has one
/// array (`one_array`: lib/nn's flat float32 layout holds both); a plan of stored weights
/// (cf/gpu/analysis_model.hpp, a Hugging Face directory) keeps the matrices in their stored dtype.
/// `precision`: the linear layers' GEMMs (cf/gpu/precision.hpp, the trainer's policies; docs/gpu.md
/// "Analysis model"); under Bf16 the matrices are held in bfloat16 (wtype BF16: a float32 model's
/// rounded once on the device, stored F32 / F16 rounded as they are placed).
struct AnalysisPlan {
  int V = 0, C = 0, H = 0, F = 0, block_size = 0;
  NormOp norm = NormOp::LayerNorm;
  float eps = 1e-5f;
  MlpOp mlp = MlpOp::GeluTanh;
  bool parallel_residual = false;
  double rope_theta = 10000.0;
  std::int64_t total = 0;
  WeightType wtype = WeightType::F32;
  std::int64_t mat_total = 0;
  bool one_array = true;
  Precision precision = Precision::Fp32;
  std::int64_t wte = -1, wpe = -1, emb_ln_w = -1, emb_ln_b = -1, lnf_w = -1, lnf_b = -1, head = -1;
  std::vector<AnalysisLayer> layers;
};

/// How a piece of a stored tensor lands in the device's weights (cf::hf::PieceOp): stored element e
/// goes to Copy: dst + e; Transpose (a rows x cols tensor stored, its transpose wanted): dst + (e % cols)
/// rows + e / cols; Rows: dst + inverse[e / cols] cols + e % cols.
enum class PlaceOp { Copy, Transpose, Rows };

/// One staged chunk of a stored tensor for the device: `count` elements of dtype `src` at `data`
/// (host memory: the staging buffer) are elements [first, first + count) of a tensor of `rows` x
/// `cols` elements (a vector: cols 1), placed by `op` into the matrix array (`matrix`, converted to
/// the plan's wtype: the same dtype, or float32) or the float32 array, from element `dst`.
/// `inverse` (Rows: `rows` entries, host memory): stored row -> destination row.
struct WeightChunk {
  WeightType src = WeightType::F32;
  const void* data = nullptr;
  std::int64_t first = 0, count = 0;
  bool matrix = false;
  std::int64_t dst = 0;
  PlaceOp op = PlaceOp::Copy;
  std::int64_t rows = 1, cols = 1;
  const std::int64_t* inverse = nullptr;
};

/// One layer of one sequence as the device forward hands it to the host: host copies, valid during
/// the call only (the fields of cf::nn::LayerActivations). probs [Hs, T, T] for the Hs requested
/// heads in request order (after ALiBi, masking and softmax, summed over branches); qkv [T, ld]
/// this sequence's rows after RoPE (queries and keys of head h at q_col[h], k_col[h]); resid_in,
/// attn_out, resid_out [T, C] and their per-token Euclidean norms [T] (accumulated in double).
struct DeviceLayerCapture {
  int layer = 0, seq = 0, T = 0;
  const float* probs = nullptr;
  const float* qkv = nullptr;
  const float *resid_in = nullptr, *attn_out = nullptr, *resid_out = nullptr;
  const float *resid_in_norm = nullptr, *attn_out_norm = nullptr, *resid_out_norm = nullptr;
};

/// The host's view into a device forward pass (cf::nn::ForwardHooks): `on_layer` (may be empty) is
/// called per (layer, sequence) after the layer's attention sub-layer, with the probabilities of
/// `heads` (model head indices; empty = all). `on_scores` (may be empty) is called per layer with a
/// host copy of the whole batch's scores [B, H, T, T] (row-major, row = query; q.k / sqrt(dh),
/// before ALiBi and masking), which it may modify: the modified scores go back to the device and
/// are masked and normalised (spectral surgery; the score matrices travel both ways, so this is
/// for analysis, not speed).
struct DeviceHooks {
  std::vector<int> heads;
  std::function<void(const DeviceLayerCapture&)> on_layer;
  std::function<void(int layer, int B, int T, float* scores)> on_scores;
};

}  // namespace cf::gpu
