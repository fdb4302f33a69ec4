#pragma once
// Custom seeds for the model's backward pass (issue 10): the gradient of an objective other than
// the training loss, read at a residual stream instead of the parameters. Used by
// cf/influence/influence.hpp (Position bias (Herasimchyk et al.) Eq. 6: d p(yhat | x) / d e_j) and
// cf/influence/jacobian.hpp (Runway (Lee & Clark) Theorem 3.3: d h_d(L+r) / d h_s(L)). Passed to
// cf::nn::forward_backward, or to a SeededPass that runs elsewhere (lib/gpu's device trainer).
#include <cstdint>
#include <functional>
#include <vector>

namespace cf::nn {

/// Seed and read-out of a backward pass. Notation: h(l) [N, C] is the residual stream entering
/// block l (l = 0: the encoder output, token + position embedding as used at each position;
/// l = n_layer: the stream before the final norm), N = B*T rows (row n = b*T + t).
///  - Output seed (resid_layer < 0): the forward pass runs to the head as usual; `on_probs` is
///    called with the next-token probabilities softmax(logits) [N, V] and must overwrite them IN
///    PLACE with d objective / d logits (it replaces the cross-entropy gradient; the loss returned
///    is still the mean cross-entropy over counted targets, 0 when none is counted).
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
  int resid_layer = -1;
  const T* resid = nullptr;
  int out_layer = 0;
  std::vector<T>* dresid = nullptr;
};

/// A seeded forward + backward over B sequences of Tn tokens (tokens, targets [B Tn]) with
/// forward_backward's semantics and its own scratch parameter gradient: returns the mean loss
/// (output seed) or the objective (residual seed) and fills seed.dresid. The analyses of
/// lib/influence take one so that a device (lib/gpu's device trainer, wired in by the tool) can
/// replace the CPU's forward_backward without lib/influence depending on it.
template <class T>
using SeededPass = std::function<T(const std::int32_t* tokens, const std::int32_t* targets, int B, int Tn,
                                   const GradientSeed<T>& seed)>;

}  // namespace cf::nn
