// The analysers' heavy cores on the cf::gpu interface, executed on the CPU twin: the structured
// rollout step as batched affine scans (against lib/rollout), strided batched GEMM (against
// Eigen) and the batched symmetric eigensolver of the spectral per-head cores (residuals).
#include <Eigen/Dense>
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <random>
#include <vector>

#include "cf/gpu/ops.hpp"
#include "cf/rollout/kernel.hpp"
#include "cf/rollout/rollout.hpp"

namespace {

// A 5-head ALiBi rollout model (uniform, near-uniform, typical and steep slopes; window 0 = full
// causal) with random per-head deltas in [-2, 2) and head weights summing to 1, the deltas and
// weights also as the flat arrays the cf::gpu step takes; a random input vector v of length n.
struct AlibiCase {
  cf::rollout::AlibiModel model;
  std::vector<double> deltas, weights;
  Eigen::VectorXd v;
};
AlibiCase random_alibi(std::mt19937& g, long n, long window) {
  std::uniform_real_distribution<double> u(0.0, 1.0);
  const int H = 5;
  AlibiCase c;
  c.model.slopes = {0.0, 1e-4, 0.05, 0.5, 3.0};
  if (window > 0) c.model.mask.window = window;
  c.model.delta = Eigen::MatrixXd(1, H);
  c.deltas.resize(H);
  c.weights.resize(H);
  for (int h = 0; h < H; ++h) {
    c.deltas[h] = c.model.delta(0, h) = 4.0 * u(g) - 2.0;
    c.weights[h] = 0.1 + u(g);
  }
  double ws = 0;
  for (double x : c.weights) ws += x;
  for (double& x : c.weights) x /= ws;
  c.model.head_weights = c.weights;
  c.v.resize(n);
  for (long j = 0; j < n; ++j) c.v(j) = u(g);
  return c;
}

}  // namespace

TEST_CASE("gpu structured rollout step (affine scans) = cf::rollout::alibi_apply_left, entry by entry",
          "[gpu][thrust]") {
  std::mt19937 g(3);
  for (long n : {1L, 2L, 37L, 1000L}) {
    const AlibiCase c = random_alibi(g, n, 0);
    const int H = static_cast<int>(c.weights.size());
    const Eigen::VectorXd want = cf::rollout::alibi_apply_left(c.model, 0, c.v);
    std::vector<double> out(n);
    std::vector<cf::gpu::Affine> scratch(static_cast<std::size_t>(H) * n);
    cf::gpu::emu::alibi_rollout_apply_left(c.model.slopes.data(), c.deltas.data(), c.weights.data(), H, c.v.data(),
                                           out.data(), n, scratch.data());
    for (long j = 0; j < n; ++j) {
      INFO("n = " << n << ", j = " << j);
      REQUIRE(out[j] >= 0.0);
      // 1e-12 relative: both sum non-negative terms in double, in different orders
      REQUIRE(std::abs(out[j] - want(j)) <= 1e-12 * want(j) + 1e-300);
    }
  }
}

TEST_CASE(
    "gpu structured rollout step with strongly negative content = cf::rollout::alibi_apply_left (no cancellation)",
    "[gpu][thrust]") {
  // content delta down to -40 (measured BLOOM layers reach about -31): A[i,i] = a + b with a up to
  // e^40, so the diagonal must not be formed as a sum; 1e-12 relative on every entry, row 0 included
  std::mt19937 g(11);
  for (long window : {0L, 1L, 2L, 33L})
    for (double low : {-12.0, -31.0, -40.0}) {
      AlibiCase c = random_alibi(g, 300, window);
      const int H = static_cast<int>(c.weights.size());
      for (int h = 0; h < H; h += 2) c.deltas[h] = c.model.delta(0, h) = low;
      const Eigen::VectorXd want = cf::rollout::alibi_apply_left(c.model, 0, c.v);
      std::vector<double> out(300);
      std::vector<cf::gpu::Affine> scratch(2 * static_cast<std::size_t>(H) * 300);
      cf::gpu::emu::alibi_rollout_apply_left_window(c.model.slopes.data(), c.deltas.data(), c.weights.data(), H, window,
                                                    c.v.data(), out.data(), 300, scratch.data());
      double worst = 0;
      for (long j = 0; j < 300; ++j) worst = std::max(worst, std::abs(out[j] - want(j)) / want(j));
      INFO("window = " << window << ", delta = " << low);
      CHECK(worst <= 1e-12);
    }
}

TEST_CASE("gpu strided batched GEMM (CPU twin) = Eigen products, ragged shapes", "[gpu]") {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const int m = 7, n = 5, k = 13, batch = 3;
  std::vector<M> A, B, C;
  std::vector<float> a(batch * m * k), b(batch * k * n), c(batch * m * n, 1.0f);
  for (int i = 0; i < batch; ++i) {
    A.push_back(M::Random(m, k));
    B.push_back(M::Random(k, n));
    std::copy(A[i].data(), A[i].data() + m * k, a.data() + i * m * k);
    std::copy(B[i].data(), B[i].data() + k * n, b.data() + i * k * n);
  }
  cf::gpu::emu::gemm_strided_batched(m, n, k, 2.0f, a.data(), m * k, b.data(), k * n, 0.5f, c.data(), m * n, batch);
  for (int i = 0; i < batch; ++i) {
    const M want = 2.0f * A[i] * B[i] + 0.5f * M::Ones(m, n);
    const M got = Eigen::Map<M>(c.data() + i * m * n, m, n);
    REQUIRE((got - want).cwiseAbs().maxCoeff() < 1e-5f);
  }
}

TEST_CASE("gpu batched symmetric eigensolver (CPU twin): residuals |A V - V diag(w)|, ascending, orthonormal",
          "[gpu]") {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  for (int n : {1, 33, 128}) {  // past syevjBatched's 32 x 32 limit: the per-head cores reach 2 d_head
    const int batch = 3;
    std::vector<float> a(static_cast<std::size_t>(batch) * n * n), w(batch * n), V(a.size());
    std::vector<M> As;
    for (int b = 0; b < batch; ++b) {
      M X = M::Random(n, n);
      M S = X + X.transpose();
      As.push_back(S);
      std::copy(S.data(), S.data() + n * n, a.data() + static_cast<std::size_t>(b) * n * n);
    }
    cf::gpu::emu::sym_eig_batched(a.data(), n, batch, w.data(), V.data());
    for (int b = 0; b < batch; ++b) {
      const M Vb = Eigen::Map<M>(V.data() + static_cast<std::size_t>(b) * n * n, n, n);
      const Eigen::VectorXf wb = Eigen::Map<Eigen::VectorXf>(w.data() + b * n, n);
      const float scale = As[b].norm();
      CHECK((As[b] * Vb - Vb * wb.asDiagonal()).norm() <= 1e-5f * scale * n);
      CHECK((Vb.transpose() * Vb - M::Identity(n, n)).norm() <= 1e-5f * n);
      for (int i = 1; i < n; ++i) CHECK(wb(i) >= wb(i - 1));
    }
  }
}

TEST_CASE("gpu structured rollout step on a sliding window (segmented affine scans) = cf::rollout::alibi_apply_left",
          "[gpu][thrust]") {
  std::mt19937 g(5);
  for (long n : {1L, 2L, 37L, 1000L})
    for (long window : {1L, 2L, 3L, 7L, 32L, 999L, 1000L, 5000L}) {
      const AlibiCase c = random_alibi(g, n, window);
      const int H = static_cast<int>(c.weights.size());
      const Eigen::VectorXd want = cf::rollout::alibi_apply_left(c.model, 0, c.v);
      std::vector<double> out(n);
      std::vector<cf::gpu::Affine> scratch(2 * static_cast<std::size_t>(H) * n);
      cf::gpu::emu::alibi_rollout_apply_left_window(c.model.slopes.data(), c.deltas.data(), c.weights.data(), H, window,
                                                    c.v.data(), out.data(), n, scratch.data());
      double worst = 0;
      for (long j = 0; j < n; ++j) {
        INFO("n = " << n << ", window = " << window << ", j = " << j);
        REQUIRE(out[j] >= 0.0);
        worst = std::max(worst, std::abs(out[j] - want(j)) / want(j));
      }
      INFO("n = " << n << ", window = " << window);
      // 1e-12 relative, entry by entry: both sum non-negative terms in double, in different orders
      // (and r^d as exp(-m d) here, as a running product there)
      CHECK(worst <= 1e-12);
    }
}
