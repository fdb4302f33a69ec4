// Tests of the routing/filtering decomposition (Routing/filtering (Jamil & Kapadia) §2-4, docs/spec.md §3). Every check
// compares with an independent computation: entry sums, general eigensolvers, the dense oracle.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "cf/core/error.hpp"
#include "cf/spectral/decomposition.hpp"
#include "cf/spectral/surgery.hpp"
#include "randn.hpp"

using namespace cf::spectral;
using cf::spectral::test::randn;

namespace {

// Relative tolerance of the factorised-vs-dense comparison (acceptance 1: 1e-8 in double).
constexpr double kAgree = 1e-8;

}  // namespace

TEST_CASE("Frobenius split identity ||M||^2 = ||F||^2 + ||R||^2 for random 1..40 x 1..40", "[routing]") {
  for (Index n : {1, 2, 7, 40}) {
    const Eigen::MatrixXd M = randn(n, n, 11 + unsigned(n));
    const Parts p = split(M);
    // Independent: sum of squared entries, written out.
    double m2 = 0, f2 = 0, r2 = 0;
    for (Index i = 0; i < n; ++i)
      for (Index j = 0; j < n; ++j) {
        m2 += M(i, j) * M(i, j);
        f2 += p.F(i, j) * p.F(i, j);
        r2 += p.R(i, j) * p.R(i, j);
      }
    CHECK(std::abs(m2 - (f2 + r2)) <= 1e-12 * m2);
    CHECK((p.F + p.R - M).norm() <= 1e-14 * M.norm());
    CHECK((p.F - p.F.transpose()).norm() == 0.0);
    CHECK((p.R + p.R.transpose()).norm() == 0.0);
  }
}

TEST_CASE("Skew routing part has even rank and purely imaginary eigenvalues", "[routing]") {
  for (Index n : {5, 6, 33}) {
    const Parts p = split(randn(n, n, 100 + unsigned(n)));
    Eigen::EigenSolver<Eigen::MatrixXd> es(p.R, false);
    REQUIRE(es.info() == Eigen::Success);
    const double scale = p.R.norm();
    CHECK(es.eigenvalues().real().cwiseAbs().maxCoeff() <= 1e-12 * scale);
    // Rank by an independent full-pivot LU: even (n - 1 for odd n, n for even n, random input).
    Eigen::FullPivLU<Eigen::MatrixXd> lu(p.R);
    lu.setThreshold(1e-10);
    CHECK(lu.rank() % 2 == 0);
    CHECK(lu.rank() == (n % 2 ? n - 1 : n));
    // Singular values come in pairs, one pair per rotation plane.
    const Eigen::VectorXd s = singular_values_skew(p.R);
    for (Index i = 0; i + 1 < 2 * (n / 2); i += 2) CHECK(std::abs(s[i] - s[i + 1]) <= 1e-12 * s[0]);
  }
  // Low-rank kernel W = W_Q W_K^T with d_k = 3 in d = 20: rank(R) is even and <= 2 d_k.
  const Eigen::MatrixXd W = randn(20, 3, 1) * randn(20, 3, 2).transpose();
  const HeadSpectrum h = analyse_dense(W);
  CHECK(h.R.numerical_rank % 2 == 0);
  CHECK(h.R.numerical_rank <= 6);
}

TEST_CASE("Effective rank of one rotation plane is 2 and of k equal values is k", "[routing]") {
  // A single rotation plane: R = a (u v^T - v u^T) with orthonormal u, v.
  Eigen::MatrixXd R = Eigen::MatrixXd::Zero(6, 6);
  R(0, 3) = 2.5;
  R(3, 0) = -2.5;
  const Eigen::VectorXd s = singular_values_skew(R);
  CHECK(effective_rank_entropy(s) == Approx(2.0).epsilon(1e-12));
  CHECK(effective_rank_participation(s) == Approx(2.0).epsilon(1e-12));
  CHECK(effective_rank_entropy(Eigen::VectorXd::Constant(5, 0.3)) == Approx(5.0).epsilon(1e-12));
  CHECK(effective_rank_entropy(Eigen::VectorXd::Zero(4)) == 0.0);
  // One dominant value: erank close to 1 (hand computation of exp(H) for p = (0.99, 0.01)).
  Eigen::VectorXd v(2);
  v << 99, 1;
  CHECK(effective_rank_entropy(v) == Approx(std::exp(-(0.99 * std::log(0.99) + 0.01 * std::log(0.01)))));
  CHECK_THROWS_AS(effective_rank_entropy(Eigen::VectorXd::Constant(2, -1.0)), cf::InvalidArgument);
}

TEST_CASE("Routing-filtering ratio rho on a pure rotation, a symmetric matrix and a mix", "[routing]") {
  Eigen::MatrixXd M(2, 2);
  M << 1, 2, -2, 1;  // F = I, R = [[0,2],[-2,0]]: ||R||_F = 2 sqrt 2, ||F||_F = sqrt 2 -> rho = 2.
  const HeadSpectrum h = analyse_dense(M);
  CHECK(h.rho == Approx(2.0).epsilon(1e-14));
  CHECK(std::isinf(routing_filtering_ratio(1.0, 0.0)));
  CHECK(std::isnan(routing_filtering_ratio(0.0, 0.0)));
  // Eigenvalues of [[1,2],[-2,1]]: 1 +- 2i -> max Re lambda = 1.
  CHECK(h.max_re_lambda == Approx(1.0).epsilon(1e-12));
}

TEST_CASE("Proposition 1 (S-D stability) every eigenvalue of S - D has Re <= 0, random n = 2..120", "[routing]") {
  std::mt19937 g(7);
  std::uniform_real_distribution<double> U(0.0, 2.0);
  for (Index n : {2, 3, 17, 120}) {
    for (int trial = 0; trial < 5; ++trial) {
      const Eigen::MatrixXd X = randn(n, n, unsigned(1000 * n + trial));
      Eigen::MatrixXd S = 0.5 * (X - X.transpose()) * (trial + 1);
      Eigen::VectorXd d(n);
      for (Index i = 0; i < n; ++i) d[i] = trial == 0 ? 0.0 : U(g);  // trial 0: D = 0 (boundary)
      Eigen::EigenSolver<Eigen::MatrixXd> es(sd_interaction(S, d), false);
      REQUIRE(es.info() == Eigen::Success);
      // Rounding of a general eigensolver: |error| <~ n eps ||S||.
      CHECK(es.eigenvalues().real().maxCoeff() <= 1e-12 * (S.norm() + 1));
      // With every d_i > 0 the bound is strict: Re lambda <= -min d_i (x^* D x >= min d ||x||^2).
      if (trial > 0) CHECK(es.eigenvalues().real().maxCoeff() <= -d.minCoeff() + 1e-10 * (S.norm() + 1));
    }
  }
  // A standard (unconstrained) head is generically unstable: its symmetric part has a positive
  // eigenvalue, so S - D structure is what guarantees the bound.
  const Eigen::MatrixXd M = randn(30, 30, 5);
  CHECK(analyse_dense(M).max_re_lambda > 0);
}

TEST_CASE("Factorised weight-level decomposition agrees with the dense one to 1e-8, d = 64..200", "[routing]") {
  struct Case {
    Index d, dk;
    double scale;
  };
  for (Case c : {Case{64, 8, 1.0}, Case{200, 16, 1.0}, Case{30, 20, 0.25} /* p = min(d, 2 d_k) = d */,
                 Case{12, 32, 0.125} /* sequence level with n < d_k */}) {
    const Eigen::MatrixXd A = randn(c.d, c.dk, unsigned(3 * c.d)), B = randn(c.d, c.dk, unsigned(5 * c.d + 1));
    const HeadSpectrum f = analyse_factored(A, B, c.scale);
    const HeadSpectrum e = analyse_dense(c.scale * A * B.transpose());
    const auto agree = [](const Spectrum& x, const Spectrum& y) {
      const Index k = std::min(x.sigma.size(), y.sigma.size());
      const double top = y.sigma[0];
      CHECK((x.sigma.head(k) - y.sigma.head(k)).cwiseAbs().maxCoeff() <= kAgree * top);
      // Values beyond the core are exactly zero in theory: the dense tail must be ~0.
      if (y.sigma.size() > k) CHECK(y.sigma.tail(y.sigma.size() - k).maxCoeff() <= kAgree * top);
      CHECK(x.fro == Approx(y.fro).epsilon(kAgree));
      CHECK(x.erank_entropy == Approx(y.erank_entropy).epsilon(1e-7));
      CHECK(x.erank_participation == Approx(y.erank_participation).epsilon(kAgree));
      CHECK(x.numerical_rank == y.numerical_rank);
    };
    agree(f.F, e.F);
    agree(f.R, e.R);
    agree(f.M, e.M);
    CHECK(f.rho == Approx(e.rho).epsilon(kAgree));
    CHECK(std::abs(f.max_re_lambda - e.max_re_lambda) <= kAgree * e.M.sigma[0]);
    CHECK(f.n == c.d);
    CHECK(f.R.numerical_rank % 2 == 0);
    CHECK(f.R.numerical_rank <= std::min(c.d, 2 * c.dk));
  }
}

TEST_CASE("Factorised decomposition rejects mismatched or non-finite factors", "[routing]") {
  CHECK_THROWS_AS(analyse_factored(randn(5, 2, 1), randn(5, 3, 2)), cf::InvalidArgument);
  Eigen::MatrixXd A = randn(4, 2, 3);
  A(0, 0) = std::nan("");
  CHECK_THROWS_AS(analyse_factored(A, A), cf::InvalidArgument);
  CHECK_THROWS_AS(split(randn(3, 4, 1)), cf::InvalidArgument);
}

TEST_CASE("Thin-QR R factor satisfies R^T R = U^T U on well and ill conditioned 300 x 16 inputs", "[routing]") {
  Eigen::MatrixXd U = randn(300, 16, 77);
  for (double tiny : {1.0, 1e-7}) {
    U.col(3) *= tiny;  // second pass: cond ~ 1e7 -> Householder branch
    const Eigen::MatrixXd R = qr_r_factor(U);
    REQUIRE(R.rows() == 16);
    CHECK((R.transpose() * R - U.transpose() * U).norm() <= 1e-12 * U.squaredNorm());
    CHECK(R.isUpperTriangular(0.0));
  }
  // Ill-conditioned kernel (W_K nearly parallel to W_Q): factorised still matches dense.
  const Eigen::MatrixXd A = randn(80, 6, 1);
  const Eigen::MatrixXd B = A + 1e-6 * randn(80, 6, 2);
  const HeadSpectrum f = analyse_factored(A, B), e = analyse_dense(A * B.transpose());
  CHECK((f.F.sigma.head(12) - e.F.sigma.head(12)).cwiseAbs().maxCoeff() <= 1e-8 * e.F.sigma[0]);
  CHECK(f.R.fro == Approx(e.R.fro).epsilon(1e-6));
}
