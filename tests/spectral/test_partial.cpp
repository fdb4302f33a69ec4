// Spectra partial solvers against the dense Eigen solvers (residual-style checks, STYLE habit 8).
#include <catch2/catch.hpp>
#include <random>

#include "cf/core/error.hpp"
#include "cf/spectral/partial.hpp"
#include "cf/spectral/surgery.hpp"
#include "randn.hpp"

using namespace cf::spectral;
using cf::spectral::test::randn;

TEST_CASE("Spectra partial singular values of F and R match dense, n = 400, factored d_k = 16", "[routing]") {
  const Index n = 400, dk = 16;
  const Eigen::MatrixXd Q = randn(n, dk, 1), K = randn(n, dk, 2);
  const double scale = 0.25;
  const FactoredOperator op{Q, K, scale};
  const Eigen::MatrixXd M = scale * Q * K.transpose();
  const Parts p = split(M);
  const Eigen::VectorXd dF = singular_values_symmetric(p.F), dR = singular_values_skew(p.R);
  const Index nev = 8;
  const PartialResult rF = partial_singular_values_symmetric(SymmetricPart<FactoredOperator>{op}, nev);
  const PartialResult rR = partial_singular_values(SkewPart<FactoredOperator>{op}, nev);
  REQUIRE(rF.converged);
  REQUIRE(rR.converged);
  CHECK(rF.method == "spectra");
  CHECK(rR.method == "spectra");
  // Spectra tol 1e-10 relative on Ritz values; the Gram route squares, so sqrt halves nothing
  // for the leading values (well separated from 0).
  CHECK((rF.values - dF.head(nev)).cwiseAbs().maxCoeff() <= 1e-8 * dF[0]);
  CHECK((rR.values - dR.head(nev)).cwiseAbs().maxCoeff() <= 1e-8 * dR[0]);
}

TEST_CASE("Spectra max Re lambda of S - D matches the dense eigensolver, n = 300", "[routing]") {
  const Index n = 300, dk = 8;
  const Eigen::MatrixXd Q = randn(n, dk, 3), K = randn(n, dk, 4);
  const FactoredOperator op{Q, K, 1.0 / std::sqrt(double(dk))};
  const SkewPart<FactoredOperator> S{op};
  std::mt19937 g(9);
  std::uniform_real_distribution<double> U(0.1, 1.0);
  Eigen::VectorXd d(n);
  for (Index i = 0; i < n; ++i) d[i] = U(g);
  const DiagonalShift<SkewPart<FactoredOperator>> SD{S, d};
  const PartialResult r = partial_max_real_eigenvalue(SD);
  REQUIRE(r.converged);
  const double dense = max_real_eigenvalue_dense(materialise(SD));
  CHECK(r.values[0] == Approx(dense).margin(1e-6));
  CHECK(r.values[0] <= 0);  // Proposition 1
  // A dense general matrix as well.
  const Eigen::MatrixXd M = randn(n, n, 10);
  const PartialResult r2 = partial_max_real_eigenvalue(DenseOperator{M});
  REQUIRE(r2.converged);
  CHECK(r2.values[0] == Approx(max_real_eigenvalue_dense(M)).margin(1e-6));
}

TEST_CASE("Partial solvers fall back to dense where Spectra cannot apply (small n, nev >= n - 1)", "[routing]") {
  const Eigen::MatrixXd M = randn(5, 5, 1);
  const PartialResult r = partial_singular_values(DenseOperator{M}, 4);
  CHECK(r.method == "dense");
  Eigen::BDCSVD<Eigen::MatrixXd> svd(M);
  CHECK((r.values - svd.singularValues().head(4)).norm() <= 1e-12 * svd.singularValues()[0]);
  // nev = n - 1 with n above the dense threshold: Spectra's nev < ncv <= n cannot hold usefully.
  PartialOptions o;
  o.dense_max_n = 2;
  const Eigen::MatrixXd M2 = randn(10, 10, 2);
  const Parts p = split(M2);
  const PartialResult r2 = partial_singular_values_symmetric(DenseOperator{p.F}, 9, o);
  CHECK(r2.method == "dense");
  CHECK(r2.values.size() == 9);
  CHECK_THROWS_AS(partial_singular_values(DenseOperator{M}, 0), cf::InvalidArgument);
  CHECK_THROWS_AS(partial_singular_values(DenseOperator{M}, 6), cf::InvalidArgument);
  // Tiny general problem: n = 3 leaves no room for GenEigs (nev + 2 < ncv <= n).
  o.dense_max_n = 0;
  const Eigen::MatrixXd M3 = randn(3, 3, 4);
  const PartialResult r3 = partial_max_real_eigenvalue(DenseOperator{M3}, o);
  CHECK(r3.method == "dense");
  CHECK(r3.values[0] == Approx(max_real_eigenvalue_dense(M3)));
}

TEST_CASE("Partial solvers where Spectra does not converge: the dense fallback, else a status without values",
          "[routing]") {
  // one restart with a tolerance no Ritz value meets: Spectra reports NotConverging
  const Index n = 200;
  const Eigen::MatrixXd M = randn(n, n, 21);
  const Parts p = split(M);
  PartialOptions o;
  o.max_iter = 1;
  o.tol = 1e-300;
  o.ncv = 6;
  Eigen::BDCSVD<Eigen::MatrixXd> svd(M);
  const Eigen::VectorXd dF = singular_values_symmetric(p.F);
  const double re = max_real_eigenvalue_dense(M);
  // within dense_fallback_max_n: the dense values, labelled as a fallback
  const PartialResult a = partial_singular_values(DenseOperator{M}, 3, o);
  const PartialResult b = partial_singular_values_symmetric(DenseOperator{p.F}, 3, o);
  const PartialResult c = partial_max_real_eigenvalue(DenseOperator{M}, o);
  for (const PartialResult* r : {&a, &b, &c}) {
    CHECK(r->method == "dense (spectra did not converge)");
    CHECK(r->converged);
  }
  CHECK((a.values - svd.singularValues().head(3)).norm() <= 1e-12 * svd.singularValues()[0]);
  CHECK((b.values - dF.head(3)).norm() <= 1e-12 * dF[0]);
  CHECK(c.values[0] == Approx(re).epsilon(1e-12));
  // beyond it: no values, converged false, the method says so
  o.dense_fallback_max_n = n - 1;
  for (const PartialResult& r :
       {partial_singular_values(DenseOperator{M}, 3, o), partial_singular_values_symmetric(DenseOperator{p.F}, 3, o),
        partial_max_real_eigenvalue(DenseOperator{M}, o)}) {
    CHECK(r.method == "spectra (not converged)");
    CHECK_FALSE(r.converged);
    CHECK(r.values.size() == 0);
  }
}
