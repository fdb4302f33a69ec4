#pragma once
// The whole Runway (Lee & Clark) Theorem 3.3 confrontation for one window of a trained model (issue 10):
// exact block norms J between h(L) and h(L+r) (cf/influence/jacobian.hpp), the bound B built from
// the model's head-mean attention on the same window (cf::rollout::jacobian_bound) with its self /
// gate split, the one-layer constants C_1(l) of every layer of the span with the zero check outside
// the mask, and the span check C* <= max C_1 (cf/influence/bound_check.hpp), in both norms.
#include <cstdint>
#include <vector>

#include "cf/influence/bound_check.hpp"
#include "cf/influence/jacobian.hpp"
#include "cf/rollout/jacobian_bound.hpp"

namespace cf::influence {

struct JacobianAnalysis {
  int layer = 0, span = 1, n = 0;
  LayerAttention attention;      ///< A(l) of every layer (row-normalised where flagged)
  JacobianBlocks J;              ///< span blocks h(L) -> h(L+r)
  rollout::JacobianBound bound;  ///< B = self + gate with C = 1
  std::vector<OneLayerCheck> one_layer_frobenius, one_layer_spectral;  ///< layers L .. L+r-1
  BoundCheck frobenius, spectral;                                      ///< span checks
  std::int64_t vjps = 0, backward_calls = 0, token_passes = 0;         ///< over the span and the one-layer runs
  double seconds_jacobians = 0;
};

/// Run the analysis on `tokens` (1 <= n <= block_size) for layers L .. L+r-1 (0 <= L, r >= 1,
/// L + r <= n_layer). seed_batch as in jacobian_blocks. tolerance: relative slack of C* <= max C_1
/// (float Jacobians: 1e-4). `progress` (optional, total analysis_cost(...).token_passes) advances
/// with every backward call. `pass`: where the Jacobians' batched passes run (as in jacobian_blocks;
/// the head-mean attention A(l), one forward pass, stays on the CPU). Throws cf::InvalidArgument for
/// bad layers or tokens.
JacobianAnalysis analyse_jacobian(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens, int L, int r,
                                  int seed_batch = 0, double tolerance = 1e-4, Progress* progress = nullptr,
                                  const nn::SeededPass<float>& pass = {});

/// The work analyse_jacobian does on n tokens: a one-layer jacobian_blocks call per layer L ..
/// L+r-1 and, when r > 1, one over the span (each of jacobian_blocks_cost(d_model, n, seed_batch)).
JacobianCost analysis_cost(int d_model, int n, int r, int seed_batch);

}  // namespace cf::influence
