#pragma once
// Stochastic order and stochastically monotone kernels (Position bias (Herasimchyk et al.), Assumption 4.1, Definition
// A.1, Lemmas A.2-A.5; docs/spec.md section 2), and numerical demonstrations of the finite-depth forces
// (Propositions 4.2-4.5). Each function taking a `backend` runs its O(n^3) part there (kernel
// products, the triple sums; issue 30, cf/rollout/product_backend.hpp); null = the CPU (the oracle).
#include <Eigen/Dense>
#include <vector>

#include "cf/rollout/kernel.hpp"
#include "cf/rollout/product_backend.hpp"

namespace cf::rollout {

/// Prefix masses F(k) = sum_{j<=k} p_j, k = 0..n-1.
Eigen::VectorXd prefix_mass(const Eigen::VectorXd& p);

/// Stochastic order mu ⪯ nu ("mu is earlier"): every prefix mass of mu >= that of nu - tol.
/// mu, nu: distributions of equal length.
bool stochastically_precedes(const Eigen::VectorXd& mu, const Eigen::VectorXd& nu, double tol = 1e-10);

/// Monotonicity statistics of a row-stochastic kernel K (n x n) over all triples (i < i', k),
/// k = 0..n-1, with gap = F_{i'}(k) - F_i(k) (a violation of Definition A.1 when gap > tol).
struct MonotonicityStats {
  long long triples = 0;          ///< n (n-1) / 2 * n
  long long violations = 0;       ///< triples with gap > tol
  double violation_rate = 0;      ///< violations / triples
  double mean_gap = 0;            ///< mean gap over violating triples (0 if none)
  double expected_shortfall = 0;  ///< mean over all triples of gap [gap > tol] (0 for a monotone kernel)
  double max_gap = 0;             ///< largest gap (<= 0 for a monotone kernel)
  bool monotone() const { return violations == 0; }
};

/// Compute the statistics in O(n^3) time, O(n^2) memory. tol >= 0 (SPEC default 1e-10).
MonotonicityStats monotonicity_stats(const RowMatrix& K, double tol = 1e-10, const ProductBackend* backend = nullptr);

/// Residual kernel (1 - a) I + a K (Lemma A.3), a in [0, 1].
RowMatrix residual_kernel(const RowMatrix& K, double a);

/// Prefix masses of the last row for every depth: F(L, k) = sum_{j<=k} P(L)[n-1, j] for
/// L = 0..alpha.size() (row L of the result; L = 0 is the identity), computed as
/// e^T R(L) ... R(1) U with U[j,k] = [j <= k], applied right to left (O(L n^3) dense).
/// kernels: L row-stochastic n x n matrices, kernels[l] = Abar(l+1).
Eigen::MatrixXd prefix_mass_by_depth(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha,
                                     const ProductBackend* backend = nullptr);

/// Result of one proposition check: the largest violation of the claimed inequality (<= ~1e-12
/// when the proposition holds numerically) and whether the hypotheses held.
struct PropositionCheck {
  double max_violation = 0;
  bool hypotheses_hold = true;  ///< kernels monotone (4.2, 4.5), alpha ordered (4.3), ...
};

/// Prop. 4.2 (primacy drift): F_L(k) non-decreasing in L; violation = max F_L(k) - F_{L+1}(k).
PropositionCheck check_primacy_drift(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha,
                                     const ProductBackend* backend = nullptr);

/// Prop. 4.3 (residual => recency): alpha <= alpha_prime entrywise implies
/// F(k; alpha) <= F(k; alpha_prime); violation = max F(k; alpha) - F(k; alpha_prime).
PropositionCheck check_residual_recency(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha,
                                        const Eigen::VectorXd& alpha_prime, const ProductBackend* backend = nullptr);

/// Prop. 4.4 (recency-favouring bias => recency): F with the biased kernels <= F with the
/// unbiased ones, rowwise dominance checked as hypothesis; violation = max F_bias - F_plain.
PropositionCheck check_bias_recency(const std::vector<RowMatrix>& biased, const std::vector<RowMatrix>& plain,
                                    const Eigen::VectorXd& alpha, const ProductBackend* backend = nullptr);

/// Prop. 4.5 (diagonal content): for every row of P(L), prefix masses with content delta vs
/// without: delta >= 0 => F_delta <= F_0 (recency), delta <= 0 => F_delta >= F_0 (primacy).
/// sign = +1 or -1 states which case is claimed; violation = max sign (F_delta - F_0).
PropositionCheck check_diagonal_content(const std::vector<RowMatrix>& with_content,
                                        const std::vector<RowMatrix>& without, const Eigen::VectorXd& alpha, int sign,
                                        const ProductBackend* backend = nullptr);

}  // namespace cf::rollout
