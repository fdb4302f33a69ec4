#pragma once
// Another machine's computation of the last row of P(L) (issue 30): the two rollout paths of
// cf/rollout/rollout.hpp behind one interface, so that the variants (cf/rollout/variants.hpp) run
// on the CPU (no backend, the oracle) or on a device (lib/gpu's cf/gpu/rollout_backend.hpp)
// without lib/rollout knowing about devices.
#include <Eigen/Dense>

#include "cf/rollout/kernel.hpp"
#include "cf/rollout/rollout.hpp"

namespace cf::rollout {

class LastRowBackend {
 public:
  virtual ~LastRowBackend() = default;
  /// Same arguments, checks and result as rollout_last_row_alibi (structured ALiBi kernels).
  virtual Eigen::VectorXd alibi(const AlibiModel& model, const Eigen::VectorXd& alpha, long n) const = 0;
  /// Same as rollout_last_row_dense(kernel, alpha, n) (any row-stochastic n x n kernels).
  virtual Eigen::VectorXd dense(const KernelFn& kernel, const Eigen::VectorXd& alpha, long n) const = 0;
};

}  // namespace cf::rollout
