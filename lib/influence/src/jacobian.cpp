// Exact Jacobian block norms (Runway (Lee & Clark) Theorem 3.3), see cf/influence/jacobian.hpp.
#include "cf/influence/jacobian.hpp"

#include <Eigen/Eigenvalues>
#include <chrono>
#include <cmath>

#include "cf/core/error.hpp"
#include "cf/influence/seeded_pass.hpp"
#include "cf/nn/gradient_seed.hpp"

namespace cf::influence {

namespace {

// Largest singular value of a square block: sqrt of the top eigenvalue of J J^T (eigenvalues only).
double spectral_norm(const Eigen::MatrixXd& J) {
  if (J.size() == 0) return 0;
  const Eigen::MatrixXd G = J * J.transpose();
  Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> es(G, Eigen::EigenvaluesOnly);
  return std::sqrt(std::max(0.0, es.eigenvalues().maxCoeff()));
}

// One batched backward pass: seeds e_{c0+b} (b < B) at position d of the prefix of Tn = d + 1
// tokens, residual h(L + r) -> h(L); dres[(b Tn + s) C + c] = d h_d(L+r)[c0+b] / d h_s(L)[c].
template <class T>
void seeded_vjps(const nn::SeededPass<T>& pass, const std::vector<std::int32_t>& tokens, int C, int L, int r, int d,
                 int c0, int B, std::vector<T>& dres) {
  const int Tn = d + 1;
  std::vector<std::int32_t> tok(static_cast<std::size_t>(B) * Tn), tgt(tok.size(), -1);
  for (int b = 0; b < B; ++b)
    std::copy(tokens.begin(), tokens.begin() + Tn, tok.begin() + static_cast<std::size_t>(b) * Tn);
  std::vector<T> seedv(static_cast<std::size_t>(B) * Tn * C, T(0));
  for (int b = 0; b < B; ++b) seedv[(static_cast<std::size_t>(b) * Tn + d) * C + c0 + b] = T(1);
  nn::GradientSeed<T> gs;
  gs.resid_layer = L + r;
  gs.resid = seedv.data();
  gs.out_layer = L;
  gs.dresid = &dres;
  pass(tok.data(), tgt.data(), B, Tn, gs);
  require(dres.size() == seedv.size(), "internal: residual gradient has ", dres.size(), " entries, expected ",
          seedv.size());
}

}  // namespace

JacobianCost jacobian_blocks_cost(int d_model, int n, int seed_batch) {
  const int bs = seed_batch <= 0 ? d_model : std::min(seed_batch, d_model);
  JacobianCost c;
  c.backward_calls = static_cast<std::int64_t>(n) * ((d_model + bs - 1) / bs);
  c.token_passes = static_cast<std::int64_t>(d_model) * n * (n + 1) / 2;  // seeds x prefix lengths 1..n
  c.pass_tokens = static_cast<std::int64_t>(bs) * n;
  return c;
}

double time_jacobian_pass(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens, int L, int r,
                          int seed_batch, const nn::SeededPass<float>& pass) {
  const int C = model.config.d_model, n = static_cast<int>(tokens.size());
  require(n >= 1 && n <= model.config.block_size && L >= 0 && r >= 1 && L + r <= model.config.n_layer,
          "time_jacobian_pass: bad window or layers (n = ", n, ", L = ", L, ", r = ", r, ")");
  const int B = seed_batch <= 0 ? C : std::min(seed_batch, C);
  const nn::SeededPass<float> run = seeded_pass_or_cpu(model, pass);
  std::vector<float> dres;
  // the faster of two passes: the first also sizes the workspace and warms the caches (it alone
  // overestimated a 1.4 s run ten times)
  double best = 0;
  for (int k = 0; k < 2; ++k) {
    const auto t0 = std::chrono::steady_clock::now();
    seeded_vjps(run, tokens, C, L, r, n - 1, 0, B, dres);
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = k == 0 ? t : std::min(best, t);
  }
  return best;
}

template <class T>
JacobianBlocks jacobian_blocks(const nn::Model<T>& model, const std::vector<std::int32_t>& tokens, int L, int r,
                               bool keep_blocks, int seed_batch, Progress* progress, const nn::SeededPass<T>& pass) {
  const auto& cfg = model.config;
  const int n = static_cast<int>(tokens.size()), C = cfg.d_model;
  require(n >= 1 && n <= cfg.block_size, "Jacobian window length n = ", n,
          " must lie in [1, block_size = ", cfg.block_size, "]");
  require(L >= 0 && r >= 1 && L + r <= cfg.n_layer,
          "Jacobian layers: need 0 <= L and r >= 1 with L + r <= n_layer = ", cfg.n_layer, " (got L = ", L, ", r = ", r,
          ")");
  require(seed_batch >= 0, "seed batch must be >= 0 (got ", seed_batch, ")");
  const int bs = seed_batch == 0 ? C : std::min(seed_batch, C);
  JacobianBlocks out;
  out.layer = L;
  out.span = r;
  out.n = n;
  out.d_model = C;
  out.frobenius.setZero(n, n);
  out.spectral.setZero(n, n);
  if (keep_blocks) out.blocks.assign(static_cast<std::size_t>(n) * n, Eigen::MatrixXd());
  const nn::SeededPass<T> run = seeded_pass_or_cpu(model, pass);
  std::vector<Eigen::MatrixXd> rows(n);  // rows[s] = J_ds being filled (C x C)
  for (int d = 0; d < n; ++d) {
    const int Tn = d + 1;  // causal prefix
    for (int s = 0; s <= d; ++s) rows[s].setZero(C, C);
    for (int c0 = 0; c0 < C; c0 += bs) {
      const int B = std::min(bs, C - c0);
      std::vector<T> dres;
      seeded_vjps(run, tokens, C, L, r, d, c0, B, dres);
      for (int b = 0; b < B; ++b)
        for (int s = 0; s <= d; ++s)
          for (int c = 0; c < C; ++c)
            rows[s](c0 + b, c) = static_cast<double>(dres[(static_cast<std::size_t>(b) * Tn + s) * C + c]);
      out.vjps += B;
      out.backward_calls += 1;
      out.token_passes += static_cast<std::int64_t>(B) * Tn;
      if (progress) progress->advance(static_cast<std::int64_t>(B) * Tn);
    }
    for (int s = 0; s <= d; ++s) {
      out.frobenius(d, s) = rows[s].norm();
      out.spectral(d, s) = spectral_norm(rows[s]);
      if (keep_blocks) out.blocks[static_cast<std::size_t>(d) * n + s] = rows[s];
    }
  }
  return out;
}

LayerAttention layer_attention(const nn::Model<float>& model, const std::vector<std::int32_t>& tokens) {
  const int n = static_cast<int>(tokens.size());
  require(n >= 1 && n <= model.config.block_size, "attention window length n = ", n,
          " must lie in [1, block_size = ", model.config.block_size, "]");
  LayerAttention la;
  la.A.assign(model.config.n_layer, rollout::RowMatrix::Zero(n, n));
  la.row_normalised.assign(model.config.n_layer, false);
  nn::ForwardHooks hooks;
  hooks.on_layer = [&](const nn::LayerActivations& a) {
    rollout::RowMatrix& A = la.A[a.layer];
    const std::size_t TT = static_cast<std::size_t>(n) * n;
    for (int h = 0; h < a.n_head; ++h)
      for (int i = 0; i < n; ++i)
        for (int j = 0; j <= i; ++j) A(i, j) += a.attn_probs[h * TT + static_cast<std::size_t>(i) * n + j];
    A /= a.n_head;
    for (int i = 0; i < n; ++i) {
      const double s = A.row(i).sum();
      if (s > 1 + 1e-4) la.row_normalised[a.layer] = true;
      if (s > 0) A.row(i) /= s;
    }
  };
  nn::forward_logits(model, tokens, &hooks);
  return la;
}

template JacobianBlocks jacobian_blocks<float>(const nn::Model<float>&, const std::vector<std::int32_t>&, int, int,
                                               bool, int, Progress*, const nn::SeededPass<float>&);
template JacobianBlocks jacobian_blocks<double>(const nn::Model<double>&, const std::vector<std::int32_t>&, int, int,
                                                bool, int, Progress*, const nn::SeededPass<double>&);

}  // namespace cf::influence
