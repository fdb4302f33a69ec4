#pragma once
// The device trainer's top-prediction seed (cf::nn::TopSeed, influence's output seed; trainer_body.hpp
// seed_top): each sequence's top prediction (Ops::top_prediction) and d objective / d logits from
// the probabilities, evaluated where the probabilities are, so that only the B predictions cross
// to the host.
#include <cstdint>

#include "cf/gpu/functors.hpp"
#include "cf/gpu/kernels/top_prediction.cuh"
#include "cf/nn/gradient_seed.hpp"

namespace cf::gpu::detail {

/// A sequence's top prediction (cf::nn::TopSeed), picked on the device by Ops::top_prediction
/// (kernels::top_prediction_kernel: one block per sequence, cf::nn::apply_top_seed's rule).
using kernels::TopPrediction;
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
