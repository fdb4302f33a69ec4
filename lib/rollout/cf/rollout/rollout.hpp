#pragma once
// Residual-aware attention rollout (Position bias (Herasimchyk et al.), Eqs. 1-3; docs/spec.md section 2):
//   R(l) = (1 - alpha_l) I + alpha_l Abar(l),  P(L) = R(L) R(L-1) ... R(1),
//   p_j = P(L)[n-1, j] (influence of input j on the next-token position).
// Two paths: a general dense one (any kernels, O(L n^2) per layer after the kernels are built)
// and a structured one for ALiBi kernels with constant-plus-diagonal content, which are geometric
// in i - j: e^T R(L) ... R(1) in O(L H n) via suffix recurrences.
#include <Eigen/Dense>
#include <functional>

#include "cf/rollout/kernel.hpp"

namespace cf::rollout {

/// Kernel provider for the dense path: returns Abar(l) (n x n, row-stochastic) for l in [0, L).
using KernelFn = std::function<RowMatrix(int l)>;

/// Last row of P(L) by the dense path: v = e_{n-1}^T, then v <- v R(l) for l = L..1 (newest
/// layer first). alpha: L entries in [0, 1]; kernel(l) must return an n x n matrix.
Eigen::VectorXd rollout_last_row_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n);

/// Dense last row from stored kernels: kernels.size() == L (kernels[l] = Abar(l+1)) or 1 (the
/// same kernel at every layer); each n x n. No per-layer copies.
Eigen::VectorXd rollout_last_row_dense(const std::vector<RowMatrix>& kernels, const Eigen::VectorXd& alpha);

/// Full rollout matrix P(L) = R(L) ... R(1) (n x n) by dense products.
RowMatrix rollout_matrix_dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n);

/// Last row of P(L) for a structured ALiBi model in O(L H n) time and O(n + H K) memory, where K is
/// the number of leading rows whose normaliser still varies (about 40/min slope, capped by n and
/// the window). Agrees with the dense path to ~1e-13 relative. alpha: L entries in [0, 1] with
/// L = model.delta.rows() unless delta broadcasts; n >= 1.
Eigen::VectorXd rollout_last_row_alibi(const AlibiModel& model, const Eigen::VectorXd& alpha, long n);

/// Largest (w - 1) x heads buffer (in doubles) of the windowed structured sweep; beyond it heads
/// are processed in chunks (same result). Default 2^24 (128 MB); tests lower it to exercise the
/// chunking. Not thread-safe to change while a rollout runs.
double& window_buffer_limit();

/// The same result by the dense path (builds Abar(l) with alibi_kernel_dense); O(L H n^2).
Eigen::VectorXd rollout_last_row_alibi_dense(const AlibiModel& model, const Eigen::VectorXd& alpha, long n);

/// One step v <- v Abar(l) of the structured path (exposed for tests): v has n entries.
Eigen::VectorXd alibi_apply_left(const AlibiModel& model, int l, const Eigen::VectorXd& v);

/// Largest n accepted by the dense paths (memory n^2 doubles, time L H n^2): 8192.
constexpr long kDenseMaxN = 8192;

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
