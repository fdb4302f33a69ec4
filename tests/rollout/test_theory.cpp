// Theory of Position bias (Herasimchyk et al.) (Lemmas A.2-A.5, Propositions 4.2-4.5, Theorem 5.4) and Runway (Lee &
// Clark) (Theorem 3.3), each checked against an independent computation: explicit matrix products, brute-force
// enumeration, or closed forms evaluated separately.
#include <catch2/catch.hpp>
#include <cmath>
#include <random>

#include "cf/core/error.hpp"
#include "cf/rollout/agreement.hpp"
#include "cf/rollout/dichotomy.hpp"
#include "cf/rollout/jacobian_bound.hpp"
#include "cf/rollout/monotonicity.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

using namespace cf::rollout;

namespace {
// Mixture of geometric (ALiBi) heads: stochastically monotone (each head is; prefix masses average).
RowMatrix random_monotone(std::mt19937_64& rng, long n) {
  std::uniform_real_distribution<double> U(0, 1);
  AlibiModel m;
  for (int h = 0; h < 3; ++h)
    m.slopes.push_back(std::pow(10.0, -2 + 2.3 * U(rng))), m.head_weights.push_back(U(rng) + 0.05);
  return alibi_kernel_dense(m, 0, n);
}
// A random distribution on n points.
Eigen::VectorXd random_dist(std::mt19937_64& rng, long n) {
  std::uniform_real_distribution<double> U(0, 1);
  Eigen::VectorXd p(n);
  for (long i = 0; i < n; ++i) p(i) = U(rng);
  return p / p.sum();
}
// nu = mu with mass moved to later positions: nu is later, so mu ⪯ nu.
Eigen::VectorXd shift_later(std::mt19937_64& rng, const Eigen::VectorXd& mu) {
  std::uniform_real_distribution<double> U(0, 1);
  Eigen::VectorXd nu = mu;
  for (long j = 0; j + 1 < nu.size(); ++j) {
    const double moved = U(rng) * 0.5 * nu(j);
    nu(j) -= moved;
    nu(j + 1 + static_cast<long>(U(rng) * (nu.size() - j - 1))) += moved;
  }
  return nu;
}
// Brute-force prefix-mass comparison: mu ⪯ nu iff sum_{j<=k} mu_j >= sum_{j<=k} nu_j for all k.
bool precedes_brute(const Eigen::VectorXd& mu, const Eigen::VectorXd& nu) {
  for (long k = 0; k < mu.size(); ++k)
    if (mu.head(k + 1).sum() < nu.head(k + 1).sum() - 1e-12) return false;
  return true;
}
bool monotone_brute(const RowMatrix& K) {
  for (long i = 0; i < K.rows(); ++i)
    for (long i2 = i + 1; i2 < K.rows(); ++i2)
      if (!precedes_brute(K.row(i).transpose(), K.row(i2).transpose())) return false;
  return true;
}
}  // namespace

TEST_CASE("Monotonicity statistics match brute-force triple counts", "[rollout][position_bias]") {
  RowMatrix K(3, 3);
  K << 1, 0, 0,       //
      0.2, 0.8, 0,    //
      0.5, 0.1, 0.4;  // row 2 puts more mass early than row 1: violations at k = 0 (0.5 > 0.2)
  const auto st = monotonicity_stats(K);
  CHECK(st.triples == 9);
  // Gaps F_{i'}(k) - F_i(k): (0,1): -0.8,0,0; (0,2): -0.5,-0.4,0; (1,2): 0.3,-0.4,0.
  CHECK(st.violations == 1);
  CHECK(st.violation_rate == Approx(1.0 / 9));
  CHECK(st.mean_gap == Approx(0.3));
  CHECK(st.expected_shortfall == Approx(0.3 / 9));
  CHECK(st.max_gap == Approx(0.3));
  std::mt19937_64 rng(7);
  for (int t = 0; t < 5; ++t) {
    const RowMatrix M = random_monotone(rng, 20);
    CHECK(monotonicity_stats(M).monotone() == monotone_brute(M));
    CHECK(monotonicity_stats(M).monotone());
  }
}

TEST_CASE("Lemma A.2 order preservation under a stochastically monotone kernel", "[rollout][position_bias]") {
  std::mt19937_64 rng(1);
  for (int t = 0; t < 30; ++t) {
    const long n = 4 + t % 20;
    const RowMatrix K = random_monotone(rng, n);
    REQUIRE(monotone_brute(K));
    const Eigen::VectorXd mu = random_dist(rng, n), nu = shift_later(rng, mu);
    REQUIRE(precedes_brute(mu, nu));
    const Eigen::VectorXd muK = (mu.transpose() * K).transpose(), nuK = (nu.transpose() * K).transpose();
    CHECK(precedes_brute(muK, nuK));
    CHECK(stochastically_precedes(muK, nuK));
  }
}

TEST_CASE("Lemma A.3 residual kernels inherit stochastic monotonicity", "[rollout][position_bias]") {
  std::mt19937_64 rng(2);
  for (double a : {0.0, 0.1, 0.5, 0.93, 1.0}) {
    const RowMatrix K = random_monotone(rng, 25);
    RowMatrix R = (1 - a) * RowMatrix::Identity(25, 25) + a * K;  // explicit, not residual_kernel()
    CHECK(monotone_brute(R));
    CHECK((residual_kernel(K, a) - R).cwiseAbs().maxCoeff() < 1e-15);
    CHECK(monotonicity_stats(residual_kernel(K, a)).monotone());
  }
  // The preset kernel of BLOOM-176B (no content) is monotone too (Assumption 4.1 holds for ALiBi).
  AlibiModel m;
  m.slopes = load_preset("bloom").slopes;
  CHECK(monotone_brute(alibi_kernel_dense(m, 0, 40)));
}

TEST_CASE("Lemma A.4 rowwise dominance implies dominance after one step", "[rollout][position_bias]") {
  std::mt19937_64 rng(3);
  for (int t = 0; t < 20; ++t) {
    const long n = 5 + t;
    // K' = residual kernel of K with a < 1: each row of K' is later than K's (mass moved to the
    // diagonal, the latest admissible position), Eq. 8 of Position bias (Herasimchyk et al.).
    const RowMatrix K = random_monotone(rng, n);
    const RowMatrix Kp = residual_kernel(K, 0.4);
    for (long i = 0; i < n; ++i) REQUIRE(precedes_brute(K.row(i).transpose(), Kp.row(i).transpose()));
    const Eigen::VectorXd mu = random_dist(rng, n);
    CHECK(precedes_brute((mu.transpose() * K).transpose(), (mu.transpose() * Kp).transpose()));
  }
}

TEST_CASE("Lemma A.5 monotone-vector propagation", "[rollout][position_bias]") {
  std::mt19937_64 rng(4);
  std::uniform_real_distribution<double> U(0, 1);
  for (int t = 0; t < 20; ++t) {
    const long n = 3 + t;
    const RowMatrix K = random_monotone(rng, n);
    Eigen::VectorXd f(n);  // decreasing in its index
    double x = 1;
    for (long j = 0; j < n; ++j) f(j) = (x -= U(rng) * 0.1);
    const Eigen::VectorXd Kf = K * f;
    for (long i = 0; i + 1 < n; ++i) CHECK(Kf(i) >= Kf(i + 1) - 1e-14);
  }
}

TEST_CASE("Proposition 4.2 primacy drift on BLOOM-176B and random monotone kernels", "[rollout][position_bias]") {
  const Preset p = load_preset("bloom");
  AlibiModel m;
  m.slopes = p.slopes;
  const long n = 32;
  const std::vector<RowMatrix> ks(p.layers, alibi_kernel_dense(m, 0, n));
  const auto c = check_primacy_drift(ks, p.alpha_measured);
  CHECK(c.hypotheses_hold);
  CHECK(c.max_violation <= 1e-12);
  // Independent: F_L(k) from separate last-row rollouts of the first L layers (newest on the left).
  for (int L : {1, 10, 35, 69}) {
    auto K = [&](int) { return ks[0]; };
    const Eigen::VectorXd F1 = prefix_mass(rollout_last_row_dense(K, p.alpha_measured.head(L), n));
    const Eigen::VectorXd F2 = prefix_mass(rollout_last_row_dense(K, p.alpha_measured.head(L + 1), n));
    CHECK(((F1 - F2).array() <= 1e-12).all());
    CHECK((prefix_mass_by_depth(ks, p.alpha_measured).row(L).transpose() - F1).cwiseAbs().maxCoeff() < 1e-13);
  }
  std::mt19937_64 rng(5);
  std::uniform_real_distribution<double> U(0, 1);
  for (int t = 0; t < 5; ++t) {
    std::vector<RowMatrix> rk;
    Eigen::VectorXd al(8);
    for (int l = 0; l < 8; ++l) rk.push_back(random_monotone(rng, 24)), al(l) = U(rng);
    const auto cr = check_primacy_drift(rk, al);
    CHECK(cr.hypotheses_hold);
    CHECK(cr.max_violation <= 1e-12);
  }
}

TEST_CASE("Proposition 4.3 stronger residual gives recency", "[rollout][position_bias]") {
  std::mt19937_64 rng(6);
  std::uniform_real_distribution<double> U(0, 1);
  for (int t = 0; t < 8; ++t) {
    const long n = 20;
    std::vector<RowMatrix> ks;
    Eigen::VectorXd a(6), ap(6);
    for (int l = 0; l < 6; ++l)
      ks.push_back(random_monotone(rng, n)), a(l) = U(rng), ap(l) = a(l) + (1 - a(l)) * U(rng);
    const auto c = check_residual_recency(ks, a, ap);
    CHECK(c.hypotheses_hold);
    CHECK(c.max_violation <= 1e-12);
    // Independent: explicit rollouts with both schedules.
    auto K = [&](int l) { return ks[l]; };
    CHECK(precedes_brute(rollout_last_row_dense(K, ap, n), rollout_last_row_dense(K, a, n)));
  }
}

TEST_CASE("Proposition 4.4 recency-favouring ALiBi bias gives recency", "[rollout][position_bias]") {
  const Preset p = load_preset("mpt-7b");
  const long n = 40;
  AlibiModel biased, flat;
  biased.slopes = p.slopes;
  flat.slopes.assign(p.slopes.size(), 0.0);  // no positional bias: uniform causal attention
  const std::vector<RowMatrix> kb(p.layers, alibi_kernel_dense(biased, 0, n)),
      kf(p.layers, alibi_kernel_dense(flat, 0, n));
  const auto c = check_bias_recency(kb, kf, p.alpha_measured);
  CHECK(c.hypotheses_hold);
  CHECK(c.max_violation <= 1e-12);
  // Independent: the uniform kernel's rows are 1/(i+1); compare the rollouts directly.
  RowMatrix U = RowMatrix::Zero(n, n);
  for (long i = 0; i < n; ++i) U.row(i).head(i + 1).setConstant(1.0 / (i + 1));
  CHECK((U - kf[0]).cwiseAbs().maxCoeff() < 1e-15);
  CHECK(precedes_brute(rollout_last_row_dense([&](int) { return U; }, p.alpha_measured, n),
                       rollout_last_row_dense([&](int) { return kb[0]; }, p.alpha_measured, n)));
}

TEST_CASE("Proposition 4.5 diagonal content gives recency for delta above 0 and primacy below",
          "[rollout][position_bias]") {
  const long n = 24;
  AlibiModel m;
  m.slopes = alibi_slopes_simple(8);
  Eigen::VectorXd alpha = Eigen::VectorXd::Constant(10, 0.4);
  const std::vector<RowMatrix> plain(10, alibi_kernel_dense(m, 0, n));
  for (double delta : {0.5, 3.0, -0.5, -2.0}) {
    AlibiModel c = m;
    c.delta = Eigen::MatrixXd::Constant(1, 1, delta);
    const std::vector<RowMatrix> wc(10, alibi_kernel_dense(c, 0, n));
    const int sign = delta > 0 ? 1 : -1;
    const auto r = check_diagonal_content(wc, plain, alpha, sign);
    INFO("delta " << delta);
    CHECK(r.hypotheses_hold);
    CHECK(r.max_violation <= 1e-12);
    // Independent: explicit products R(L)...R(1), every row compared by prefix masses.
    RowMatrix P0 = RowMatrix::Identity(n, n), P1 = P0;
    for (int l = 0; l < 10; ++l) {
      P0 = (residual_kernel(plain[l], 0.4) * P0).eval();
      P1 = (residual_kernel(wc[l], 0.4) * P1).eval();
    }
    for (long i = 0; i < n; ++i) {
      if (sign > 0)
        CHECK(precedes_brute(P0.row(i).transpose(), P1.row(i).transpose()));
      else
        CHECK(precedes_brute(P1.row(i).transpose(), P0.row(i).transpose()));
    }
  }
}

TEST_CASE("Theorem 5.4 part i summable alpha keeps the diagonal mass above the product bound",
          "[rollout][position_bias]") {
  AlibiModel m;
  m.slopes = {0.5, 0.05};
  const RowMatrix K = alibi_kernel_dense(m, 0, 5);
  const double eps = admissible_min(K);
  auto alpha = [](long l) { return 0.6 / std::pow(l + 1.0, 2.0); };  // summable
  const auto r = dichotomy(K, alpha, 20000, 4);
  CHECK(r.holds_i);
  // Independent: the bound in long double, and the mass by a double-precision dense rollout.
  long double prod = 1, sum = 0;
  for (long l = 1; l <= 20000; ++l) prod *= 1 - (1 - eps) * alpha(l), sum += alpha(l);
  CHECK(std::stod(r.bound_i) == Approx(static_cast<double>(prod)).epsilon(1e-12));
  CHECK(r.sum_alpha == Approx(static_cast<double>(sum)).epsilon(1e-12));
  Eigen::VectorXd al(2000);
  for (long l = 1; l <= 2000; ++l) al(l - 1) = alpha(l);
  const auto d = dichotomy(K, alpha, 2000, 4);
  const Eigen::VectorXd row = rollout_last_row_dense([&](int) { return K; }, al, 5);
  CHECK(std::stod(d.self_mass) == Approx(row(4)).epsilon(1e-12));
  CHECK(std::stod(d.self_mass) > 0.1);  // no collapse
}

TEST_CASE("Theorem 5.4 part ii non-summable alpha collapses onto token 0 below double range",
          "[rollout][position_bias]") {
  AlibiModel m;
  m.slopes = {0.7};
  const RowMatrix K = alibi_kernel_dense(m, 0, 4);
  const double eps = admissible_min(K);
  auto alpha = [](long l) {
    (void)l;
    return 0.5;
  };
  const auto r = dichotomy(K, alpha, 100000, 3);
  CHECK(r.holds_ii);
  // Independent: log10 of exp(-eps * sum alpha) by hand; the true mass underflows a double.
  CHECK(r.log10_bound_ii == Approx(-eps * 0.5 * 100000 / std::log(10.0)).epsilon(1e-10));
  CHECK(r.log10_off_zero < -308);
  CHECK(r.log10_off_zero <= r.log10_bound_ii);
  // At shallow depth the 50-digit result equals a double dense rollout.
  const auto s = dichotomy(K, alpha, 50, 3);
  const Eigen::VectorXd row = rollout_last_row_dense([&](int) { return K; }, Eigen::VectorXd::Constant(50, 0.5), 4);
  CHECK(std::stod(s.off_zero_mass) == Approx(1 - row(0)).epsilon(1e-9));
}

TEST_CASE("Theorem 3.3 Jacobian bound equals the brute-force path sum and splits into self and gate",
          "[rollout][runway]") {
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<double> U(0, 1);
  const long n = 5;
  const int r = 4;
  std::vector<RowMatrix> A;
  for (int t = 0; t < r; ++t) {
    RowMatrix M = RowMatrix::Zero(n, n);
    for (long i = 0; i < n; ++i) {
      for (long j = 0; j <= i; ++j) M(i, j) = U(rng);
      M.row(i) /= M.row(i).sum();
    }
    A.push_back(M);
  }
  const double C = 1.3;
  const auto b = jacobian_bound(A, C);
  // Brute force: sum over all position sequences d = x_r, ..., x_0 = s of prod_t (I + A_t)[x_{t+1}, x_t].
  for (long d = 0; d < n; ++d)
    for (long s = 0; s < n; ++s) {
      double total = 0;
      long seqs = 1;
      for (int t = 0; t < r - 1; ++t) seqs *= n;
      for (long code = 0; code < seqs; ++code) {
        std::vector<long> x(r + 1);
        x[0] = s;
        x[r] = d;
        long c = code;
        for (int t = 1; t < r; ++t) x[t] = c % n, c /= n;
        double w = 1;
        for (int t = 0; t < r; ++t) w *= (x[t + 1] == x[t] ? 1.0 : 0.0) + A[t](x[t + 1], x[t]);
        total += w;
      }
      CHECK(b.bound(d, s) == Approx(std::pow(C, r) * total).epsilon(1e-12));
      CHECK(b.bound(d, s) == Approx(b.self_term(d, s) + b.gate_term(d, s)).epsilon(1e-14));
      if (s > d) CHECK(b.bound(d, s) == 0.0);  // causal: no path backwards
    }
  // Diagonal entries with C = 1 grow like 2^r at most and at least 1 (the residual path).
  const auto b1 = jacobian_bound(A, 1.0);
  for (long i = 0; i < n; ++i) CHECK((b1.bound(i, i) >= 1.0 && b1.bound(i, i) <= 16.0));
  CHECK_THROWS_AS(jacobian_bound(A, 0.0), cf::InvalidArgument);
}

TEST_CASE("Influence agreement Spearman and W1 against closed forms", "[rollout][position_bias]") {
  Eigen::VectorXd x(5), y(5);
  x << 0.1, 0.4, 0.2, 0.2, 0.1;
  y << 1, 5, 3, 4, 2;
  // Ranks with ties averaged: x -> 0.5, 4, 2.5, 2.5, 0.5; y -> 0, 4, 2, 3, 1; Pearson of ranks.
  Eigen::VectorXd rx(5), ry(5);
  rx << 0.5, 4, 2.5, 2.5, 0.5;
  ry << 0, 4, 2, 3, 1;
  rx.array() -= rx.mean();
  ry.array() -= ry.mean();
  CHECK(spearman(x, y) == Approx(rx.dot(ry) / std::sqrt(rx.squaredNorm() * ry.squaredNorm())));
  CHECK(spearman(y, y) == Approx(1.0));
  // W1 between point masses at 0 and n-1 is 1 after normalisation by n-1.
  Eigen::VectorXd a = Eigen::VectorXd::Zero(5), b = a;
  a(0) = 1;
  b(4) = 1;
  CHECK(wasserstein1_normalised(a, b) == Approx(1.0));
  CHECK(wasserstein1_normalised(a, a) == 0.0);
}
