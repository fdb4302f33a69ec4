// Numerical rank and instability of float32 score matrices (issue 9; decomposition.hpp
// AnalysisOptions): rounding noise of the float32 forward pass must count neither as rank nor as
// instability. Oracle: the same Q, K in double, where M = Q K^T / sqrt(d_k) has exact rank d_k,
// and the nonzero eigenvalues of M from the small d_k x d_k problem C Q^T Q / sqrt(d_k).
#include <catch2/catch.hpp>
#include <cmath>

#include "cf/core/error.hpp"
#include "cf/spectral/decomposition.hpp"
#include "cf/spectral/surgery.hpp"
#include "randn.hpp"

using namespace cf::spectral;
using cf::spectral::test::randn;

namespace {

constexpr Index kN = 160, kDk = 24;  // the case of the issue: 160-token texts, d_head = 24

struct Scores {
  Eigen::MatrixXd Md;     // Q K^T / sqrt(d_k) in double from the float32 Q, K (exact rank d_k)
  Eigen::MatrixXd Mf;     // the same product formed in float32, as the forward pass does
  double max_re_nonzero;  // max Re of the nonzero eigenvalues, from the d_k x d_k problem
};

// K = Q C^T so that M = Q C Q^T / sqrt(d_k); C = sign * P + S with P symmetric positive definite
// and S skew: the nonzero eigenvalues of M are those of C G / sqrt(d_k), G = Q^T Q, which is
// similar to G^1/2 C G^1/2: all Re lambda < 0 for sign = -1, and > 0 for sign = +1.
Scores make_scores(double sign, unsigned seed) {
  const Eigen::MatrixXd A = randn(kDk, kDk, seed), B = randn(kDk, kDk, seed + 1);
  const Eigen::MatrixXd P = A * A.transpose() / double(kDk) + Eigen::MatrixXd::Identity(kDk, kDk);
  const Eigen::MatrixXd S = 0.5 * (B - B.transpose());
  const Eigen::MatrixXd C = sign * P + S;
  const Eigen::MatrixXf Qf = randn(kN, kDk, seed + 2).cast<float>();
  const Eigen::MatrixXf Kf = (Qf.cast<double>() * C.transpose()).cast<float>();
  const double s = 1.0 / std::sqrt(double(kDk));
  Scores r;
  r.Md = Qf.cast<double>() * Kf.cast<double>().transpose() * s;
  const Eigen::MatrixXf prod = Qf * Kf.transpose();
  r.Mf = (prod * float(s)).cast<double>();
  const Eigen::MatrixXd G = Qf.cast<double>().transpose() * Kf.cast<double>();  // = Q^T K = Q^T Q C^T
  Eigen::EigenSolver<Eigen::MatrixXd> es(G.transpose() * s, false);             // C Q^T Q / sqrt(d_k)
  r.max_re_nonzero = es.eigenvalues().real().maxCoeff();
  return r;
}

AnalysisOptions float32_options() {
  AnalysisOptions o;
  o.rounding_unit = 0x1p-24;
  return o;
}

}  // namespace

TEST_CASE("Sequence-level rank_R and rank_F of float32 scores count no round-off, n = 160, d_k = 24", "[routing]") {
  const Scores sc = make_scores(-1.0, 11);
  const HeadSpectrum exact = analyse_dense(sc.Md);  // double: exact rank d_k for F and R here
  REQUIRE(exact.F.numerical_rank == kDk);
  REQUIRE(exact.R.numerical_rank == kDk);
  // The old rule (relative 1e-10 on float32 scores) counts rounding noise as rank, above the
  // 2 d_k = 48 bound of rank F and rank R: the bug of issue 9.
  const HeadSpectrum naive = analyse_dense(sc.Mf);
  CHECK(naive.R.numerical_rank > 2 * kDk);
  CHECK(naive.F.numerical_rank > 2 * kDk);
  // With the float32 rounding unit (tolerance n 2^-24 sigma_max) the ranks are the exact ones.
  const HeadSpectrum f32 = analyse_dense(sc.Mf, float32_options());
  CHECK(f32.R.numerical_rank == exact.R.numerical_rank);
  CHECK(f32.F.numerical_rank == exact.F.numerical_rank);
  CHECK(f32.R.numerical_rank % 2 == 0);  // skew: singular values in pairs
  // The tolerance is far below the smallest true singular value (no real rank is lost).
  CHECK(f32.R.sigma[kDk - 1] > 100 * rank_tolerance(kN, float32_options()) * f32.R.sigma[0]);
}

TEST_CASE("Instability of float32 scores is decided above rounding: stable and unstable heads, n = 160", "[routing]") {
  // Stable head: nonzero eigenvalues all Re < 0, the other n - d_k are exactly 0 in exact
  // arithmetic; float32 rounding moves them by ~1e-7 ||M|| to either side.
  const Scores st = make_scores(-1.0, 21);
  REQUIRE(st.max_re_nonzero < 0);
  const HeadSpectrum f32 = analyse_dense(st.Mf, float32_options());
  const HeadSpectrum f64 = analyse_dense(st.Md);
  INFO("float32 max Re lambda " << f32.max_re_lambda << " (tol " << f32.lambda_tol << "), double " << f64.max_re_lambda
                                << " (tol " << f64.lambda_tol << ")");
  CHECK(std::abs(f32.max_re_lambda) <= f32.lambda_tol);  // the "instability" is pure rounding
  CHECK_FALSE(is_unstable(f32));
  CHECK_FALSE(is_unstable(f64));
  // Unstable head: a positive eigenvalue far above rounding is still reported.
  const Scores un = make_scores(+1.0, 31);
  REQUIRE(un.max_re_nonzero > 0);
  const HeadSpectrum u32 = analyse_dense(un.Mf, float32_options());
  CHECK(is_unstable(u32));
  CHECK(is_unstable(analyse_dense(un.Md)));
  CHECK(u32.max_re_lambda == Approx(un.max_re_nonzero).epsilon(1e-4));
}

TEST_CASE("Odd routing ranks are refused: singular values of the skew part come in pairs, n = 9", "[routing]") {
  const Eigen::MatrixXd M = randn(9, 9, 5);
  const Eigen::VectorXd sR = singular_values_skew(split(M).R);
  // The pairing itself: sigma_1 = sigma_2, sigma_3 = sigma_4, ... (and one zero for odd n).
  for (Index i = 0; i + 1 < 8; i += 2) CHECK(sR[i] == Approx(sR[i + 1]).epsilon(1e-12));
  CHECK(std::abs(sR[8]) <= 1e-12 * sR[0]);
  for (Component c : {Component::Routing, Component::Both}) {
    CHECK_THROWS_AS(apply_surgery(M, SurgerySpec{c, 3}), cf::InvalidArgument);
    CHECK_NOTHROW(apply_surgery(M, SurgerySpec{c, 4}));
    CHECK_NOTHROW(apply_surgery(M, SurgerySpec{c, 9}));  // k >= n: full rank, the identity
  }
  CHECK_NOTHROW(apply_surgery(M, SurgerySpec{Component::Filtering, 3}));  // F is symmetric: any k
}
