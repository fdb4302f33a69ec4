#pragma once
// The model: a config, its parameter layout and the flat parameter array, plus the forward and
// backward pass (llm.c style: each op has <op>_forward / <op>_backward in cf/nn/ops.hpp and
// cf/nn/attention.hpp). Templated on the scalar: float for training and inference, double for the
// finite-difference gradient tests. CPU + OpenMP; GEMMs through Eigen.
#include <Eigen/Core>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "cf/nn/config.hpp"
#include "cf/nn/params.hpp"

namespace cf::nn {

/// Score hook: called once per (layer, head) and sequence with the UNMASKED T x T score matrix
/// M = Q K^T / sqrt(d_head) (S–D layers: S - D), row = query, before ALiBi / runway biases,
/// masking and softmax (seed 003 §3, SPEC §3 "intercept M at run time"). It may modify M in place;
/// the modified matrix is what gets masked and normalised. Not called for linear-attention layers.
using ScoreHook = std::function<void(int layer, int head, Eigen::Ref<Eigen::MatrixXf> scores)>;

/// Inference-time interventions (spectral surgery). `on_scores` may be empty. `linearize[l]` true
/// replaces layer l's attention by ELU+1 linear attention computed from the same Q, K, V (SPEC §3
/// "replacing a layer by ELU+1 linear attention"); shorter vectors mean false for the rest.
struct ForwardHooks {
  ScoreHook on_scores;
  std::vector<bool> linearize;
};

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
  /// Bytes currently held by saved activations (for the memory benchmark).
  std::size_t bytes() const;

 private:
  Activations<T>* impl_;
};

/// Forward pass over a batch of B sequences of length T (tokens[b*T + t], 0 <= token < vocab_size,
/// 1 <= T <= block_size), cross-entropy against targets (same layout; target < 0 = position not
/// counted). Returns the mean loss over counted positions. If `grad` is not null it must have
/// layout.total entries; the parameter gradient of the returned loss is ADDED to it (so gradient
/// accumulation is repeated calls followed by a scale). `hooks` (may be null) apply interventions;
/// with hooks the backward pass is not allowed (throws cf::InvalidArgument). If `logprobs` is not
/// null it receives log p(target) per position (B*T entries, 0 where target < 0).
template <class T>
T forward_backward(const Model<T>& model, const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                   std::vector<T>* grad, Workspace<T>& ws, const ForwardHooks* hooks = nullptr,
                   std::vector<T>* logprobs = nullptr);

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

/// Load a model from a checkpoint written by `train` (docs/checkpoint_format.md); throws
/// cf::InvalidArgument for a missing, truncated or foreign file (see cf/nn/checkpoint.hpp).
Model<float> load_model(const std::string& checkpoint_path);

}  // namespace cf::nn
