#include "cf/rollout/monotonicity.hpp"

#include <algorithm>
#include <cmath>

#include "cf/core/error.hpp"
#include "cf/rollout/preset.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {

Eigen::VectorXd prefix_mass(const Eigen::VectorXd& p) {
  Eigen::VectorXd F(p.size());
  double s = 0;
  for (long k = 0; k < p.size(); ++k) F(k) = (s += p(k));
  return F;
}

bool stochastically_precedes(const Eigen::VectorXd& mu, const Eigen::VectorXd& nu, double tol) {
  require(mu.size() == nu.size(), "stochastic order: sizes differ (", mu.size(), " vs ", nu.size(), ")");
  return ((prefix_mass(nu) - prefix_mass(mu)).array() <= tol).all();
}

namespace {
// The triple sums on the CPU: prefix masses F(i, k) of each row, then every gap F(i', k) - F(i, k).
GapSums gap_sums_cpu(const RowMatrix& K, double tol) {
  const long n = K.rows();
  RowMatrix F(n, n);  // F(i, k) prefix masses of row i
  for (long i = 0; i < n; ++i) {
    double s = 0;
    for (long k = 0; k < n; ++k) F(i, k) = (s += K(i, k));
  }
  GapSums g;
  for (long i = 0; i < n; ++i)
    for (long i2 = i + 1; i2 < n; ++i2)
      for (long k = 0; k < n; ++k) {
        const double gap = F(i2, k) - F(i, k);
        g.max_gap = std::max(g.max_gap, gap);
        if (gap > tol) {  // rounding-level gaps are neither violations nor shortfall
          ++g.violations;
          g.violating_gap_sum += gap;
        }
      }
  return g;
}
}  // namespace

MonotonicityStats monotonicity_stats(const RowMatrix& K, double tol, const ProductBackend* backend) {
  require(K.rows() == K.cols() && K.rows() >= 1, "monotonicity: K must be square n x n, got ", K.rows(), " x ",
          K.cols());
  require(tol >= 0, "monotonicity: tol >= 0 required, got ", tol);
  const long long n = K.rows();
  const GapSums g = backend ? backend->gap_sums(K, tol) : gap_sums_cpu(K, tol);
  MonotonicityStats st;
  st.triples = n * (n - 1) / 2 * n;
  st.violations = g.violations;
  st.max_gap = st.triples ? g.max_gap : 0;
  st.violation_rate = st.triples ? static_cast<double>(st.violations) / st.triples : 0;
  st.mean_gap = st.violations ? g.violating_gap_sum / st.violations : 0;
  st.expected_shortfall = st.triples ? g.violating_gap_sum / st.triples : 0;
  return st;
}

RowMatrix residual_kernel(const RowMatrix& K, double a) {
  require(a >= 0 && a <= 1, "residual kernel: 0 <= a <= 1 required, got ", a);
  RowMatrix R = a * K;
  R.diagonal().array() += 1 - a;
  return R;
}

Eigen::MatrixXd prefix_mass_by_depth(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha,
                                     const ProductBackend* backend) {
  require(!kernels.empty(), "prefix masses: at least one kernel required");
  validate_alpha(alpha, static_cast<int>(kernels.size()));
  const long n = kernels[0].rows();
  const long L = alpha.size();
  for (long l = 0; l < L; ++l)
    require(kernels[l].rows() == n && kernels[l].cols() == n, "prefix masses: kernel ", l + 1, " is not ", n, " x ", n);
  Eigen::MatrixXd out(L + 1, n);
  // Row vectors from the newest layer would need one pass per depth (O(L^2 n^2)); instead keep
  // Q_L = P(L) U (n x n) with Q_L = R(L) Q_{L-1} and read its last row at every depth.
  RowMatrix Q(n, n);
  for (long j = 0; j < n; ++j)
    for (long k = 0; k < n; ++k) Q(j, k) = j <= k ? 1.0 : 0.0;
  if (backend) {
    std::vector<LeftStep> steps;
    for (long l = 0; l < L; ++l) steps.push_back({1 - alpha(l), alpha(l)});
    backend->left_product([&](int l) { return kernels[static_cast<std::size_t>(l)]; }, steps, Q, n - 1, &out);
    return out;
  }
  out.row(0) = Q.row(n - 1);
  for (long l = 0; l < L; ++l) {
    Q = ((1 - alpha(l)) * Q + alpha(l) * (kernels[l] * Q)).eval();
    out.row(l + 1) = Q.row(n - 1);
  }
  return out;
}

namespace {
bool all_monotone(const std::vector<RowMatrix>& ks, const ProductBackend* backend) {
  for (const auto& K : ks)
    if (!monotonicity_stats(K, 1e-10, backend).monotone()) return false;
  return true;
}
RowMatrix full_rollout(const std::vector<RowMatrix>& ks, const Eigen::VectorXd& alpha, const ProductBackend* backend) {
  const long n = ks[0].rows();
  return rollout_matrix_dense([&](int l) { return ks[l]; }, alpha, n, backend);
}
RowMatrix row_prefix(const RowMatrix& P) {
  RowMatrix F = P;
  for (long k = 1; k < F.cols(); ++k) F.col(k) += F.col(k - 1);
  return F;
}
}  // namespace

PropositionCheck check_primacy_drift(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha,
                                     const ProductBackend* backend) {
  PropositionCheck c;
  c.hypotheses_hold = all_monotone(kernels, backend);
  const Eigen::MatrixXd F = prefix_mass_by_depth(kernels, alpha, backend);
  c.max_violation = -std::numeric_limits<double>::infinity();
  for (long l = 0; l + 1 < F.rows(); ++l)
    c.max_violation = std::max(c.max_violation, (F.row(l) - F.row(l + 1)).maxCoeff());
  return c;
}

PropositionCheck check_residual_recency(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha,
                                        const Eigen::VectorXd& alpha_prime, const ProductBackend* backend) {
  PropositionCheck c;
  validate_alpha(alpha_prime, static_cast<int>(kernels.size()));
  c.hypotheses_hold = (alpha.array() <= alpha_prime.array()).all();
  const Eigen::MatrixXd F = prefix_mass_by_depth(kernels, alpha, backend),
                        G = prefix_mass_by_depth(kernels, alpha_prime, backend);
  c.max_violation = (F.bottomRows(1) - G.bottomRows(1)).maxCoeff();
  return c;
}

PropositionCheck check_bias_recency(const std::vector<RowMatrix>& biased, const std::vector<RowMatrix>& plain,
                                    const Eigen::VectorXd& alpha, const ProductBackend* backend) {
  require(biased.size() == plain.size(), "Prop. 4.4 check: layer counts differ");
  PropositionCheck c;
  // Hypothesis of Lemma A.4: each biased row is later than the plain row, and the plain kernels
  // are monotone (the induction uses Lemma A.2 on them).
  for (std::size_t l = 0; l < biased.size() && c.hypotheses_hold; ++l)
    for (long i = 0; i < biased[l].rows(); ++i)
      if (!stochastically_precedes(plain[l].row(i).transpose(), biased[l].row(i).transpose())) {
        c.hypotheses_hold = false;
        break;
      }
  c.hypotheses_hold = c.hypotheses_hold && all_monotone(plain, backend);
  const Eigen::MatrixXd F = prefix_mass_by_depth(biased, alpha, backend),
                        G = prefix_mass_by_depth(plain, alpha, backend);
  c.max_violation = (F.bottomRows(1) - G.bottomRows(1)).maxCoeff();
  return c;
}

PropositionCheck check_diagonal_content(const std::vector<RowMatrix>& with_content,
                                        const std::vector<RowMatrix>& without, const Eigen::VectorXd& alpha, int sign,
                                        const ProductBackend* backend) {
  require(sign == 1 || sign == -1, "Prop. 4.5 check: sign must be +1 or -1, got ", sign);
  require(with_content.size() == without.size(), "Prop. 4.5 check: layer counts differ");
  PropositionCheck c;
  c.hypotheses_hold = all_monotone(without, backend) && all_monotone(with_content, backend);
  const RowMatrix F = row_prefix(full_rollout(with_content, alpha, backend)),
                  G = row_prefix(full_rollout(without, alpha, backend));
  c.max_violation = (sign * (F - G)).maxCoeff();
  return c;
}

}  // namespace cf::rollout
