#pragma once
// The device trainer's top-prediction seed (cf::nn::TopSeed, influence's output seed; trainer_body.hpp
// seed_top): each sequence's top prediction and d objective / d logits from the probabilities,
// evaluated where the probabilities are, so that only the B predictions cross to the host.
#include <cstdint>

#include "cf/gpu/functors.hpp"
#include "cf/nn/gradient_seed.hpp"

namespace cf::gpu::detail {

/// A sequence's top prediction (cf::nn::TopSeed): its token and probability.
struct TopPrediction {
  std::int32_t token;
  float prob;
};
/// Sequence b's top prediction at its last position from the probabilities [B T, ld] (the first V
/// columns of each row; ld: the padded vocabulary): the first index of the largest
/// (cf::nn::apply_top_seed's rule). One sequence per call: V reads in one thread, a few per pass
/// (influence's windows), next to the GEMMs of the pass.
struct PickTop {
  const float* probs;
  TopPrediction* out;
  int T, V, ld;
  CF_HD void operator()(long long b) const {
    const float* p = probs + ((b + 1) * T - 1) * static_cast<long long>(ld);
    int y = 0;
    for (int v = 1; v < V; ++v)
      if (p[v] > p[y]) y = v;
    out[b] = TopPrediction{y, p[y]};
  }
};
/// d objective / d logits [B T, ld] of the top-prediction seed from the probabilities (element i;
/// cf::nn::apply_top_seed's formula): zero but on each sequence's last row, where Probability gives
/// p_yhat (e_yhat - p), LogProbability e_yhat - p, Logit e_yhat; zero in the padded columns
/// [V, ld). Element i reads only probs[i] (and the picks), so it may overwrite them in place.
struct TopSeedGrad {
  const float* probs;
  const TopPrediction* top;
  int T, V, ld;
  nn::TopObjective objective;
  CF_HD float operator()(long long i) const {
    const long long r = i / ld, v = i % ld;
    if (r % T != T - 1 || v >= V) return 0.0f;
    const TopPrediction y = top[r / T];
    const float onehot = v == y.token ? 1.0f : 0.0f;
    return objective == nn::TopObjective::Probability      ? y.prob * (onehot - probs[i])
           : objective == nn::TopObjective::LogProbability ? onehot - probs[i]
                                                           : onehot;
  }
};

}  // namespace cf::gpu::detail
