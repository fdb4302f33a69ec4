// Runway (Lee & Clark) Theorem 3.3 confrontation, see cf/influence/jacobian_analysis.hpp.
#include "cf/influence/jacobian_analysis.hpp"

#include <chrono>

#include "cf/core/error.hpp"
#include "cf/influence/seeded_pass.hpp"

namespace cf::influence {

JacobianCost analysis_cost(int d_model, int n, int r, int seed_batch) {
  const JacobianCost one = jacobian_blocks_cost(d_model, n, seed_batch);
  const int calls = r + (r > 1 ? 1 : 0);
  return {calls * one.backward_calls, calls * one.token_passes, one.pass_tokens};
}

JacobianAnalysis analyse_jacobian(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens, int L, int r,
                                  int seed_batch, double tolerance, Progress* progress,
                                  const nn::SeededPass<float>& pass) {
  const int nl = model.config.n_layer;
  require(L >= 0 && r >= 1 && L + r <= nl, "--layer L = ", L, " and --span r = ", r,
          " must satisfy 0 <= L, r >= 1, L + r <= n_layer = ", nl);
  JacobianAnalysis a;
  a.layer = L;
  a.span = r;
  a.n = static_cast<int>(tokens.size());
  a.attention = layer_attention(model, tokens);
  const nn::SeededPass<float> run = seeded_pass_or_cpu(model, pass);  // one scratch for all the runs
  const auto t0 = std::chrono::steady_clock::now();
  std::vector<double> c1f, c1s;
  for (int l = L; l < L + r; ++l) {
    JacobianBlocks j1 = jacobian_blocks(model, tokens, l, 1, false, seed_batch, progress, run);
    a.one_layer_frobenius.push_back(one_layer_check(j1.frobenius, a.attention.A[l]));
    a.one_layer_spectral.push_back(one_layer_check(j1.spectral, a.attention.A[l]));
    c1f.push_back(a.one_layer_frobenius.back().c1);
    c1s.push_back(a.one_layer_spectral.back().c1);
    a.vjps += j1.vjps, a.backward_calls += j1.backward_calls, a.token_passes += j1.token_passes;
    if (r == 1) a.J = std::move(j1);
  }
  if (r > 1) {
    a.J = jacobian_blocks(model, tokens, L, r, false, seed_batch, progress, run);
    a.vjps += a.J.vjps, a.backward_calls += a.J.backward_calls, a.token_passes += a.J.token_passes;
  }
  a.seconds_jacobians = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const std::vector<rollout::RowMatrix> A(a.attention.A.begin() + L, a.attention.A.begin() + L + r);
  a.bound = rollout::jacobian_bound(A, 1.0);
  a.frobenius = check_bound(a.J.frobenius, A, c1f, tolerance);
  a.spectral = check_bound(a.J.spectral, A, c1s, tolerance);
  return a;
}

}  // namespace cf::influence
