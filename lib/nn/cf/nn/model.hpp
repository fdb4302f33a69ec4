#pragma once
// The model: a config, its parameter layout and the flat parameter array, plus the forward and
// backward pass (llm.c style: each op has <op>_forward / <op>_backward in cf/nn/ops.hpp; each
// attention variant is a unit, cf/nn/attention_variant.hpp). Templated on the scalar: float for
// training and inference, double for the finite-difference gradient tests. CPU + OpenMP; GEMMs
// through Eigen.
#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cf/nn/config.hpp"
#include "cf/nn/gradient_seed.hpp"
#include "cf/nn/params.hpp"

namespace cf::nn {

/// Score hook: called once per (layer, head) and sequence with the UNMASKED T x T score matrix
/// M = Q K^T / sqrt(d_head) (S–D layers: S - D), row = query, before ALiBi / runway biases,
/// masking and softmax (Routing/filtering (Jamil & Kapadia) §3, docs/spec.md §3 "intercept M at run time"). It may
/// modify M in place; the modified matrix is what gets masked and normalised. Not called for linear-attention layers.
using ScoreHook = std::function<void(int layer, int head, Eigen::Ref<Eigen::MatrixXf> scores)>;

/// What one layer of one sequence exposes to a capture hook: views into buffers owned by the
/// forward pass, valid only during the call (copy what you keep). All buffers are row-major float32.
/// Shapes: H = n_head, T = seq_len, C = d_model, dh = d_head of this layer.
///  - attn_probs [H, T, T], row = query i, column = key j: the weights that multiply V, after the
///    hook, ALiBi / runway biases, masking and softmax; zero outside the mask. Branch fusion of
///    bridge patterns (bridge, pbb, se-bridge with fusion = branch, Boundary repair (Yang) Eq. 35): the SUM of
///    the block softmax and one softmax per bridge j, so a row sums to 1 + the number of bridges
///    whose write-back set holds it (2 rows of a centered bridge with b < w <= 2b lie in two), and
///    the head output is exactly attn_probs V. Linear (ELU+1) layers: the normalised
///    weights phi(q_i).phi(k_j) / sum_{j'<=i} phi(q_i).phi(k_j'). S–D: softmax of S - D.
///  - q, k [H, T, dh]: the queries and keys the scores are computed from (after RoPE; before the
///    1/sqrt(dh) scale).
///  - resid_in, attn_out, resid_out [T, C]: the residual stream entering the attention sub-layer
///    (x_l, before ln_1), the attention sub-layer output after c_proj (the quantity added to the
///    residual), and the residual leaving it (resid_in + attn_out).
///  - resid_in_norm, attn_out_norm, resid_out_norm [T]: per-token Euclidean norms of those three
///    (accumulated in double), the inputs of alpha_l (docs/spec.md §2, Position bias (Herasimchyk et al.) Eq. 1).
struct LayerActivations {
  int layer = 0;  ///< 0..L-1
  int seq = 0;    ///< sequence index b in the batch, 0..B-1
  int n_head = 0, seq_len = 0, d_head = 0, d_model = 0;
  const float* attn_probs = nullptr;
  const float* q = nullptr;
  const float* k = nullptr;
  const float* resid_in = nullptr;
  const float* attn_out = nullptr;
  const float* resid_out = nullptr;
  const float* resid_in_norm = nullptr;
  const float* attn_out_norm = nullptr;
  const float* resid_out_norm = nullptr;
};

/// Capture hook: called once per (layer, sequence) of a forward pass, in layer order then sequence
/// order, after the layer's attention sub-layer (before its MLP). Read-only: the forward pass and
/// its logits are the same bit for bit with and without it.
using CaptureHook = std::function<void(const LayerActivations& layer)>;

/// Inference-time interventions (spectral surgery) and observation (capture). `on_scores` may be
/// empty. `linearize[l]` true replaces layer l's attention by ELU+1 linear attention computed from
/// the same Q, K, V (docs/spec.md §3 "replacing a layer by ELU+1 linear attention"); shorter vectors mean
/// false for the rest. `on_layer` (may be empty) receives each layer's attention probabilities,
/// Q, K and residual-stream quantities (LayerActivations); it costs nothing when empty.
struct ForwardHooks {
  ScoreHook on_scores;
  std::vector<bool> linearize;
  CaptureHook on_layer;
  /// Heads whose attn_probs on_layer materialises (empty = all); the other heads' probabilities
  /// are left zero. The tiled path recomputes T x T probabilities only for these heads, one layer
  /// at a time (cost: one extra pass over the admitted tiles and H_captured T^2 floats).
  std::vector<int> capture_heads;
};

/// How softmax attention runs. Tiled (the default): online softmax over the admitted 64 x 64 key
/// tiles of each query tile, O(T) memory (one log-sum-exp per row and branch saved; the backward
/// recomputes the probabilities). Dense: T x T scores and probabilities per head, masked (the test
/// oracle; always used for layers with a score hook and for ELU+1 linear layers).
enum class AttentionPath { Tiled, Dense };

/// A model with parameters in scalar type T (float or double).
template <class T>
struct Model {
  ModelConfig config;
  ParamLayout layout;
  std::vector<T> params;  ///< layout.total values
};

/// Create a model with GPT-2 initialisation (normal(0, 0.02); residual projections scaled by
/// 1/sqrt(2 n_layer); LayerNorm weight 1, biases 0; S–D damping weights 0.02-normal, bias 0;
/// runway B 0.02-normal), deterministic in `seed`. Validates the config.
template <class T>
Model<T> init_model(const ModelConfig& config, std::uint64_t seed);

/// Convert a model's scalar type (float <-> double), for tests.
template <class To, class From>
Model<To> cast_model(const Model<From>& m) {
  Model<To> r{m.config, m.layout, std::vector<To>(m.params.begin(), m.params.end())};
  return r;
}

/// Saved activations of one forward pass, reused by backward and across steps (no reallocation).
/// Opaque: filled by forward_backward.
template <class T>
struct Activations;

/// Owning handle for Activations (pimpl, keeps this header free of the kernel details).
template <class T>
class Workspace {
 public:
  Workspace();
  ~Workspace();
  Workspace(Workspace&&) noexcept;
  Workspace& operator=(Workspace&&) noexcept;
  Activations<T>& get() { return *impl_; }
  /// Select the attention path (default AttentionPath::Tiled); results agree to round-off.
  void set_attention_path(AttentionPath p);
  /// Whether forward_backward checks the residual stream after the embedding and after every block,
  /// and the output probabilities, for non-finite values (default on; cost ~ one pass over the
  /// stream per layer). A finite model whose activations overflow (weights of 3e38) then throws
  /// cf::InvalidArgument naming the layer (docs/conventions.md) instead of giving null or infinite
  /// results with exit 0. The trainer turns it off: its own NaN/Inf stop handles a diverging run.
  void set_finite_check(bool on);
  /// Bytes currently held by saved activations (for the memory benchmark).
  std::size_t bytes() const;
  /// After a forward pass over B x T tokens: the next-token probabilities, row-major
  /// [B*T, vocab_size] (the cross-entropy overwrites the logits with their softmax in place).
  const T* probabilities() const;

 private:
  Activations<T>* impl_;
};

/// Forward pass over a batch of B sequences of length T (tokens[b*T + t], 0 <= token < vocab_size,
/// 1 <= T <= block_size), cross-entropy against targets (same layout; target < 0 = position not
/// counted). Returns the mean loss over counted positions. If `grad` is not null it must have
/// layout.total entries; the parameter gradient of the returned loss is ADDED to it (so gradient
/// accumulation is repeated calls followed by a scale). `hooks` (may be null) apply interventions;
/// with hooks the backward pass is not allowed (throws cf::InvalidArgument). If `logprobs` is not
/// null it receives log p(target) per position (B*T entries, 0 where target < 0). `seed` (may be
/// null; needs `grad` as scratch) replaces the loss gradient and reads the gradient at a residual
/// stream instead (cf/nn/gradient_seed.hpp: influence, Jacobians).
template <class T>
T forward_backward(const Model<T>& model, const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                   std::vector<T>* grad, Workspace<T>& ws, const ForwardHooks* hooks = nullptr,
                   std::vector<T>* logprobs = nullptr, const GradientSeed<T>* seed = nullptr);

/// Next-token logits of one sequence (T x vocab_size, row t predicts token t+1), with optional hooks.
Eigen::MatrixXf forward_logits(const Model<float>& model, const std::vector<std::int32_t>& tokens,
                               const ForwardHooks* hooks = nullptr);

/// Result of evaluate_perplexity: mean negative log-likelihood (nats/token), perplexity exp(nll),
/// and the number of predicted tokens.
struct PerplexityResult {
  double nll = 0;
  double ppl = 0;
  std::int64_t n_tokens = 0;
};

/// Perplexity with overlapping strided windows (the HuggingFace recipe): windows of `context`
/// tokens start every `stride` tokens; each window scores only the tokens not scored by an earlier
/// window, so every token after the first is predicted exactly once with up to `context` - 1
/// tokens of left context. 1 <= stride <= context <= block_size; tokens.size() >= 2.
PerplexityResult evaluate_perplexity(const Model<float>& model, const std::vector<std::int32_t>& tokens, int context,
                                     int stride, const ForwardHooks* hooks = nullptr);

/// One window of evaluate_perplexity: Tn inputs and targets (target < 0 = not scored); writes
/// log p(target) per position to `logprobs` (Tn entries).
using WindowForward =
    std::function<void(const std::int32_t* inputs, const std::int32_t* targets, int Tn, std::vector<float>& logprobs)>;

/// evaluate_perplexity of a model with block size `block_size` whose window forward passes
/// `forward` runs (the CPU's, or a device model's in lib/gpu): the same windows, checks and result.
PerplexityResult evaluate_perplexity(int block_size, const WindowForward& forward,
                                     const std::vector<std::int32_t>& tokens, int context, int stride);

}  // namespace cf::nn
