#pragma once
// Custom seeds for the model's backward pass (issue 10): the gradient of an objective other than
// the training loss, read at a residual stream instead of the parameters. Used by
// cf/influence/influence.hpp (Position bias (Herasimchyk et al.) Eq. 6: d p(yhat | x) / d e_j) and
// cf/influence/jacobian.hpp (Runway (Lee & Clark) Theorem 3.3: d h_d(L+r) / d h_s(L)). Passed to
// cf::nn::forward_backward, or to a SeededPass that runs elsewhere (lib/gpu's device trainer).
// Plain types and no Eigen: lib/gpu's CUDA build (nvcc) includes this header for the seed rule
// (check_seed_shape) and the top-prediction seed (TopSeed) it evaluates on the device.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "cf/core/error.hpp"

namespace cf::nn {

/// The objective of a top-prediction seed (TopSeed): the probability p(yhat), its logarithm, or the
/// logit z_yhat of the top prediction yhat.
enum class TopObjective { Probability, LogProbability, Logit };

/// The output seed of influence (Position bias (Herasimchyk et al.) Eq. 6) as a descriptor instead
/// of a callback, so that a device evaluates it where the probabilities are: at the last position of
/// every sequence, the objective f of that position's top prediction yhat = argmax p (the first
/// index on ties); the other positions contribute nothing. d f / d logits, with p = softmax(z):
/// Probability p_yhat (e_yhat - p), LogProbability e_yhat - p, Logit e_yhat. yhat and p(yhat) per
/// sequence [B] are written to `yhat` and `p_yhat` when not null.
template <class T>
struct TopSeed {
  TopObjective objective = TopObjective::Probability;
  std::vector<std::int32_t>* yhat = nullptr;
  std::vector<T>* p_yhat = nullptr;
};

/// TopSeed on the host: overwrites the probabilities [B Tn, V] with d f / d logits (the CPU's
/// form, and the reference of a device's).
template <class T>
void apply_top_seed(const TopSeed<T>& s, T* probs, int B, int Tn, int V) {
  if (s.yhat) s.yhat->assign(static_cast<std::size_t>(B), -1);
  if (s.p_yhat) s.p_yhat->assign(static_cast<std::size_t>(B), T(0));
  for (int b = 0; b < B; ++b) {
    T* p = probs + (static_cast<std::int64_t>(b) * Tn + Tn - 1) * V;
    int y = 0;
    for (int v = 1; v < V; ++v)
      if (p[v] > p[y]) y = v;
    const T py = p[y];
    if (s.yhat) (*s.yhat)[static_cast<std::size_t>(b)] = y;
    if (s.p_yhat) (*s.p_yhat)[static_cast<std::size_t>(b)] = py;
    for (int v = 0; v < V; ++v) {
      const T onehot = v == y ? T(1) : T(0);
      p[v] = s.objective == TopObjective::Probability      ? py * (onehot - p[v])
             : s.objective == TopObjective::LogProbability ? onehot - p[v]
                                                           : onehot;
    }
    std::fill(probs + static_cast<std::int64_t>(b) * Tn * V, p, T(0));  // positions 0 .. Tn-2
  }
}

/// Seed and read-out of a backward pass. Notation: h(l) [N, C] is the residual stream entering
/// block l (l = 0: the encoder output, token + position embedding as used at each position;
/// l = n_layer: the stream before the final norm), N = B*T rows (row n = b*T + t).
///  - Output seed (resid_layer < 0): the forward pass runs to the head as usual; `on_probs` is
///    called with the next-token probabilities softmax(logits) [N, V] and must overwrite them IN
///    PLACE with d objective / d logits (it replaces the cross-entropy gradient; the loss returned
///    is still the mean cross-entropy over counted targets, 0 when none is counted). `top` is the
///    same for the top-prediction objective (TopSeed), which a device evaluates without the
///    probabilities crossing to the host; exactly one of on_probs and top is given.
///  - Residual seed (1 <= resid_layer <= n_layer): the objective is sum_{n,c} resid[n,c] h(resid_layer)[n,c];
///    blocks >= resid_layer, the final norm and the head are not evaluated; forward_backward returns
///    the objective's value instead of the loss.
///  - Read-out: `dresid` (if not null) receives d objective / d h(out_layer) [N, C], with
///    0 <= out_layer < resid_layer (output seed: out_layer <= n_layer); blocks below out_layer are not
///    back-propagated. The parameter gradient buffer passed to forward_backward receives the partial
///    parameter gradient of the blocks visited (scratch for the caller).
template <class T>
struct GradientSeed {
  std::function<void(T* probs, int N, int V)> on_probs;
  std::optional<TopSeed<T>> top;
  int resid_layer = -1;
  const T* resid = nullptr;
  int out_layer = 0;
  std::vector<T>* dresid = nullptr;
};

/// The rule of a valid seed for a model of n_layer blocks, on plain values so that lib/gpu's
/// device trainer applies the same rule to its own seed type: a residual seed lies in
/// [1, n_layer] with its buffer; otherwise `output_forms` (how many of on_probs and top are given)
/// is 1; 0 <= out_layer <= resid_layer - 1 (output seed: <= n_layer). Throws cf::InvalidArgument.
inline void check_seed_shape(int n_layer, int resid_layer, bool has_resid_buffer, int output_forms, int out_layer) {
  const bool resid = resid_layer >= 0;
  require(!resid || (resid_layer >= 1 && resid_layer <= n_layer && has_resid_buffer),
          "gradient seed: resid_layer = ", resid_layer, " must lie in [1, n_layer = ", n_layer, "] with a seed buffer");
  require(resid || output_forms > 0, "gradient seed: neither on_probs nor a residual seed");
  require(resid || output_forms == 1, "gradient seed: both on_probs and a top-prediction seed");
  const int top = resid ? resid_layer - 1 : n_layer;
  require(out_layer >= 0 && out_layer <= top, "gradient seed: out_layer = ", out_layer, " outside [0, ", top, "]");
}

/// check_seed_shape for a GradientSeed.
template <class T>
void check_seed_shape(const GradientSeed<T>& s, int n_layer) {
  check_seed_shape(n_layer, s.resid_layer, s.resid != nullptr, int(bool(s.on_probs)) + int(s.top.has_value()),
                   s.out_layer);
}

/// A seeded forward + backward over B sequences of Tn tokens (tokens, targets [B Tn]) with
/// forward_backward's semantics and its own scratch parameter gradient: returns the mean loss
/// (output seed) or the objective (residual seed) and fills seed.dresid. The analyses of
/// lib/influence take one so that a device (lib/gpu's device trainer, wired in by the tool) can
/// replace the CPU's forward_backward without lib/influence depending on it.
template <class T>
using SeededPass = std::function<T(const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                                   const GradientSeed<T>& seed)>;

}  // namespace cf::nn
