#pragma once
// Another machine's kernel products and kernel statistics (issue 30): the O(n^3) parts of the full
// rollout matrix (--matrix), the Jacobian bound of Runway (Lee & Clark) and the monotonicity checks
// of Position bias (Herasimchyk et al.) (Props. 4.2-4.5) behind one interface, so that lib/rollout's
// functions run on the CPU (no backend, the oracle) or on a device (lib/gpu's
// cf/gpu/rollout_backend.hpp) without lib/rollout knowing about devices. lib/rollout keeps the
// checks, the small O(n^2) steps and the report; a backend does the products and the triple sums.
#include <Eigen/Dense>
#include <limits>
#include <vector>

#include "cf/rollout/kernel.hpp"
#include "cf/rollout/operator.hpp"

namespace cf::rollout {

/// One factor of a left product: X <- keep X + mix A X (the rollout's residual mix R(l) with keep
/// = 1 - alpha_l, mix = alpha_l; the Jacobian bound's I + A with keep = mix = 1; A X alone with
/// keep = 0, mix = 1).
struct LeftStep {
  double keep = 1, mix = 0;
};

/// The raw sums of monotonicity_stats over the triples (i < i', k) of a kernel's prefix-mass gaps
/// g = F_{i'}(k) - F_i(k): the triples with g > tol, the sum of those g, and the largest g.
struct GapSums {
  long long violations = 0;
  double violating_gap_sum = 0;
  double max_gap = -std::numeric_limits<double>::infinity();
};

class ProductBackend {
 public:
  virtual ~ProductBackend() = default;
  /// X = start (n x n), then X <- steps[t].keep X + steps[t].mix A(t) X for t = 0, 1, ... with
  /// A(t) = kernel(t) (n x n, checked by the caller). When `rows` is not null, it
  /// receives row `record_row` of X before the first step and after each: (steps + 1) x n.
  virtual RowMatrix left_product(const KernelFn& kernel, const std::vector<LeftStep>& steps, const RowMatrix& start,
                                 long record_row = -1, Eigen::MatrixXd* rows = nullptr) const = 0;
  /// The gap sums of a square kernel K with prefix masses F(i, k) = sum_{j<=k} K(i, j) summed left
  /// to right (the same F as the CPU, so the same triples count as violations); tol >= 0.
  virtual GapSums gap_sums(const RowMatrix& K, double tol) const = 0;
};

}  // namespace cf::rollout
