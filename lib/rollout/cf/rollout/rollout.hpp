#pragma once
// Residual-aware attention rollout (Position bias (Herasimchyk et al.), Eqs. 1-3; docs/spec.md section 2):
//   R(l) = (1 - alpha_l) I + alpha_l Abar(l),  P(L) = R(L) R(L-1) ... R(1),
//   p_j = P(L)[n-1, j] (influence of input j on the next-token position).
// Two paths: a general dense one (any kernels, O(L n^2) per layer after the kernels are built)
// and a structured one for ALiBi kernels with constant-plus-diagonal content, which are geometric
// in i - j: e^T R(L) ... R(1) in O(L H n) via suffix recurrences. Both are kernel operators run by
// the one loop of cf/rollout/operator.hpp; the functions below are its entry points by source.
#include <Eigen/Dense>

#include "cf/rollout/kernel.hpp"
#include "cf/rollout/operator.hpp"
#include "cf/rollout/product_backend.hpp"

namespace cf::rollout {

/// Last row of P(L) by the dense path: v = e_{n-1}^T, then v <- v R(l) for l = L..1 (newest
/// layer first). alpha: L entries in [0, 1]; kernel(l) must return an n x n matrix.
Eigen::VectorXd rollout_last_row_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n);

/// Dense last row from stored kernels: kernels.size() == L (kernels[l] = Abar(l+1)) or 1 (the
/// same kernel at every layer); each n x n. No per-layer copies.
Eigen::VectorXd rollout_last_row_dense(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha);

/// Full rollout matrix P(L) = R(L) ... R(1) (n x n) by dense products; `backend` computes the
/// products on a device (issue 30; null = the CPU), the checks stay here.
RowMatrix rollout_matrix_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n,
                               const ProductBackend* backend = nullptr);

/// Last row of P(L) for a structured ALiBi model in O(L H n) time and O(n + H K) memory, where K is
/// the number of leading rows whose normaliser still varies (about 40/min slope, capped by n and
/// the window; AlibiKernels). Agrees with the dense path to ~1e-13 relative. alpha: L entries in
/// [0, 1] with L = model.delta.rows() unless delta broadcasts; n >= 1.
Eigen::VectorXd rollout_last_row_alibi(const AlibiModel& model, const Eigen::VectorXd& alpha, long n,
                                       const RolloutOptions& o = {});

/// The same result by the dense path (builds Abar(l) with alibi_kernel_dense); O(L H n^2).
Eigen::VectorXd rollout_last_row_alibi_dense(const AlibiModel& model, const Eigen::VectorXd& alpha, long n);

/// One step v <- v Abar(l) of the structured path (exposed for tests): v has n entries.
Eigen::VectorXd alibi_apply_left(const AlibiModel& model, int l, const Eigen::VectorXd& v);

/// Summary of one distribution p over positions 0..n-1.
struct DistributionSummary {
  double first = 0;    ///< p_0
  double last = 0;     ///< p_{n-1}
  long argmin = 0;     ///< position of the minimum
  double min = 0;      ///< p_argmin
  double primacy = 0;  ///< mass of the first ceil(n/10) positions
  double recency = 0;  ///< mass of the last ceil(n/10) positions
};

/// Summarise p (n >= 1 entries).
DistributionSummary summarize(const Eigen::VectorXd& p);

}  // namespace cf::rollout
