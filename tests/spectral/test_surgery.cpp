// Surgery math (Routing/filtering (Jamil & Kapadia) §5.1, §6, App. B; docs/spec.md §3): Eckart–Young against brute
// force, exact identity at full rank, linearisation invariants, ELU+1 linear attention against the quadratic formula.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "cf/core/error.hpp"
#include "cf/spectral/surgery.hpp"
#include "randn.hpp"

using namespace cf::spectral;
using cf::spectral::test::randn;

namespace {
// Rank-k least squares by alternating minimisation (an algorithm independent of the SVD):
// X ~ P Q^T, alternately solving for P and Q by normal equations.
Eigen::MatrixXd als_rank_k(const Eigen::MatrixXd& X, Index k, unsigned seed, int iters = 3000) {
  Eigen::MatrixXd Q = randn(X.cols(), k, seed), P;
  for (int it = 0; it < iters; ++it) {
    P = X * Q * (Q.transpose() * Q).inverse();
    Q = X.transpose() * P * (P.transpose() * P).inverse();
  }
  return P * Q.transpose();
}
}  // namespace

TEST_CASE("Eckart-Young optimality of the rank-1 truncation against a brute-force grid, 2 x 2", "[routing]") {
  const Eigen::MatrixXd X = randn(2, 2, 42);
  const Eigen::MatrixXd X1 = truncate_rank(X, 1);
  const double err = (X - X1).norm();
  // Brute force over every rank-1 matrix s u v^T with unit u, v on a fine angle grid; the best
  // scalar for given u, v is s = u^T X v.
  double best = 1e300;
  const int N = 1500;
  for (int a = 0; a < N; ++a) {
    const Eigen::Vector2d u(std::cos(M_PI * a / N), std::sin(M_PI * a / N));
    for (int b = 0; b < N; ++b) {
      const Eigen::Vector2d v(std::cos(M_PI * b / N), std::sin(M_PI * b / N));
      const double s = u.dot(X * v);
      best = std::min(best, (X - s * u * v.transpose()).norm());
    }
  }
  CHECK(err <= best + 1e-12);
  CHECK(err >= best - 1e-4);  // the grid (step pi/1500) comes within ~1e-5 of the optimum
}

TEST_CASE("Eckart-Young optimality of rank-k truncation of F and R against alternating least squares, n = 12",
          "[routing]") {
  const Parts p = split(randn(12, 12, 3));
  for (const Eigen::MatrixXd* X : {&p.F, &p.R}) {
    for (Index k : {1, 2, 4, 6}) {
      const Eigen::MatrixXd Xk = truncate_rank(*X, k);
      const double err = (*X - Xk).norm();
      // Requested rank.
      Eigen::JacobiSVD<Eigen::MatrixXd> svd(Xk);
      CHECK((svd.singularValues().array() > 1e-10 * svd.singularValues()[0]).count() == k);
      // No rank-k competitor does better: ALS from several starts and random rank-k matrices.
      for (unsigned s = 0; s < 3; ++s) CHECK(err <= (*X - als_rank_k(*X, k, 100 + s)).norm() + 1e-9);
      for (unsigned s = 0; s < 50; ++s) {
        const Eigen::MatrixXd C = randn(12, k, 7 * s) * randn(12, k, 7 * s + 1).transpose();
        // Best scalar multiple of the random candidate.
        const double t = (C.cwiseProduct(*X)).sum() / C.squaredNorm();
        CHECK(err <= (*X - t * C).norm());
      }
    }
  }
}

TEST_CASE("Surgery at full rank is the identity bit for bit", "[routing]") {
  const Eigen::MatrixXd M = randn(9, 9, 5);
  for (Component c : {Component::Routing, Component::Filtering, Component::Both}) {
    for (Index k : {Index(-1), Index(9), Index(50)}) {
      const Eigen::MatrixXd out = apply_surgery(M, SurgerySpec{c, k});
      CHECK((out.array() == M.array()).all());
    }
  }
  // A low-rank part truncated at its own rank is also returned unchanged.
  const Eigen::MatrixXd L = randn(9, 2, 1) * randn(9, 2, 2).transpose();
  CHECK((truncate_rank(L, 3).array() == L.array()).all());
}

TEST_CASE("Top rotation plane by Lanczos equals the SVD rank-2 truncation of a skew matrix, n = 3 to 160",
          "[routing]") {
  for (Index n : {Index(3), Index(20), Index(33), Index(64), Index(128), Index(160)}) {
    // Dense Gaussian skew (small gaps between planes) and a score-like skew part of Q K^T
    // (rank <= 2 d_k = 16, decaying planes).
    const Eigen::MatrixXd G = randn(n, n, unsigned(n));
    const Eigen::MatrixXd Q = randn(n, 8, unsigned(n) + 1), K = randn(n, 8, unsigned(n) + 2);
    const Eigen::MatrixXd QK = Q * K.transpose();
    for (const Eigen::MatrixXd& S :
         {Eigen::MatrixXd(0.5 * (G - G.transpose())), Eigen::MatrixXd(0.5 * (QK - QK.transpose()))}) {
      const Eigen::MatrixXd fast = truncate_skew_top_pair(S), ref = truncate_rank(S, 2);
      // Lanczos stops at residual 1e-13 sigma_1^2; the plane error is that over the relative gap.
      CHECK((fast - ref).norm() <= 1e-8 * ref.norm());
      CHECK(((fast + fast.transpose()).array() == 0.0).all());  // exactly skew by construction
    }
  }
  // Exact rank 2 (one plane) and zero.
  const Eigen::MatrixXd a = randn(100, 1, 1), b = randn(100, 1, 2);
  const Eigen::MatrixXd P = a * b.transpose() - b * a.transpose();
  CHECK((truncate_skew_top_pair(P) - P).norm() <= 1e-12 * P.norm());
  CHECK(truncate_skew_top_pair(Eigen::MatrixXd::Zero(50, 50)).norm() == 0.0);
}

TEST_CASE("Remove routing and remove filtering leave the other part intact", "[routing]") {
  const Eigen::MatrixXd M = randn(7, 7, 8);
  const Parts p = split(M);
  const Eigen::MatrixXd noR = apply_surgery(M, SurgerySpec{Component::Routing, 0});
  const Eigen::MatrixXd noF = apply_surgery(M, SurgerySpec{Component::Filtering, 0});
  CHECK((noR - p.F).norm() <= 1e-14 * M.norm());
  CHECK((noF - p.R).norm() <= 1e-14 * M.norm());
  const Eigen::MatrixXd both = apply_surgery(M, SurgerySpec{Component::Both, 2});
  const Parts q = split(both);
  CHECK((q.F - truncate_rank(p.F, 2)).norm() <= 1e-12 * M.norm());
  CHECK((q.R - truncate_rank(p.R, 2)).norm() <= 1e-12 * M.norm());
}

TEST_CASE("Linearize keeps the top routing pair and one filtering scalar per head", "[routing]") {
  const Eigen::MatrixXd M = randn(10, 10, 9);
  const Parts p = split(M);
  const Eigen::MatrixXd L = linearize_standard(M);
  const Parts q = split(L);
  // Filtering: trace preserved, scalar multiple of I.
  const double s = p.F.trace() / 10;
  CHECK((q.F - s * Eigen::MatrixXd::Identity(10, 10)).norm() <= 1e-13);
  CHECK(linearize_standard(M, ScalarFiltering::MeanDiag).isApprox(L, 1e-14));
  // Routing: rank 2, equal to the top rotation plane, still skew.
  Eigen::JacobiSVD<Eigen::MatrixXd> svd(q.R);
  CHECK((svd.singularValues().array() > 1e-10).count() == 2);
  CHECK((q.R + q.R.transpose()).norm() <= 1e-12);
  Eigen::JacobiSVD<Eigen::MatrixXd> svdR(p.R);
  CHECK(svd.singularValues()[0] == Approx(svdR.singularValues()[0]));
  // S–D: d -> mean(d).
  const Eigen::VectorXd d = Eigen::VectorXd::LinSpaced(10, 0.1, 1.0);
  const Eigen::MatrixXd Lsd = linearize_sd(p.R, d);
  CHECK(Lsd.diagonal().mean() == Approx(-d.mean()));
  CHECK((split(Lsd).R - q.R).norm() <= 1e-12);
}

TEST_CASE("ELU+1 linear attention equals the quadratic causal formula, n = 16", "[routing]") {
  const Index n = 16, dk = 4, dv = 3;
  const Eigen::MatrixXd Q = randn(n, dk, 1), K = randn(n, dk, 2), V = randn(n, dv, 3);
  const Eigen::MatrixXd out = linear_attention_elu1(Q, K, V);
  auto phi = [](double x) { return x > 0 ? x + 1 : std::exp(x); };
  for (Index i = 0; i < n; ++i) {
    Eigen::RowVectorXd num = Eigen::RowVectorXd::Zero(dv);
    double den = 0;
    for (Index j = 0; j <= i; ++j) {
      double w = 0;
      for (Index c = 0; c < dk; ++c) w += phi(Q(i, c)) * phi(K(j, c));
      num += w * V.row(j);
      den += w;
    }
    CHECK((out.row(i) - num / den).norm() <= 1e-12 * (1 + num.norm() / den));
  }
}

TEST_CASE("Surgery inputs are validated", "[routing]") {
  CHECK_THROWS_AS(parse_component("mixing"), cf::InvalidArgument);
  CHECK(parse_component("routing") == Component::Routing);
  CHECK_THROWS_AS(truncate_rank(randn(3, 3, 1), -2), cf::InvalidArgument);
  CHECK_THROWS_AS(apply_surgery(randn(3, 4, 1), SurgerySpec{}), cf::InvalidArgument);
  CHECK(max_component_rank(1000, 64) == 128);
  CHECK(max_component_rank(15, 64) == 15);
}
