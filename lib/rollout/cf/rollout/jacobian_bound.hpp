#pragma once
// Jacobian sensitivity bound of Runway (Lee & Clark) (Theorem 3.3 / A.1; docs/spec.md section 2):
//   || d h_d(L+r) / d h_s(L) || <= C^r [ (I + A(L+r-1)) ... (I + A(L)) ]_{ds},
// newest layer on the left, no 1/2 normalisation (entries can grow like 2^r), and its split into
// the self (residual) term and the direct-path gate times the runway product:
//   [M_r]_{ds} = [M_{r-1}]_{ds} + sum_w A(L+r-1)[d,w] [M_{r-1}]_{ws},  M_t = prod of t factors.
#include <vector>

#include "cf/rollout/kernel.hpp"
#include "cf/rollout/product_backend.hpp"

namespace cf::rollout {

/// The bound and its two parts, each n x n (entry (d, s)); bound = self_term + gate_term.
struct JacobianBound {
  RowMatrix bound;      ///< C^r [(I + A(L+r-1)) ... (I + A(L))]
  RowMatrix self_term;  ///< C^r [M_{r-1}]: the residual keeps what d already had at layer L+r-1
  RowMatrix gate_term;  ///< C^r A(L+r-1) M_{r-1}: direct-path gate times the runway product
};

/// attention: r >= 1 matrices A(L), A(L+1), ..., A(L+r-1) (oldest first), each n x n lower
/// triangular and row-stochastic (checked within 1e-9); C > 0. `backend` computes the products
/// M_{r-1} and A(L+r-1) M_{r-1} on a device (issue 30; null = the CPU).
JacobianBound jacobian_bound(const std::vector<RowMatrix>& attention, double C,
                             const ProductBackend* backend = nullptr);

}  // namespace cf::rollout
